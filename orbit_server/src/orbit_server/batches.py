"""Batch operations (beyond the book; docs/operating-executions.md): one
action over every execution a filter selects, run as a durable job.

A batch is created by `Batches.create` (`POST /v1/batches`): its row, then
its selection, written a slice at a time (`SLICE` ids per transaction, the
oldest execution first) while the row says `selecting`; then `running`. A
background thread (`Batches.start`) works through the open batches a slice
at a time: it claims the slice's items (one short write), acts on each
through the engine's own calls, and records the outcomes with the progress
(one short write), pausing `PAUSE_S` between slices so group commits and
starts go on in between. Nothing is held across slices, so the commit path
never waits for more than one small write.

Across a restart (or a SIGKILL) the job goes on where it stopped: a batch
still `selecting` finishes its selection after its last item, and the
items with no outcome are acted on. An item claimed but without an outcome
was interrupted while acted on; its action tells from the execution's
history whether it was applied since the claim (`Action.applied`), so no
execution is acted on twice.

The actions are a small registry (`ACTIONS`): an `Action` names itself,
checks its parameters, acts on one execution and tells whether it already
did. Restart and migrate are among them; another plugs in the same way
(`register`); routes and the store need no change.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs

from orbit_core import events as ev
from orbit_core.engine.facade import EngineApi
from orbit_core.errors import ConflictError, InvalidError, NotFoundError, OrbitError, StorageError
from orbit_core.jsontypes import JsonObject, JsonValue
from orbit_core.ports import BatchItem, BatchRow, BatchStore
from orbit_core.visibility.check import Filter as TypedFilter

# Items selected, claimed and recorded per transaction.
SLICE = 100
# Items acted on between two records of progress, and the pause after each.
ACT_SLICE = 25
PAUSE_S = 0.005
# How long the thread sleeps when no batch is open (a new one wakes it).
IDLE_S = 5.0
# In shared mode, how often a server that does not run the open batches
# tries to: it takes them over within this long after their runner stops.
WATCH_S = 1.0
# A batch `selecting` whose selection has not grown for this long was
# interrupted: its runner goes on with it.
SELECTING_STALE_MS = 5_000
# The statuses a filter may name (those of `orbit ps`).
STATUSES = frozenset({"RUNNING", "COMPENSATING", "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"})

OK = "ok"
SKIPPED = "skipped"
FAILED = "failed"


class Action(Protocol):
    """One kind of batch action."""

    @property
    def name(self) -> str:
        """The name in `POST /v1/batches`'s `action` and on the command line."""
        ...

    def params(self, body: JsonObject) -> JsonObject:
        """The action's own settings, checked (InvalidError otherwise)."""
        ...

    def act(self, engine: EngineApi, execution_id: str, params: JsonObject) -> None:
        """Acts on one execution; an OrbitError is its outcome."""
        ...

    def applied(self, events: Sequence[ev.Event], since_ms: int, params: JsonObject) -> bool:
        """Whether the history shows the action applied at or after
        `since_ms` (an item interrupted while acted on)."""
        ...

    def skips(self, code: str) -> bool:
        """Whether an error code means "nothing to do" rather than a failure
        (an execution already paused, or finished)."""
        ...


def _reason(body: JsonObject) -> JsonObject:
    reason = body.get("reason")
    if reason is None:
        return {}
    if not isinstance(reason, str):
        raise InvalidError("reason must be a string", "INVALID_REQUEST")
    return {"reason": reason}


def _since(events: Sequence[ev.Event], since_ms: int, kind: type[ev.Event]) -> bool:
    return any(isinstance(e, kind) and e.timestamp_ms >= since_ms for e in events)


@attrs.frozen
class Pause:
    name: str = "pause"

    def params(self, body: JsonObject) -> JsonObject:
        return _reason(body)

    def act(self, engine: EngineApi, execution_id: str, params: JsonObject) -> None:
        reason = params.get("reason")
        engine.operations.pause(execution_id, reason if isinstance(reason, str) else None)

    def applied(self, events: Sequence[ev.Event], since_ms: int, params: JsonObject) -> bool:
        return _since(events, since_ms, ev.WorkflowPaused)

    def skips(self, code: str) -> bool:
        return code in ("ALREADY_PAUSED", "EXECUTION_FINISHED")


@attrs.frozen
class Resume:
    name: str = "resume"

    def params(self, body: JsonObject) -> JsonObject:
        return {}

    def act(self, engine: EngineApi, execution_id: str, params: JsonObject) -> None:
        engine.operations.resume(execution_id)

    def applied(self, events: Sequence[ev.Event], since_ms: int, params: JsonObject) -> bool:
        return _since(events, since_ms, ev.WorkflowResumed)

    def skips(self, code: str) -> bool:
        return code in ("NOT_PAUSED", "EXECUTION_FINISHED")


@attrs.frozen
class Cancel:
    name: str = "cancel"

    def params(self, body: JsonObject) -> JsonObject:
        return _reason(body)

    def act(self, engine: EngineApi, execution_id: str, params: JsonObject) -> None:
        reason = params.get("reason")
        engine.cancel(execution_id, reason if isinstance(reason, str) else None)

    def applied(self, events: Sequence[ev.Event], since_ms: int, params: JsonObject) -> bool:
        return _since(events, since_ms, ev.CancelRequested)

    def skips(self, code: str) -> bool:
        return code == "EXECUTION_FINISHED"


@attrs.frozen
class Restart:
    """A new run of each execution from one step (docs/restart-and-fork.md).
    Each execution is checked on its own: one whose restart would repeat
    an effect without `force` fails with EFFECTS_REPEATED, as `orbit
    restart` would, and the others go on."""

    name: str = "restart"

    def params(self, body: JsonObject) -> JsonObject:
        step = body.get("from")
        if not isinstance(step, str) or not step:
            raise InvalidError(
                "a restart batch needs `from`, the step to run again", "INVALID_REQUEST"
            )
        force = body.get("force", False)
        if not isinstance(force, bool):
            raise InvalidError("force must be true or false", "INVALID_REQUEST")
        out: JsonObject = {"from": step, **_reason(body)}
        if force:
            out["force"] = True
        return out

    def act(self, engine: EngineApi, execution_id: str, params: JsonObject) -> None:
        step, reason = params.get("from"), params.get("reason")
        engine.operations.restart(
            execution_id,
            step if isinstance(step, str) else "",
            force=params.get("force") is True,
            reason=reason if isinstance(reason, str) else None,
        )

    def applied(self, events: Sequence[ev.Event], since_ms: int, params: JsonObject) -> bool:
        # `events` is the current run's: a restart since the claim began a
        # new run then (its WorkflowRestarted closes the run before).
        return any(
            isinstance(e, ev.WorkflowCreated) and (e.run or 1) > 1 and e.timestamp_ms >= since_ms
            for e in events
        )

    def skips(self, code: str) -> bool:
        return False  # a restart applies to any execution; every refusal is reported


@attrs.frozen
class Migrate:
    """Live migration of each selected execution of version `from` to `to`
    (docs/language/migration.md), at its safe point, each in its own
    commit: executions of another version are skipped, one not at a safe
    point now fails with the plan's reason and can be moved by a later
    batch."""

    name: str = "migrate"

    def params(self, body: JsonObject) -> JsonObject:
        chosen = body.get("filter")
        workflow = chosen.get("workflow") if isinstance(chosen, dict) else None
        old, new = body.get("from"), body.get("to")
        if not (isinstance(old, str) and old and isinstance(new, str) and new):
            raise InvalidError(
                "a migrate batch needs `from` and `to`, two versions of the workflow",
                "INVALID_REQUEST",
            )
        return {"workflow": workflow if isinstance(workflow, str) else "", "from": old, "to": new}

    def act(self, engine: EngineApi, execution_id: str, params: JsonObject) -> None:
        workflow, old, new = (str(params.get(k, "")) for k in ("workflow", "from", "to"))
        # (In shared mode the engine's desk has the owner move an execution
        # another server holds, as it forwards the other actions.)
        version = engine.get(execution_id).get("version")
        if version != old:
            raise ConflictError(
                f"execution `{execution_id}` runs version {version}, not {old}", "OTHER_VERSION"
            )
        entry = engine.migrations.move(workflow, old, new, execution_id)
        if not entry["migrated"]:
            raise ConflictError(
                entry.get("reason", f"not migratable now ({entry['verdict']})"), "NOT_MIGRATABLE"
            )

    def applied(self, events: Sequence[ev.Event], since_ms: int, params: JsonObject) -> bool:
        return any(
            isinstance(e, ev.WorkflowMigrated)
            and e.to_version == params.get("to")
            and e.timestamp_ms >= since_ms
            for e in events
        )

    def skips(self, code: str) -> bool:
        return code in ("OTHER_VERSION", "EXECUTION_FINISHED")


ACTIONS: dict[str, Action] = {}


def register(action: Action) -> None:
    """Makes `action` available to batches (by its name)."""
    ACTIONS[action.name] = action


for _action in (Pause(), Resume(), Cancel(), Restart(), Migrate()):
    register(_action)


@attrs.frozen
class Filter:
    """Which executions a batch selects: `orbit ps`'s filters, `where`
    being the typed filter of `orbit ps --where` (docs/language/
    visibility.md), checked against the workflow's search fields."""

    workflow: str
    status: str | None = None
    where: str | None = None

    @classmethod
    def parse(cls, body: Any) -> Filter:
        if not isinstance(body, dict):
            raise InvalidError("filter must be an object", "INVALID_REQUEST")
        workflow, status, where = body.get("workflow"), body.get("status"), body.get("where")
        for name, value in (("workflow", workflow), ("status", status), ("where", where)):
            if value is not None and not isinstance(value, str):
                raise InvalidError(f"filter.{name} must be a string", "INVALID_REQUEST")
        if workflow is None:
            raise InvalidError(
                "filter.workflow is required: a batch acts on one workflow's executions",
                "INVALID_REQUEST",
            )
        if status is not None:
            status = status.upper()
            if status not in STATUSES:
                raise InvalidError(f"filter.status: unknown status `{status}`", "INVALID_REQUEST")
        return cls(workflow, status, where)

    def typed(self, engine: EngineApi) -> TypedFilter | None:
        """`where` typed against the search fields of the workflow's
        deployed versions, by the engine as `GET /v1/executions?where=`
        types it (a bad filter raises FilterError: INVALID_FILTER)."""
        if self.where is None:
            return None
        return engine.typed_filter(self.where, self.workflow)

    def to_json(self) -> JsonObject:
        out: JsonObject = {"workflow": self.workflow}
        for name in ("status", "where"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


def document(
    row: BatchRow,
    outcomes: dict[str, int] | None = None,
    items: Sequence[BatchItem] | None = None,
) -> JsonObject:
    """A batch as `GET /v1/batches/{id}` shows it (`outcomes` only there,
    `items` when asked for)."""
    out: JsonObject = {
        "batch_id": row.batch_id,
        "action": row.action,
        "filter": row.filter,
        "state": row.state,
        "total": row.total,
        "processed": row.processed,
        "created_at_ms": row.created_at_ms,
        "updated_at_ms": row.updated_at_ms,
    }
    if row.params:
        out["params"] = row.params
    if row.finished_at_ms is not None:
        out["finished_at_ms"] = row.finished_at_ms
    if outcomes is not None:
        out["outcomes"] = {OK: 0, SKIPPED: 0, FAILED: 0, **outcomes}
    if items is not None:
        listed: list[JsonValue] = []
        for item in items:
            entry: JsonObject = {"execution_id": item.execution_id}
            entry["outcome"] = item.outcome if item.outcome is not None else "pending"
            if item.code is not None:
                entry["code"] = item.code
            if item.message is not None:
                entry["message"] = item.message
            listed.append(entry)
        out["items"] = listed
    return out


class Gate(Protocol):
    """Who runs batch jobs among servers sharing one database (shared mode):
    a PostgreSQL advisory lock (orbit_store/sweeplock.py's `BatchLock`)."""

    def try_take(self) -> bool:
        """Takes the right to run jobs if nobody holds it; False otherwise."""
        ...

    def held(self) -> bool:
        """Whether this server still holds it (checked before each write)."""
        ...

    def release(self) -> None: ...

    def close(self) -> None: ...


@attrs.frozen
class Attached:
    """What batches work on now: the engine acted through, the store the
    batches are kept in, whether this server runs the jobs (a standby
    only reads them) and, in shared mode, the gate among servers."""

    engine: EngineApi
    store: BatchStore
    runs: bool = True
    gate: Gate | None = None


class _GateLost(Exception):
    """The gate went to another server mid-round: stop writing at once."""


class Batches:
    """Creates batches and runs them; see the module docstring.

    A single server passes its engine and store once. A cluster server
    attaches them as its role allows (`attach`): a standby-mode leader its
    fenced store (runs), a standby its read-only one (reads only), a
    shared-mode server its store with the gate, so one server at a time
    runs the jobs and another takes them over when it stops."""

    def __init__(
        self,
        engine: EngineApi | None = None,
        store: BatchStore | None = None,
        *,
        log: Any = None,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self._attached: Attached | None = None
        if engine is not None and store is not None:
            self._attached = Attached(engine, store)
        self._log = log
        self._now_fn = now_ms
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._prepared: set[int] = set()
        self._lock = threading.Lock()
        # Batches whose selection a request of this process is writing.
        self._selecting: set[str] = set()
        # Whether this server holds its attachment's gate.
        self._holding = False

    # ---- attachment (cluster servers)

    def attach(
        self, engine: EngineApi, store: BatchStore, *, runs: bool = True, gate: Gate | None = None
    ) -> None:
        """Works on `engine` and `store` from now on (the round under way
        stops at its next write); the gate of the previous attachment is
        given back."""
        with self._lock:
            old, self._attached = self._attached, Attached(engine, store, runs, gate)
        self._drop_gate(old)
        self._wake.set()

    def hold(self) -> None:
        """Stops running jobs (a deposed leader), still answering reads."""
        with self._lock:
            old = self._attached
            if old is None:
                return
            self._attached = attrs.evolve(old, runs=False, gate=None)
        self._drop_gate(old)

    def detach(self) -> None:
        with self._lock:
            old, self._attached = self._attached, None
        self._drop_gate(old)

    def _drop_gate(self, old: Attached | None) -> None:
        if old is not None and old.gate is not None:
            with contextlib.suppress(StorageError):
                old.gate.release()
            old.gate.close()

    def _current(self) -> Attached:
        attached = self._attached
        if attached is None:
            raise StorageError("batch operations are not available on this server yet")
        return attached

    def _now(self, attached: Attached) -> int:
        return self._now_fn() if self._now_fn is not None else attached.engine.clock.now_ms()

    # ---- requests

    def create(
        self, action_name: str, filter_body: Any, body: JsonObject, dry_run: bool
    ) -> JsonObject:
        attached = self._current()
        action = ACTIONS.get(action_name)
        if action is None:
            known = ", ".join(sorted(ACTIONS))
            raise InvalidError(
                f"unknown batch action `{action_name}`; known: {known}", "INVALID_REQUEST"
            )
        chosen = Filter.parse(filter_body)
        typed = chosen.typed(attached.engine)
        params = action.params(body)
        store = attached.store
        if dry_run:
            ids = self._select_all(store, chosen, typed)
            return {
                "action": action.name,
                "filter": chosen.to_json(),
                "dry_run": True,
                "total": len(ids),
                "executions": list[JsonValue](ids),
            }
        self._prepare(store)
        now = self._now(attached)
        row = BatchRow(
            f"batch-{uuid.uuid4().hex[:12]}",
            action.name,
            params,
            chosen.to_json(),
            "selecting",
            0,
            0,
            now,
            now,
        )
        self._selecting.add(row.batch_id)
        try:
            store.insert_batch(row)
            total = self._select(attached, row.batch_id, chosen, typed, 0)
            if total is not None:
                store.set_batch(
                    row.batch_id, state="running", total=total, now_ms=self._now(attached)
                )
        finally:
            self._selecting.discard(row.batch_id)
        self._wake.set()
        found = store.batch(row.batch_id)
        assert found is not None
        return document(found)

    def get(self, batch_id: str, *, items: bool = False) -> JsonObject:
        """The batch with its outcome counts; `items`: with every item too
        (a read of the whole selection, so followers ask without it)."""
        store = self._current().store
        row = store.batch(batch_id) if store.has_batches() else None
        if row is None:
            raise NotFoundError(f"batch `{batch_id}` not found", "NOT_FOUND")
        outcomes = store.batch_outcomes(batch_id)
        if not items:
            return document(row, outcomes)
        listed: list[BatchItem] = []
        after = -1
        while True:
            page = store.batch_items(batch_id, pending=False, after=after, limit=1000)
            listed.extend(page)
            if len(page) < 1000:
                break
            after = page[-1].position
        return document(row, outcomes, listed)

    def listing(self, limit: int = 50) -> JsonObject:
        store = self._current().store
        if not store.has_batches():
            return {"batches": []}
        return {"batches": [document(r) for r in store.batches(min(max(limit, 1), 1000))]}

    # ---- selection

    def _prepare(self, store: BatchStore) -> None:
        with self._lock:
            if id(store) not in self._prepared:
                store.prepare_batches()
                self._prepared.add(id(store))

    def _select_all(
        self, store: BatchStore, chosen: Filter, typed: TypedFilter | None
    ) -> list[str]:
        ids: list[str] = []
        after: tuple[int, str] | None = None
        while True:
            page = store.batch_targets(chosen.workflow, chosen.status, after, SLICE * 10, typed)
            ids.extend(eid for _, eid in page)
            if len(page) < SLICE * 10:
                return ids
            after = page[-1]

    def _select(
        self,
        attached: Attached,
        batch_id: str,
        chosen: Filter,
        typed: TypedFilter | None,
        first: int,
    ) -> int | None:
        """Writes the selection from item `first` on; returns the total, or
        None when another server is writing it. (Going on after a restart:
        the executions after the last item written, by creation then id,
        the order they were selected in.)"""
        store = attached.store
        after: tuple[int, str] | None = None
        if first:
            last = store.batch_items(batch_id, pending=False, after=first - 2, limit=1)
            if last:
                row = attached.engine.store.execution_row(last[0].execution_id)
                if row is not None:
                    after = (row.created_at_ms, row.execution_id)
        position = first
        while True:
            page = store.batch_targets(chosen.workflow, chosen.status, after, SLICE, typed)
            ids = [eid for _, eid in page]
            if not store.add_batch_items(batch_id, position, ids, self._now(attached)):
                return None
            position += len(page)
            if len(page) < SLICE:
                return position
            after = page[-1]
            time.sleep(PAUSE_S)

    # ---- the job

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="orbit-batches", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.detach()

    def _run(self) -> None:
        while not self._stop.is_set():
            wait = IDLE_S
            try:
                wait = self._round()
            except _GateLost:
                self._holding = False
                wait = WATCH_S
            except StorageError as exc:
                if self._log is not None:
                    self._log.warning("batch operations wait for the database", error=exc.message)
            except Exception:  # never let the thread die
                if self._log is not None:
                    self._log.exception("batch operations stopped a round")
            if wait:
                self._wake.wait(wait)
                self._wake.clear()

    def _round(self) -> float:
        """One round; how long to wait before the next (0: at once)."""
        attached = self._attached
        if attached is None or not attached.runs:
            self._holding = False
            return IDLE_S
        gate = attached.gate
        if gate is None:
            return 0.0 if self.work(attached) else IDLE_S
        store = attached.store
        if not (store.has_batches() and store.open_batches()):
            if self._holding:
                self._holding = False
                gate.release()
            return IDLE_S
        if not self._holding:
            if not gate.try_take():
                return WATCH_S  # another server runs them; take over if it stops
            self._holding = True
        return 0.0 if self.work(attached) else WATCH_S

    def work(self, attached: Attached | None = None) -> bool:
        """One round over the open batches (one slice each); whether any had work."""
        attached = attached or self._current()
        store = attached.store
        if not store.has_batches():
            return False
        busy = False
        for row in store.open_batches():
            if self._stop.is_set() or self._attached is not attached:
                break
            busy = self._step(attached, row) or busy
        return busy

    def _check(self, attached: Attached) -> None:
        """Before each write of a round: the attachment is still current and,
        in shared mode, its gate still held."""
        if self._attached is not attached:
            raise _GateLost
        if attached.gate is not None and not attached.gate.held():
            raise _GateLost

    def _step(self, attached: Attached, row: BatchRow) -> bool:
        store = attached.store
        total = row.total
        if row.state == "selecting":
            if row.batch_id in self._selecting:
                return False  # a request here is writing it
            if self._now(attached) - row.updated_at_ms < SELECTING_STALE_MS:
                return False  # another server may be writing it now
            # Interrupted while selecting: the selection goes on after its last item.
            chosen = Filter.parse(row.filter)
            self._check(attached)
            found = self._select(
                attached, row.batch_id, chosen, chosen.typed(attached.engine), total
            )
            if found is None:
                return False
            store.set_batch(row.batch_id, state="running", total=found, now_ms=self._now(attached))
        action = ACTIONS.get(row.action)
        items = store.batch_items(row.batch_id, pending=True, after=-1, limit=ACT_SLICE)
        self._check(attached)
        if not items:
            store.finish_batch_items(row.batch_id, [], self._now(attached), done=True)
            return False
        fresh = [i.position for i in items if i.claimed_at_ms is None]
        claimed_at = self._now(attached)
        store.claim_batch_items(row.batch_id, fresh, claimed_at)
        outcomes = [self._act(attached, action, row, item) for item in items]
        left = store.batch_items(row.batch_id, pending=True, after=items[-1].position, limit=1)
        self._check(attached)
        store.finish_batch_items(row.batch_id, outcomes, self._now(attached), done=not left)
        time.sleep(PAUSE_S)
        return True

    def _act(
        self, attached: Attached, action: Action | None, row: BatchRow, item: BatchItem
    ) -> BatchItem:
        if action is None:
            return attrs.evolve(
                item, outcome=FAILED, code="UNKNOWN_ACTION", message=f"no action `{row.action}`"
            )
        engine = attached.engine
        if item.claimed_at_ms is not None:
            # Interrupted while acted on: applied already, or not at all.
            try:
                events = engine.events(item.execution_id)
            except OrbitError:
                events = []
            if action.applied(events, item.claimed_at_ms, row.params):
                return attrs.evolve(item, outcome=OK)
        try:
            action.act(engine, item.execution_id, row.params)
        except StorageError:
            raise  # not recorded: tried again on the next round
        except OrbitError as exc:
            outcome = SKIPPED if action.skips(exc.code) else FAILED
            return attrs.evolve(item, outcome=outcome, code=exc.code, message=exc.message)
        return attrs.evolve(item, outcome=OK)
