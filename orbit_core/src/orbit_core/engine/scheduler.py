"""The scheduler: fires schedules and answers the schedule API (chapter 41).

Schedules live in the store (`orbit_schedules`); the scheduler keeps a mirror
of every row with its compiled timing, and a heap of fire times (lazy: an
entry that no longer matches its row is dropped when it surfaces). Nothing
polls: with a simulated clock it fires on every `advance`; with a real one a
thread sleeps until the earliest fire time (at most a minute, so a clock
step is noticed) or until a change wakes it. 10,000 idle schedules cost one
sleeping thread.

A fire handles the due schedules in batches, each in three transactions:

1. claim every due occurrence (a compare-and-set per row, `claim_schedules`);
2. one engine command decides overlap and catch-up from memory and starts
   the executions through `Control.start`, the normal start path, with the
   occurrence's execution id `<schedule>:<occurrence>`: one group commit;
3. advance each claimed row (`advance_schedules`, a compare-and-set on the
   claim): the next occurrence, counters, last execution, claim released.

A crash between 2 and 3 leaves the occurrence pending; the restarted server
drops the claims and fires it again, and the start with the same execution
id is a no-op (`created: false`), so an occurrence never runs twice. A start
that fails leaves the occurrence pending, retried every 5 s with the error
in `last_error`; the catch-up policy applies once it is late.

In shared mode (chapter 44) a workflow with start limits has a flow gate
(engine/flow_gates.py) and its starts are decided by the gate's holder. A
due start of such a workflow whose gate this engine does not hold goes
through the scheduler's `Router` (the `SharedEngine`), outside the engine
command and from the firing thread, the way an API start goes: to the
holder's mailbox, or here after reserving a gate nobody holds. The
occurrence's execution id still makes a repeat a no-op. Its overlap policy
reads the previous occurrence's status from the store, since that execution
may be another server's. A scheduler built for shared mode (`routed`) fires
nothing until its router is set, so that no start of a gated workflow is
decided here before it can be sent to the holder.

Claims name their owner (`local`: one server owns a store); a server drops
every claim when it starts.

Every public method takes the scheduler's lock, so API calls and fires are
serialised; a fire holds it while its engine command commits.
"""

from __future__ import annotations

import contextlib
import heapq
import threading
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from orbit_core import values as _values
from orbit_core.api import Started
from orbit_core.engine.catalog import Catalog
from orbit_core.engine.commands import Tx
from orbit_core.engine.control import Control
from orbit_core.engine.counters import Counters
from orbit_core.engine.executions import Executions
from orbit_core.errors import ConflictError, InvalidError, NotFoundError, OrbitError
from orbit_core.jsontypes import JsonObject, JsonValue
from orbit_core.ports import Clock, Faults, ScheduleAdvance, ScheduleRow, Store
from orbit_core.schedules import policy
from orbit_core.schedules.document import (
    document,
    manual_execution_id,
    occurrence_execution_id,
)
from orbit_core.schedules.spec import (
    Compiled,
    ScheduleSpec,
    compile_spec,
    parse_create,
    parse_patch,
    spec_from_json,
)
from orbit_core.state import TERMINAL

CLAIM_MS = 30_000
RETRY_MS = 5_000
BATCH = 2_000
# The longest the firing thread sleeps without looking at the clock again.
MAX_SLEEP_S = 60.0
# A stored schedule this server fails to read again: when to look again.
_BACKOFF_S = 1.0
# The owner named in claims: one server owns a store.
_OWNER = "local"

Submit = Callable[[Callable[[Tx], Any]], Any]


class Router(Protocol):
    """Where the starts another server decides go (shared mode: the
    `SharedEngine`, engine/shared.py)."""

    def decided_elsewhere(self, workflow: str, version: str | None, input: JsonValue) -> bool:
        """Whether a start of `workflow` with `input` is not this engine's
        to decide alone (its flow gate is not held here)."""
        ...

    def start(
        self,
        workflow: str,
        version: str | None,
        input: JsonValue,
        execution_id: str | None,
        *,
        schedule_id: str | None,
    ) -> Started: ...

    def cancel(self, execution_id: str, reason: str | None) -> object: ...


@attrs.define(slots=True)
class _Entry:
    row: ScheduleRow
    compiled: Compiled | None


@attrs.frozen(slots=True)
class _Outcome:
    started: str | None = None  # the execution id
    created: bool = False  # False: it existed (a repeat after a crash)
    skipped: bool = False  # by the overlap policy
    error: str | None = None


_SKIPPED = _Outcome(skipped=True)


def not_found(schedule_id: str) -> NotFoundError:
    return NotFoundError(f"schedule `{schedule_id}` not found", "SCHEDULE_NOT_FOUND")


def cancel_reason(schedule_id: str) -> str:
    return f"schedule `{schedule_id}`: replaced by the next occurrence (overlap cancel_previous)"


class Scheduler:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        counters: Counters,
        catalog: Catalog,
        control: Control,
        executions: Executions,
        submit: Submit,
        threaded: bool,
        faults: Faults,
        routed: bool = False,
    ) -> None:
        """`routed`: shared mode; nothing fires until `route` gives the router."""
        self._store = store
        self._faults = faults
        self._clock = clock
        self._catalog = catalog
        self._control = control
        self._executions = executions
        self._submit = submit
        self.counters = counters
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._entries: dict[str, _Entry] = {}
        self._heap: list[tuple[int, str]] = []
        self._closed = False
        self._thread: threading.Thread | None = None
        self._router: Router | None = None
        self._awaiting_router = routed

        store.release_schedule_claims()
        with self._lock:
            for row in store.load_schedules():
                self._remember(row)
        if clock.subscribe(self._on_advance):
            # What fell due while no engine ran is looked at now, not at the next advance.
            self._on_advance()
        elif threaded:
            self._thread = threading.Thread(target=self._loop, name="orbit-schedules", daemon=True)
            self._thread.start()

    # ---- the API

    def create(self, body: JsonObject) -> JsonObject:
        compiled, paused = parse_create(body)
        self._check_start(compiled.spec)
        with self._lock:
            now = self._clock.now_ms()
            pending = None if paused else compiled.timing.next_after(now)
            spec = compiled.spec
            row = ScheduleRow(
                spec.schedule_id,
                spec.to_json(),
                paused,
                pending,
                self._due(compiled, pending),
                None,
                None,
                0,
                0,
                None,
                now,
                now,
            )
            if not self._store.insert_schedule(row):
                raise ConflictError(
                    f"schedule `{spec.schedule_id}` already exists", "SCHEDULE_EXISTS"
                )
            self._set(row, compiled)
            return document(row, compiled)

    def get(self, schedule_id: str) -> JsonObject:
        with self._lock:
            entry = self._entry(schedule_id)
            return document(entry.row, entry.compiled)

    def workflow_of(self, schedule_id: str) -> str:
        """The workflow a schedule starts (for access control)."""
        with self._lock:
            return str(self._entry(schedule_id).row.spec.get("workflow", ""))

    def list_schedules(self, visible: Callable[[str], bool] | None = None) -> JsonObject:
        """Every schedule by id; `visible(workflow)` filters them."""
        with self._lock:
            entries = [self._entries[sid] for sid in sorted(self._entries)]
            return {
                "schedules": [
                    document(e.row, e.compiled)
                    for e in entries
                    if visible is None or visible(str(e.row.spec.get("workflow", "")))
                ]
            }

    def update(self, schedule_id: str, body: JsonObject) -> JsonObject:
        """A PATCH: the settings changed, the next occurrence recomputed from
        now, counters and the last fire kept, `last_error` cleared."""
        with self._lock:
            entry = self._entry(schedule_id)
            current = (
                entry.compiled.spec
                if entry.compiled is not None
                else spec_from_json(entry.row.spec)
            )
            compiled, paused = parse_patch(current, body)
            if set(body) - {"paused"}:
                self._check_start(compiled.spec)
            return self._change(entry, compiled, entry.row.paused if paused is None else paused)

    def pause(self, schedule_id: str) -> JsonObject:
        return self.update(schedule_id, {"paused": True})

    def resume(self, schedule_id: str) -> JsonObject:
        return self.update(schedule_id, {"paused": False})

    def delete(self, schedule_id: str) -> JsonObject:
        with self._lock:
            self._entry(schedule_id)
            found = self._store.delete_schedule(schedule_id)
            self._entries.pop(schedule_id, None)
            if not found:
                raise not_found(schedule_id)
            return {"schedule_id": schedule_id, "deleted": True}

    def trigger(self, schedule_id: str) -> JsonObject:
        """Starts an execution now, applying the overlap policy."""
        with self._lock:
            entry = self._entry(schedule_id)
            if entry.compiled is None:
                raise InvalidError(entry.row.last_error or "invalid schedule", "INVALID_SCHEDULE")
            spec = entry.compiled.spec
            now = self._clock.now_ms()
            execution_id = manual_execution_id(schedule_id, now)
            previous = entry.row.last_execution_id

            def run(tx: Tx) -> bool | None:
                action = policy.overlap(spec.overlap, self._running(previous))
                if action == policy.SKIP:
                    return None
                if action == policy.CANCEL_AND_START and previous is not None:
                    self._control.cancel(tx, previous, cancel_reason(schedule_id))
                return self._start(tx, spec, execution_id)

            if self._decided_elsewhere(entry):
                created = self._route(spec, previous, execution_id)
            else:
                created = self._submit(run)
            if created is None:
                # The schedule's own count agrees with the metric: both
                # count the starts the overlap policy declined, triggers too.
                self.counters.schedules_skipped_overlap += 1
                self._store.record_schedule_skip(schedule_id, now)
                entry.row = attrs.evolve(
                    entry.row, skipped=entry.row.skipped + 1, updated_at_ms=now
                )
                return {"schedule_id": schedule_id, "started": False, "skipped": "overlap"}
            self.counters.schedules_fired += int(created)
            self._store.record_schedule_trigger(schedule_id, execution_id, now)
            entry.row = attrs.evolve(
                entry.row,
                fired=entry.row.fired + 1,
                last_execution_id=execution_id,
                updated_at_ms=now,
            )
            return {"schedule_id": schedule_id, "started": True, "execution_id": execution_id}

    def route(self, router: Router) -> None:
        """Sends the starts another server decides through `router` from
        now on, and lets a shared-mode scheduler fire."""
        with self._lock:
            self._router = router
            self._awaiting_router = False
            self._wake.notify_all()
        if self._thread is None:
            self._on_advance()  # what fell due while it waited

    # ---- time

    def next_due_ms(self) -> int | None:
        """The earliest fire time of an active schedule (for time skipping)."""
        with self._lock:
            return self._peek()

    def run_due(self) -> int:
        """Fires every schedule due now; returns how many occurrences were handled."""
        handled = 0
        with self._lock:
            while not self._closed and not self._awaiting_router:
                now = self._clock.now_ms()
                batch = self._pop_due(now)
                if not batch:
                    break
                self._fire(batch, now)
                handled += len(batch)
        return handled

    def close(self) -> None:
        self._clock.unsubscribe(self._on_advance)
        with self._lock:
            self._closed = True
            self._wake.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    # ---- firing

    def _on_advance(self) -> None:
        # A storage error leaves the schedule to be retried; it is not the
        # business of whoever moved the clock.
        if not self._closed:
            with contextlib.suppress(OrbitError):
                self.run_due()

    def _loop(self) -> None:
        with self._lock:
            while not self._closed:
                try:
                    self.run_due()
                except Exception as exc:  # e.g. a storage error: the thread must live on
                    self._faults.report("schedule", exc)
                    self._wake.wait(_BACKOFF_S)
                    continue
                self._faults.recovered("schedule")
                due = self._peek()
                wait = MAX_SLEEP_S
                if due is not None:
                    wait = min(wait, max(0, due - self._clock.now_ms()) / 1000)
                if wait > 0:
                    self._wake.wait(wait)

    def _pop_due(self, now: int) -> list[_Entry]:
        batch: list[_Entry] = []
        seen: set[str] = set()
        while self._heap and len(batch) < BATCH:
            due, sid = self._heap[0]
            if due > now:
                break
            heapq.heappop(self._heap)
            entry = self._entries.get(sid)
            if entry is None or entry.row.due_ms != due or entry.row.paused or sid in seen:
                continue
            seen.add(sid)
            batch.append(entry)
        return batch

    def _peek(self) -> int | None:
        while self._heap:
            due, sid = self._heap[0]
            entry = self._entries.get(sid)
            if entry is not None and entry.row.due_ms == due and not entry.row.paused:
                return due
            heapq.heappop(self._heap)
        return None

    def _fire(self, batch: list[_Entry], now: int) -> None:
        plans: dict[str, tuple[_Entry, policy.Due]] = {}
        for entry in batch:
            row, compiled = entry.row, entry.compiled
            if compiled is None or row.next_fire_ms is None:
                continue
            plans[row.schedule_id] = (
                entry,
                policy.catch_up(
                    compiled.timing,
                    row.schedule_id,
                    compiled.jitter_ms,
                    row.next_fire_ms,
                    now=now,
                    catchup=compiled.spec.catchup,
                ),
            )
        claims = [(sid, e.row.next_fire_ms or 0) for sid, (e, _) in plans.items()]
        try:
            claimed = set(self._store.claim_schedules(claims, _OWNER, now + CLAIM_MS, now))
        except OrbitError:
            for entry, _ in plans.values():
                self._retry_later(entry, now)
            raise
        for sid in [sid for sid in plans if sid not in claimed]:
            self._reload(sid)
            del plans[sid]

        # A pending occurrence among the missed ones may have been started by
        # a server that died before advancing the row: it counts as fired.
        recovered = {
            sid: eid
            for sid, (e, d) in plans.items()
            if d.missed > 0
            and self._control.existing_hash(
                eid := occurrence_execution_id(sid, e.row.next_fire_ms or 0)
            )
            is not None
        }
        starts: list[tuple[_Entry, policy.Due]] = []
        routed: list[tuple[_Entry, policy.Due]] = []
        for entry, due in plans.values():
            if due.fire is not None:
                (routed if self._decided_elsewhere(entry) else starts).append((entry, due))
        outcomes: dict[str, _Outcome] = {}
        if starts:
            try:
                outcomes = self._submit(lambda tx: self._start_all(tx, starts))
            except OrbitError as exc:
                failed = _Outcome(error=f"{exc.code}: {exc.message}")
                outcomes = {e.row.schedule_id: failed for e, _ in starts}
        for entry, due in routed:
            outcomes[entry.row.schedule_id] = self._start_routed(entry, due)

        advances = [
            self._advance(e, d, outcomes.get(sid), now, recovered.get(sid))
            for sid, (e, d) in plans.items()
        ]
        try:
            applied = set(self._store.advance_schedules(advances, _OWNER))
        except OrbitError:
            # The claims stay and expire; memory retries after the pause.
            for entry, _ in plans.values():
                self._retry_later(entry, now)
            raise
        for advance in advances:
            sid = advance.schedule_id
            if sid not in applied:
                self._reload(sid)  # changed, paused or deleted meanwhile: the change wins
                continue
            entry, due = plans[sid]
            outcome = outcomes.get(sid)
            self._count(due, outcome, sid in recovered)
            row = entry.row
            self._set(
                attrs.evolve(
                    row,
                    next_fire_ms=advance.next_fire_ms,
                    due_ms=advance.due_ms,
                    last_fire_ms=advance.last_fire_ms or row.last_fire_ms,
                    last_execution_id=advance.last_execution_id or row.last_execution_id,
                    fired=row.fired + advance.fired,
                    skipped=row.skipped + advance.skipped,
                    last_error=advance.last_error,
                    updated_at_ms=advance.updated_at_ms,
                ),
                entry.compiled,
            )

    def _start_all(self, tx: Tx, starts: list[tuple[_Entry, policy.Due]]) -> dict[str, _Outcome]:
        """One engine command: the overlap policy and the starts of a batch."""
        out: dict[str, _Outcome] = {}
        for entry, due in starts:
            assert entry.compiled is not None and due.fire is not None
            spec = entry.compiled.spec
            sid = spec.schedule_id
            previous = entry.row.last_execution_id
            action = policy.overlap(spec.overlap, self._running(previous))
            if action == policy.SKIP:
                out[sid] = _SKIPPED
                continue
            execution_id = occurrence_execution_id(sid, due.fire)
            try:
                if action == policy.CANCEL_AND_START and previous is not None:
                    self._control.cancel(tx, previous, cancel_reason(sid))
                created = self._start(tx, spec, execution_id)
            except OrbitError as exc:
                out[sid] = _Outcome(error=f"{exc.code}: {exc.message}")
                continue
            out[sid] = _Outcome(started=execution_id, created=created)
        return out

    def _decided_elsewhere(self, entry: _Entry) -> bool:
        if self._router is None or entry.compiled is None:
            return False
        spec = entry.compiled.spec
        return self._router.decided_elsewhere(spec.workflow, spec.version, spec.input)

    def _start_routed(self, entry: _Entry, due: policy.Due) -> _Outcome:
        """A start decided by the holder of its flow gate, as an API start:
        the overlap policy as `_start_all`'s, outside any engine command."""
        assert entry.compiled is not None and due.fire is not None
        sid = entry.compiled.spec.schedule_id
        execution_id = occurrence_execution_id(sid, due.fire)
        try:
            created = self._route(entry.compiled.spec, entry.row.last_execution_id, execution_id)
        except OrbitError as exc:
            return _Outcome(error=f"{exc.code}: {exc.message}")
        if created is None:
            return _SKIPPED
        return _Outcome(started=execution_id, created=created)

    def _route(self, spec: ScheduleSpec, previous: str | None, execution_id: str) -> bool | None:
        """The overlap policy and the start, through the router: None when
        the policy skips it, else whether the execution is new."""
        router = self._router
        assert router is not None
        sid = spec.schedule_id
        action = policy.overlap(spec.overlap, self._running_anywhere(previous))
        if action == policy.SKIP:
            return None
        if action == policy.CANCEL_AND_START and previous is not None:
            router.cancel(previous, cancel_reason(sid))
        try:
            answer = router.start(
                spec.workflow, spec.version, spec.input, execution_id, schedule_id=sid
            )
        except ConflictError as exc:
            if exc.code != "EXECUTION_EXISTS":
                raise
            return False  # as in `_start`
        return bool(answer["created"])

    def _start(self, tx: Tx, spec: ScheduleSpec, execution_id: str) -> bool:
        """Starts the execution; False when it existed already (a repeat)."""
        try:
            answer = self._control.start(
                tx,
                workflow=spec.workflow,
                version=spec.version,
                input=spec.input,
                execution_id=execution_id,
                schedule_id=spec.schedule_id,
            )
        except ConflictError as exc:
            # The id exists, for another version of the workflow: this
            # occurrence was started before (by a server that then died).
            if exc.code != "EXECUTION_EXISTS":
                raise
            return False
        return bool(answer["created"])

    def _running(self, execution_id: str | None) -> bool:
        if execution_id is None:
            return False
        live = self._executions.memory.get(execution_id)
        return live is not None and not live.state.terminal

    def _running_anywhere(self, execution_id: str | None) -> bool:
        """As `_running`, for an execution that may be another server's: its
        row in the store when it is not in this engine's memory."""
        if execution_id is None:
            return False
        if execution_id in self._executions.memory:
            return self._running(execution_id)
        row = self._store.execution_row(execution_id)
        return row is not None and row.status not in TERMINAL

    def _advance(
        self,
        entry: _Entry,
        due: policy.Due,
        outcome: _Outcome | None,
        now: int,
        recovered: str | None = None,
    ) -> ScheduleAdvance:
        row = entry.row
        assert entry.compiled is not None and row.next_fire_ms is not None
        sid = row.schedule_id
        if outcome is not None and outcome.error is not None:
            # Not advanced: the occurrence to start stays pending, retried soon.
            pending = due.fire if due.fire is not None else row.next_fire_ms
            return ScheduleAdvance(
                sid,
                row.next_fire_ms,
                pending,
                now + RETRY_MS,
                due.handled if due.handled != pending else None,
                None,
                0,
                due.missed,
                outcome.error,
                now,
            )
        started = outcome.started if outcome is not None else None
        missed = due.missed - (1 if recovered is not None else 0)
        skipped = missed + (1 if outcome is not None and outcome.skipped else 0)
        return ScheduleAdvance(
            sid,
            row.next_fire_ms,
            due.pending,
            self._due(entry.compiled, due.pending),
            due.handled,
            started or recovered,
            (1 if started is not None else 0) + (1 if recovered is not None else 0),
            skipped,
            None,
            now,
        )

    def _count(self, due: policy.Due, outcome: _Outcome | None, recovered: bool = False) -> None:
        self.counters.schedules_skipped_missed += due.missed - int(recovered)
        if outcome is None:
            return
        if outcome.started is not None:
            # The metric counts new executions; the schedule's count, every start.
            self.counters.schedules_fired += int(outcome.created)
        elif outcome.skipped:
            self.counters.schedules_skipped_overlap += 1

    # ---- memory

    def _check_start(self, spec: ScheduleSpec) -> None:
        """The workflow is registered and the input fits its input type."""
        defn = self._catalog.find(spec.workflow, spec.version).defn
        try:
            _values.conform(spec.input, defn.input, strict=True)
        except _values.ValidationError as exc:
            raise InvalidError(
                f"the schedule input is invalid for {defn.key} at {exc}", "INVALID_INPUT"
            ) from None

    def _change(self, entry: _Entry, compiled: Compiled, paused: bool) -> JsonObject:
        now = self._clock.now_ms()
        pending = None if paused else compiled.timing.next_after(now)
        row = attrs.evolve(
            entry.row,
            spec=compiled.spec.to_json(),
            paused=paused,
            next_fire_ms=pending,
            due_ms=self._due(compiled, pending),
            last_error=None,
            updated_at_ms=now,
            claimed_by=None,
            claimed_until_ms=None,
        )
        if not self._store.update_schedule(row):
            self._entries.pop(row.schedule_id, None)
            raise not_found(row.schedule_id)
        self._set(row, compiled)
        return document(row, compiled)

    def _due(self, compiled: Compiled, pending: int | None) -> int | None:
        if pending is None:
            return None
        return policy.fire_time(compiled.spec.schedule_id, pending, compiled.jitter_ms)

    def refresh(self) -> None:
        """Reads every schedule again from the store: for servers sharing a
        database, whose schedules change through the others too."""
        rows = self._store.load_schedules()
        with self._lock:
            seen = set()
            for row in rows:
                seen.add(row.schedule_id)
                entry = self._entries.get(row.schedule_id)
                if entry is None or entry.row != row:
                    self._remember(row)
            for schedule_id in [sid for sid in self._entries if sid not in seen]:
                del self._entries[schedule_id]

    def _entry(self, schedule_id: str) -> _Entry:
        entry = self._entries.get(schedule_id)
        if entry is None:
            raise not_found(schedule_id)
        return entry

    def _remember(self, row: ScheduleRow) -> None:
        try:
            compiled: Compiled | None = compile_spec(spec_from_json(row.spec))
        except (OrbitError, TypeError) as exc:
            compiled = None
            message = exc.message if isinstance(exc, OrbitError) else str(exc)
            row = attrs.evolve(row, last_error=f"INVALID_SCHEDULE: {message}")
        self._set(row, compiled)

    def _set(self, row: ScheduleRow, compiled: Compiled | None) -> None:
        self._entries[row.schedule_id] = _Entry(row, compiled)
        if row.due_ms is not None and not row.paused and compiled is not None:
            heapq.heappush(self._heap, (row.due_ms, row.schedule_id))
            if self._heap[0][1] == row.schedule_id:
                self._wake.notify_all()

    def _reload(self, schedule_id: str) -> None:
        row = self._store.get_schedule(schedule_id)
        if row is None:
            self._entries.pop(schedule_id, None)
        else:
            self._remember(row)

    def _retry_later(self, entry: _Entry, now: int) -> None:
        """Keeps a schedule whose fire could not be recorded in the heap."""
        self._set(attrs.evolve(entry.row, due_ms=now + RETRY_MS), entry.compiled)
