"""Admission: which executions a workflow's `concurrency` limit lets run.

A limit counts the running executions of one workflow (all its versions)
per key value. An execution created while every slot of its key is taken
records `WorkflowWaiting` instead of `WorkflowStarted`, and the decider
leaves it alone (it has not started). When an execution holding a slot
ends, the first in line of its key records `WorkflowAdmitted` and
`WorkflowStarted` in the same group, so the commit that frees a slot is
the commit that fills it: the store never holds a state where the limit is
exceeded, nor one where a slot is free while someone waits for it (a crash
between the two cannot happen; they are one commit).

Nothing here is stored apart from the histories: the counts are what the
executions in memory say (`WorkflowStarted` and not finished: a slot;
`WorkflowWaiting` and not started: in line), so recovery, a standby taking
over and a group undone by `rollback` rebuild them by adopting executions
(`adopted`). The sets may hold executions that have since changed; they are
pruned when read, which is cheaper than keeping every path that changes an
execution in step with them. Leaving memory is the one change they are told
of (`forget`: the execution ended, its group was undone, or another server
owns it now): an id left behind would hold a slot, or a place in line, for
whatever execution comes back under it (an undone start the caller tries
again), and the slot it held is free in this engine's view, so its line is
looked at again on the next tick.

The line is ordered by priority (higher first), then by ticket, a number
that grows with each wait and is recorded in the event, so the order
survives a restart.

Servers in shared mode each see only the executions they own; every
execution of one key is owned by the holder of its flow gate
(engine/flow_gates.py), so these counts are the whole group's there.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import attrs

from orbit_core import events as ev
from orbit_core.engine.live import Live
from orbit_core.flow import keys
from orbit_core.history import Batch

Scope = tuple[str, str]  # (workflow name, key text)


@attrs.frozen
class Wait:
    """Why a new execution waits: the fields of its WorkflowWaiting."""

    reason: str
    key: str
    label: str
    limit: int
    ticket: int


@attrs.define(slots=True)
class _Line:
    running: set[str] = attrs.field(factory=set)
    # (-priority, ticket, execution id)
    waiting: list[tuple[int, int, str]] = attrs.field(factory=list)


class Admission:
    def __init__(self, get: Callable[[str], Live | None]) -> None:
        self._get = get
        self._lines: dict[Scope, _Line] = {}
        # Who is in line, with the ticket of its entry: an entry of a line
        # with another ticket is stale (its execution left and came back).
        self._waiting: dict[str, int] = {}
        self._ticket = 0
        # Scopes to look at on the next tick (after adoption: a slot may be free).
        self.recheck: set[Scope] = set()
        self.admitted = 0
        self.delayed = 0

    # ---- reading a live execution

    @staticmethod
    def _scope(live: Live) -> tuple[Scope, int] | None:
        flow = live.plan.defn.flow
        if flow is None or flow.concurrency is None:
            return None
        state = live.state
        execution = {"id": state.id, "workflow": state.workflow, "version": state.version}
        key = keys.key_text(flow.concurrency.key, state.input, execution)
        return (state.workflow, key), flow.concurrency.limit

    @staticmethod
    def _priority(live: Live) -> int:
        flow = live.plan.defn.flow
        state = live.state
        execution = {"id": state.id, "workflow": state.workflow, "version": state.version}
        return keys.priority(flow.priority if flow else None, state.input, execution)

    def _line(self, scope: Scope) -> _Line:
        line = self._lines.get(scope)
        if line is None:
            line = self._lines[scope] = _Line()
        return line

    def _holding(self, eid: str, scope: Scope) -> bool:
        # Not `started`: an execution just admitted holds its slot before
        # its WorkflowStarted is appended. One re-adopted as waiting after
        # an undone group is taken out by `adopted`. Of this scope: a start
        # whose group was undone leaves its id here, and a later execution
        # under the same id (another workflow's, or another key) must not
        # hold this slot for it, or whoever waits for it waits for ever.
        live = self._get(eid)
        if live is None or live.state.terminal:
            return False
        found = self._scope(live)
        return found is not None and found[0] == scope

    def _in_line(self, eid: str) -> bool:
        live = self._get(eid)
        return live is not None and not live.state.started and not live.state.terminal

    def _count(self, scope: Scope, line: _Line) -> int:
        stale = [eid for eid in line.running if not self._holding(eid, scope)]
        for eid in stale:
            line.running.discard(eid)
        return len(line.running)

    # ---- the engine's hooks

    def admit(self, live: Live) -> Wait | None:
        """For a new execution: None when it may start now (it then holds a
        slot), else why it waits (it is then in line)."""
        found = self._scope(live)
        if found is None:
            return None
        scope, limit = found
        line = self._line(scope)
        eid = live.state.id
        if self._count(scope, line) < limit and not self._first_waiting(line):
            line.running.add(eid)
            return None
        self._ticket += 1
        self._enqueue(line, live, self._ticket)
        self.delayed += 1
        flow = live.plan.defn.flow
        assert flow is not None and flow.concurrency is not None
        return Wait(
            "concurrency", scope[1], keys.key_label(flow.concurrency.key), limit, self._ticket
        )

    def rerun(self, live: Live, held: bool) -> Wait | None:
        """For a new run of an execution (a restart): one whose previous run
        `held` a slot keeps it; any other is admitted like a new execution
        (one still in line keeps its place)."""
        found = self._scope(live)
        if found is None:
            return None
        scope, _ = found
        line = self._line(scope)
        eid = live.state.id
        if held:
            line.running.add(eid)
            return None
        line.running.discard(eid)
        self._waiting.pop(eid, None)  # in line again, with a new ticket
        return self.admit(live)

    def scope_of(self, live: Live) -> Scope | None:
        """The (workflow, key) whose slots `live` counts against, if limited."""
        found = self._scope(live)
        return None if found is None else found[0]

    def continued(self, live: Live, before: Scope | None) -> tuple[Wait | None, list[Live]]:
        """For the new run of an execution that continued as new (its new
        input recorded; `before`: its last run's scope). The same execution
        under the same key keeps its slot. Under another key it gives the
        old slot to the next in line (returned: the caller starts them) and
        asks the new key's limit as a new execution does, so a key never
        has more running than its limit."""
        if self.scope_of(live) == before:
            return None, []
        admitted: list[Live] = []
        if before is not None:
            line = self._lines.get(before)
            if line is not None:
                line.running.discard(live.state.id)
                admitted = self._fill(before, line)
        return self.admit(live), admitted

    def release(self, live: Live) -> list[Live]:
        """For an execution that ended: the executions now admitted in its
        place, first in line first (the caller starts them)."""
        found = self._scope(live)
        if found is None:
            return []
        scope, _ = found
        line = self._lines.get(scope)
        if line is None:
            return []
        line.running.discard(live.state.id)
        return self._fill(scope, line)

    def adopted(self, live: Live) -> None:
        """An execution taken into memory from its history."""
        found = self._scope(live)
        if found is None:
            return
        scope, _ = found
        state = live.state
        reason = state.waiting["reason"] if not state.started and state.waiting else None
        if reason == "debounce":
            return  # not yet at this limit (engine/start_gates.py)
        line = self._line(scope)
        if reason == "rate":
            # Let in by this limit, it holds its slot while it waits for a token.
            line.running.add(state.id)
            return
        if state.terminal:
            return
        if state.started:
            line.running.add(state.id)
            return
        ticket = state.flow_ticket
        self._ticket = max(self._ticket, ticket)
        line.running.discard(state.id)
        self._enqueue(line, live, ticket)
        self.recheck.add(scope)

    def forget(self, live: Live) -> None:
        """An execution leaving memory: it no longer holds a slot nor waits
        here, and its line is rechecked on the next tick (a slot may be free)."""
        eid = live.state.id
        self._waiting.pop(eid, None)
        found = self._scope(live)
        if found is None:
            return
        line = self._lines.get(found[0])
        if line is not None:
            line.running.discard(eid)
            self.recheck.add(found[0])

    def admit_rechecked(self) -> list[Live]:
        """The executions a free slot admits in the scopes marked for a
        recheck (after adoption)."""
        scopes, self.recheck = self.recheck, set()
        admitted: list[Live] = []
        for scope in scopes:
            line = self._lines.get(scope)
            if line is not None:
                admitted.extend(self._fill(scope, line))
        return admitted

    def waiting_count(self) -> int:
        return sum(1 for eid in self._waiting if self._in_line(eid))

    # ---- the line

    def _enqueue(self, line: _Line, live: Live, ticket: int) -> None:
        eid = live.state.id
        if eid in self._waiting:
            return
        self._waiting[eid] = ticket
        heapq.heappush(line.waiting, (-self._priority(live), ticket, eid))

    def _first_waiting(self, line: _Line) -> str | None:
        while line.waiting:
            _, ticket, eid = line.waiting[0]
            if self._waiting.get(eid) == ticket:
                if self._in_line(eid):
                    return eid
                del self._waiting[eid]
            heapq.heappop(line.waiting)
        return None

    def _fill(self, scope: Scope, line: _Line) -> list[Live]:
        admitted: list[Live] = []
        while True:
            eid = self._first_waiting(line)
            if eid is None:
                break
            live = self._get(eid)
            assert live is not None
            found = self._scope(live)
            limit = found[1] if found is not None else 0
            if self._count(scope, line) >= limit:
                break
            heapq.heappop(line.waiting)
            del self._waiting[eid]
            line.running.add(eid)
            self.admitted += 1
            admitted.append(live)
        if not line.running and not line.waiting:
            del self._lines[scope]
        return admitted


def admitted_events(live: Live, now: int) -> list[ev.Event]:
    """What an execution let in records: WorkflowAdmitted, WorkflowStarted."""
    state = live.state
    since = state.waiting["since_ms"] if state.waiting is not None else now
    batch = Batch(state, now)
    batch.add(ev.WorkflowAdmitted, max(0, now - since))
    batch.add(ev.WorkflowStarted)
    return batch.events
