"""The archive retention writes finished executions to before deleting them
(`orbit server --archive DIR`; docs/retention.md).

A directory of gzip-compressed JSON Lines files, one per UTC day of the
executions' end (`2026-12-06.jsonl.gz`), and `index.jsonl`, one line per
archived execution: its id, the file, where in the file the gzip member
holding it starts and how long it is, its summary (what `orbit ps
--archived` lists) and its search index rows, if it had some (what `orbit
ps --archived --where` filters on, with the live index's typed filter run
in Python: `orbit_core.visibility.query.matches`). Each record is the
execution document, every run's history page, the definition hash and the
search rows, so the archive alone can be read, listed and replayed.

Crash safety. A batch is one gzip member appended to its day's file and
fsynced, then its index lines appended and fsynced (and the directory
fsynced when a file was created); only then may the caller delete the
executions from the store. Killed at any point, an execution is in the store,
in the archive, or in both (archived again by the next sweep: readers take
the first index line for an id). What a kill can leave behind is a tail no
index line points to: the unfinished last line of the index is dropped on
open, and a day file is cut back to the end of its last indexed member
before the next append, so members always follow each other cleanly.

One `DirectoryArchive` per directory and process: the server's sweeper
writes and its routes read through the same object (its index is kept in
memory, under a lock).

Several servers (a cluster) share one directory. A write holds `.lock`
(an exclusive `flock`) from reading the index's new lines to the fsync of
its own, so two writers (a deposed leader finishing its batch and the new
one) take turns and each appends after the other's last indexed member;
the tails a killed writer left are cut only under that lock. Readers take
no lock: before each read they add the index lines appended since they
last looked (whole lines only), so any server reads what any other wrote.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gzip
import os
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Protocol

import attrs
import orjson

from orbit_core.api import ExecutionDoc, ExecutionSummary, HistoryPage
from orbit_core.ports import ExecutionRow
from orbit_core.visibility.check import Filter
from orbit_core.visibility.fields import SearchValue
from orbit_core.visibility.query import matches

INDEX = "index.jsonl"
LOCK = ".lock"
# gzip's own default: on the archive's JSON as small as 9 (within a few
# bytes a member), at a third of the CPU, which the sweep's pace multiplies.
COMPRESS_LEVEL = 6


@attrs.frozen(slots=True)
class ArchivedExecution:
    """One archived execution: its summary (the `GET /v1/executions` row),
    definition hash, state document and the history page of each run, first
    run first."""

    summary: ExecutionSummary
    definition_hash: str
    document: ExecutionDoc
    runs: tuple[HistoryPage, ...]
    # Its rows of the search index when it was swept (none: the key is
    # left out of the record and of its index line).
    search: tuple[SearchValue, ...] = ()

    @property
    def execution_id(self) -> str:
        return self.summary["execution_id"]

    def to_json(self) -> bytes:
        record: dict[str, object] = {
            "execution_id": self.execution_id,
            "summary": self.summary,
            "definition_hash": self.definition_hash,
            "document": self.document,
            "runs": list(self.runs),
        }
        if self.search:
            record["search"] = search_to_json(self.search)
        return orjson.dumps(record)

    @classmethod
    def from_json(cls, data: bytes) -> ArchivedExecution:
        raw = orjson.loads(data)
        values = tuple(search_from_json(raw.get("search")).values())
        return cls(
            raw["summary"], raw["definition_hash"], raw["document"], tuple(raw["runs"]), values
        )

    def history(self, run: int | None = None) -> HistoryPage | None:
        """The page of `run` (default: the last run), or None."""
        if not self.runs:
            return None
        if run is None:
            return self.runs[-1]
        return self.runs[run - 1] if 1 <= run <= len(self.runs) else None


def search_to_json(values: Sequence[SearchValue]) -> dict[str, list[str | float | None]]:
    """Search rows as the archive writes them: field -> [text, number]."""
    return {v.field: [v.str_value, v.num_value] for v in values}


def search_from_json(raw: object) -> dict[str, SearchValue]:
    """The rows `search_to_json` wrote (anything else reads as none)."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, SearchValue] = {}
    for field, pair in raw.items():
        if isinstance(pair, list) and len(pair) == 2:
            text, number = pair
            out[field] = SearchValue(
                field,
                text if isinstance(text, str) else None,
                float(number) if isinstance(number, int | float) else None,
            )
    return out


def _row(summary: ExecutionSummary) -> ExecutionRow:
    """The projection row a filter reads, from an archived summary."""
    return ExecutionRow(
        summary["execution_id"],
        summary["workflow"],
        summary["version"],
        "",
        summary["status"],
        summary["created_at_ms"],
        summary["updated_at_ms"],
        0,
    )


class Archive(Protocol):
    """Where swept executions go; `write` returns once they are durable."""

    @property
    def location(self) -> str: ...

    def write(self, executions: Sequence[ArchivedExecution]) -> None: ...

    def get(self, execution_id: str) -> ArchivedExecution | None: ...

    def list(
        self,
        status: str | None = None,
        workflow: str | None = None,
        limit: int = 50,
        *,
        where: Filter | None = None,
        after: tuple[int, str] | None = None,
    ) -> list[ExecutionSummary]:
        """Newest first (by start, then id), after the (start, id) `after`,
        those passing `where` (a filter typed like the live index's)."""
        ...


class NoArchive:
    """`--archive none`: executions are deleted without a copy."""

    location = "none"

    def write(self, executions: Sequence[ArchivedExecution]) -> None:
        return None

    def get(self, execution_id: str) -> ArchivedExecution | None:
        return None

    def list(
        self,
        status: str | None = None,
        workflow: str | None = None,
        limit: int = 50,
        *,
        where: Filter | None = None,
        after: tuple[int, str] | None = None,
    ) -> list[ExecutionSummary]:
        return []


@attrs.frozen(slots=True)
class _Entry:
    file: str
    offset: int
    length: int
    summary: ExecutionSummary
    search: dict[str, SearchValue]


class DirectoryArchive:
    """The directory archive described in the module docstring."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._dir = Path(path)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        # Later copies of an id (a batch archived again), read when the
        # first cannot be (a member a dead writer's successor cut off).
        self._copies: dict[str, list[_Entry]] = {}
        # Where each day file's last indexed member ends.
        self._ends: dict[str, int] = {}
        # How far the index has been read (always the end of a whole line).
        self._read_to = 0
        self._refresh()

    @property
    def location(self) -> str:
        return str(self._dir)

    def _refresh(self) -> None:
        """Adds the index lines appended since the last look (by this
        process or another); a last line not yet whole is left for later.
        Called under `_lock` (or before the object is shared)."""
        index = self._dir / INDEX
        try:
            with index.open("rb") as f:
                f.seek(self._read_to)
                data = f.read()
        except FileNotFoundError:
            return
        complete = data.rfind(b"\n") + 1
        self._read_to += complete
        for line in data[:complete].splitlines():
            try:
                raw = orjson.loads(line)
                entry = _Entry(
                    raw["file"],
                    raw["offset"],
                    raw["length"],
                    raw["summary"],
                    search_from_json(raw.get("search")),
                )
                eid = raw["id"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
            if eid in self._entries:
                self._copies.setdefault(eid, []).append(entry)
            else:
                self._entries[eid] = entry
            end = entry.offset + entry.length
            self._ends[entry.file] = max(self._ends.get(entry.file, 0), end)

    def _cut_index_tail(self) -> None:
        """Drops the part line a killed writer left at the end of the index
        (under the write lock: no live writer is in the middle of one)."""
        index = self._dir / INDEX
        with index.open("ab") as f:
            if f.tell() > self._read_to:
                f.truncate(self._read_to)
                _sync(f)

    def write(self, executions: Sequence[ArchivedExecution]) -> None:
        by_day: dict[str, list[ArchivedExecution]] = {}
        for x in executions:
            by_day.setdefault(_day(x.summary["updated_at_ms"]), []).append(x)
        with self._lock, _locked(self._dir / LOCK):
            # Whatever another server appended since, then what a kill left.
            self._refresh()
            self._cut_index_tail()
            lines: list[bytes] = []
            created = False
            for name, group in sorted(by_day.items()):
                data = b"".join(x.to_json() + b"\n" for x in group)
                member = gzip.compress(data, compresslevel=COMPRESS_LEVEL, mtime=0)
                target = self._dir / name
                created = created or not target.exists()
                with target.open("ab") as f:
                    offset = self._ends.get(name, 0)
                    if f.tell() != offset:
                        f.truncate(offset)  # an unindexed tail a kill left
                        f.seek(offset)
                    f.write(member)
                    _sync(f)
                self._ends[name] = offset + len(member)
                for x in group:
                    line: dict[str, object] = {
                        "id": x.execution_id,
                        "file": name,
                        "offset": offset,
                        "length": len(member),
                        "summary": x.summary,
                    }
                    if x.search:
                        line["search"] = search_to_json(x.search)
                    lines.append(orjson.dumps(line) + b"\n")
            with (self._dir / INDEX).open("ab") as f:
                created = created or f.tell() == 0
                f.write(b"".join(lines))
                _sync(f)
            if created:
                _sync_dir(self._dir)
            # Read back as any other server reads them.
            self._refresh()

    def get(self, execution_id: str) -> ArchivedExecution | None:
        with self._lock:
            self._refresh()
            first = self._entries.get(execution_id)
            entries = [] if first is None else [first, *self._copies.get(execution_id, [])]
        for entry in entries:
            found = self._read(entry, execution_id)
            if found is not None:
                return found
        return None

    def _read(self, entry: _Entry, execution_id: str) -> ArchivedExecution | None:
        try:
            with (self._dir / entry.file).open("rb") as f:
                f.seek(entry.offset)
                member = f.read(entry.length)
            lines = gzip.decompress(member).splitlines()
        except (OSError, EOFError, gzip.BadGzipFile):
            return None
        needle = orjson.dumps(execution_id)
        for line in lines:
            if needle in line:
                found = ArchivedExecution.from_json(line)
                if found.execution_id == execution_id:
                    return found
        return None

    def list(
        self,
        status: str | None = None,
        workflow: str | None = None,
        limit: int = 50,
        *,
        where: Filter | None = None,
        after: tuple[int, str] | None = None,
    ) -> list[ExecutionSummary]:
        wanted = None if status is None else status.upper()
        with self._lock:
            self._refresh()
            entries = list(self._entries.values())
        rows = [
            e.summary
            for e in entries
            if (wanted is None or e.summary["status"] == wanted)
            and (workflow is None or e.summary["workflow"] == workflow)
            and (after is None or (e.summary["created_at_ms"], e.summary["execution_id"]) < after)
            and (where is None or matches(where, _row(e.summary), e.search))
        ]
        rows.sort(key=lambda r: (r["created_at_ms"], r["execution_id"]), reverse=True)
        return rows[: max(limit, 0)]

    def __len__(self) -> int:
        with self._lock:
            self._refresh()
            return len(self._entries)


def open_archive(location: str) -> Archive:
    """`--archive`'s value: `none`, or a directory (created if missing)."""
    if location == "none":
        return NoArchive()
    return DirectoryArchive(location)


def _day(ms: int) -> str:
    return _day_file(ms // 86_400_000)


@functools.lru_cache(maxsize=64)
def _day_file(day: int) -> str:
    """The file of a UTC day (days since the epoch): asked once per
    archived execution, and a sweep's executions share a few days."""
    return datetime.fromtimestamp(day * 86_400, UTC).strftime("%Y-%m-%d") + ".jsonl.gz"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive `flock` on `path`, for as long as the block runs."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _sync(f: BinaryIO) -> None:
    f.flush()
    os.fsync(f.fileno())


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
