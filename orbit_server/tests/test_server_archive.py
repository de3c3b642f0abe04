"""The directory archive: records read back by id, the first copy of an id
wins, and the tails a kill leaves (a member no index line points to, a cut
index line) neither break reading nor the next append."""

from __future__ import annotations

from pathlib import Path

import attrs

from orbit_core.api import ExecutionDoc, ExecutionSummary, HistoryPage
from orbit_server.archive import INDEX, ArchivedExecution, DirectoryArchive, NoArchive

DAY_MS = 86_400_000


def record(eid: str, ended: int = 1000, status: str = "COMPLETED") -> ArchivedExecution:
    summary: ExecutionSummary = {
        "execution_id": eid,
        "workflow": "Wf",
        "version": "1.0.0",
        "status": status,
        "created_at_ms": ended - 10,
        "updated_at_ms": ended,
    }
    document: ExecutionDoc = {"id": eid, "status": status}  # type: ignore[typeddict-item]
    page: HistoryPage = {"execution_id": eid, "events": [{"seq": 1, "type": "WorkflowCreated"}]}
    return ArchivedExecution(summary, "sha256:x", document, (page,))


def test_records_read_back_by_id_and_list_newest_first(tmp_path: Path) -> None:
    archive = DirectoryArchive(tmp_path)
    archive.write([record("a", 1000), record("b", 2000 + DAY_MS)])
    archive.write([record("c", 3000, "FAILED")])
    assert sorted(p.name for p in tmp_path.glob("*.jsonl.gz")) == [
        "1970-01-01.jsonl.gz",
        "1970-01-02.jsonl.gz",
    ]
    again = DirectoryArchive(tmp_path)
    found = again.get("b")
    assert found is not None and found.summary["updated_at_ms"] == 2000 + DAY_MS
    assert found.history() == found.runs[0] and found.history(2) is None
    assert again.get("missing") is None
    assert [r["execution_id"] for r in again.list()] == ["b", "c", "a"]
    assert [r["execution_id"] for r in again.list(status="failed")] == ["c"]


def test_the_first_copy_of_an_id_wins(tmp_path: Path) -> None:
    archive = DirectoryArchive(tmp_path)
    archive.write([record("a", 1000, "COMPLETED")])
    archive.write([record("a", 1000, "FAILED")])
    for reader in (archive, DirectoryArchive(tmp_path)):
        found = reader.get("a")
        assert found is not None and found.summary["status"] == "COMPLETED"
        assert len(reader.list()) == 1


def test_tails_a_kill_leaves_are_dropped(tmp_path: Path) -> None:
    archive = DirectoryArchive(tmp_path)
    archive.write([record("a")])
    day = tmp_path / "1970-01-01.jsonl.gz"
    with day.open("ab") as f:
        f.write(b"\x1f\x8b\x08half a member")  # written, not yet indexed
    with (tmp_path / INDEX).open("ab") as f:
        f.write(b'{"id": "b", "fi')  # an index line cut short
    reopened = DirectoryArchive(tmp_path)
    assert reopened.get("b") is None
    reopened.write([record("b")])
    last = DirectoryArchive(tmp_path)
    assert {r["execution_id"] for r in last.list()} == {"a", "b"}
    assert last.get("a") is not None and last.get("b") is not None


def test_no_archive_keeps_nothing() -> None:
    none = NoArchive()
    none.write([record("a")])
    assert none.get("a") is None and none.list() == []


def test_servers_sharing_a_directory_read_what_the_others_wrote(tmp_path: Path) -> None:
    """Two archives on one directory (two servers of a cluster): each reads
    the other's records without reopening, and their appends follow each
    other cleanly."""
    first, second = DirectoryArchive(tmp_path), DirectoryArchive(tmp_path)
    first.write([record("a")])
    assert second.get("a") is not None
    second.write([record("b")])
    first.write([record("c")])
    for reader in (first, second, DirectoryArchive(tmp_path)):
        assert {r["execution_id"] for r in reader.list()} == {"a", "b", "c"}
        assert all(reader.get(eid) is not None for eid in "abc")


def test_a_reader_never_cuts_a_line_a_writer_is_still_writing(tmp_path: Path) -> None:
    writer = DirectoryArchive(tmp_path)
    writer.write([record("a")])
    index = tmp_path / INDEX
    whole = index.read_bytes()
    line = whole.splitlines(keepends=True)[0].replace(b'"a"', b'"b"')
    with index.open("ab") as f:
        f.write(line[:20])  # another server is halfway through its line
    reader = DirectoryArchive(tmp_path)
    assert index.read_bytes() == whole + line[:20]
    with index.open("ab") as f:
        f.write(line[20:])
    assert {r["execution_id"] for r in reader.list()} == {"a", "b"}


def test_a_later_copy_is_read_when_the_first_cannot_be(tmp_path: Path) -> None:
    day = tmp_path / "1970-01-01.jsonl.gz"
    day.write_bytes(b"not a gzip member")
    (tmp_path / INDEX).write_bytes(
        b'{"id": "a", "file": "1970-01-01.jsonl.gz", "offset": 0, "length": 17, "summary": '
        + b'{"execution_id": "a", "workflow": "Wf", "version": "1.0.0", "status": "COMPLETED", '
        + b'"created_at_ms": 990, "updated_at_ms": 1000}}\n'
    )
    archive = DirectoryArchive(tmp_path)
    assert archive.get("a") is None
    archive.write([record("a")])
    found = DirectoryArchive(tmp_path).get("a")
    assert found is not None and found.summary["status"] == "COMPLETED"


def test_a_filter_runs_over_the_search_rows_the_index_keeps(tmp_path: Path) -> None:
    from orbit_core.visibility.check import FieldCatalog, compile_filter
    from orbit_core.visibility.fields import SearchValue
    from orbit_core.visibility.query import decode_cursor

    catalog = FieldCatalog({"customer": {"Wf": "string"}, "amount": {"Wf": "float"}}, frozenset())
    archive = DirectoryArchive(tmp_path)
    rows = [
        ("a", "c-1", 100.0),
        ("b", "c-1", 900.0),
        ("c", "c-2", 700.0),
    ]
    archive.write(
        [
            attrs.evolve(
                record(eid, 1000 + i),
                search=(SearchValue("customer", who, None), SearchValue("amount", None, much)),
            )
            for i, (eid, who, much) in enumerate(rows)
        ]
        + [record("plain", 5000)]  # no search rows: only built-in fields match
    )
    for reader in (archive, DirectoryArchive(tmp_path)):

        def listed(
            where: str, reader: DirectoryArchive = reader, after: tuple[int, str] | None = None
        ) -> list[str]:
            found = reader.list(where=compile_filter(where, catalog), after=after)
            return [r["execution_id"] for r in found]

        assert listed('customer == "c-1"') == ["b", "a"]
        assert listed("amount > 500") == ["c", "b"]
        assert listed('customer == "c-1" and amount > 500') == ["b"]
        assert listed('not (customer == "c-1")') == ["plain", "c"]
        assert listed('status == "COMPLETED" and started >= "1970-01-01"') == [
            "plain",
            "c",
            "b",
            "a",
        ]
        # A page resumes after the (start, id) of the last row shown.
        position = decode_cursor(_cursor_of(reader.list(limit=2)[-1]))
        assert listed("amount > 0", after=position) == ["b", "a"]
    found = archive.get("b")
    assert found is not None and {v.field for v in found.search} == {"customer", "amount"}


def _cursor_of(summary: ExecutionSummary) -> str:
    from orbit_core.visibility.query import encode_position

    return encode_position(summary["created_at_ms"], summary["execution_id"])
