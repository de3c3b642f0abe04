"""A step's `concurrency` across the servers of shared mode: its slots are
rows in the store, not counts in one server's memory.

A step key may read the step's `for` variable, so the units of one
execution can fall under different keys: moving every execution of a key
to one server (as the flow gates of a workflow's limits do) does not fit.
Instead each slot is a row (`StepSlot`: the scope `<workflow>/<step>` and
key, and its holder, one offer of one unit), and a unit is queued only once
it holds one. The row is taken in a short transaction of its own
(`StepSlots.take_step_slot`), serialized per scope, which inserts it only
while fewer than `max` rows of the scope exist; taking a row already held
by the same offer answers yes, so a unit queued again (a group undone and
decided again) does not count twice.

The row goes in the same commit as the event that makes its unit leave the
offer (it completes, fails, times out, is lost for good, is cancelled or
paused while queued; its execution ends): at the end of each group, the
slots held by the executions the group changed are looked at (`freed`),
and those whose unit no longer holds its offer become
`CommitBatch.freed_slots`.

A row can outlive its unit: a server that stops between taking a slot and
committing the unit's `StepScheduled`, a group that fails after the take,
or a commit refused because another server took the execution over. The
execution's owner reconciles them: after a restart, a take-over or an undone
group, the rows of the executions it adopted whose unit no longer holds that
offer are deleted (`reconcile`). An execution whose creating group was
undone has no owner to do that (the store never held it): the engine that
took its rows deletes them as it undoes the group (`abandon`), before the
start is answered, so a start tried again under the same id finds them
gone (seed 610225 of the shared simulation: the rows of such a start held a
slot of their key for ever, and every later execution of the key waited).
Whatever memory lost track of, an end frees: every server's round deletes
the slot and waiting rows of executions that have ended (`StepSlots.
sweep_step_rows`; rows of a later run are a restart's and stay). Rows of an
execution that ended after its server lost it, or that a server adopted
waiting and saw end before its next reconciliation, held their key's line
for good before (seeds 663376, 744308 and others of the shared simulation).
A server that dies between the take and the commit creating the execution
still leaves its rows: that execution never exists, so neither an owner nor
the sweep can judge them (open: docs/reliability.md).

The line is the group's, in the store too: a unit that asks for a slot
and is refused leaves a waiting row (`orbit_step_waits`: its offer, step
`priority` and since when it waits) in the same transaction, and a take
succeeds only while no waiting row of another unit of the scope is ahead
of the taker (higher priority; then earlier; then by execution id and unit
key: `coordination.waits_ahead`); taking deletes the taker's row. So a
freed slot goes to the head of the whole line, whichever server it waits
on. Each server orders its own line the same way (step_gate.py), so the
unit it asks with is never behind a row of its own; it asks with the
first of its line, and with a new unit that goes ahead of that one.

Another server's freed slot is not announced: the units waiting here try
again every `RETRY_MS` (and at once after a group of this server frees one
of their scope), so the head of the line finds a free slot within that
time, and the others wait behind it.

A unit's priority and since are read from its history (its step's
`priority` over the input; since: its `StepScheduled` time), so whichever
server owns it puts it at the same place.

A waiting row must not outlive its unit's wait, or it would hold the line
up: it goes in the commit of the group whose events make its unit leave
the line without a slot (cancelled, paused, its execution ended: `left`,
`CommitBatch.freed_waits`). The owner's reconciliation looks at the rows of
the executions it adopts (after a restart, or a take-over of a server that
stopped or was SIGKILLed) and of those an undone group changed: a row
whose unit waits here with that offer keeps its place, the others are
deleted. An undone start is adopted by nobody, so its waiting rows go at
once with its slots (`abandon`): one left by a server that stopped before
its next reconciliation would stand ahead of the whole line for good (seed
626956). Rows a server wrote for an
execution it then lost (its commit refused after a take-over) are deleted
at its next reconciliation (a unit of the new owner that still waits asks
again and writes its row anew). A dead server's waiting rows thus hold the
line until its executions are taken over (the node timeout), as its slots
do, and then keep their place under the new owner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from orbit_core.coordination import StepSlots
from orbit_core.engine.step_rate import SEPARATOR, Holder, Offer, Scope
from orbit_core.errors import StorageError
from orbit_core.ports import StepSlot

# How often units waiting for a slot of another server ask again (engine ms).
RETRY_MS = 100


def slot_of(scope: Scope, holder: Holder, offer: Offer) -> StepSlot:
    return StepSlot(
        f"{scope[0]}{SEPARATOR}{scope[1]}", scope[2], holder[0], holder[1], offer[0], offer[1]
    )


class SharedSlots:
    """The step slots this engine holds in the store, for its executions."""

    def __init__(
        self,
        port: StepSlots,
        holding: Callable[[Holder, Offer], bool],
        place: Callable[[Holder, Offer], tuple[int, int] | None],
    ) -> None:
        self._port = port
        self._holding = holding
        # Where a unit waits in this engine's line with that offer:
        # (priority, since), or None when it does not.
        self._place = place
        # What this engine holds: holder to (scope, offer), and per execution.
        self._rows: dict[Holder, tuple[Scope, Offer]] = {}
        self._of: dict[str, set[str]] = {}
        # The waiting rows this engine wrote, the same way.
        self._waits: dict[Holder, tuple[Scope, Offer]] = {}
        self._waits_of: dict[str, set[str]] = {}
        # Executions adopted since the last reconciliation, and those of
        # undone groups (not always adopted again: an undone start is not).
        self._adopted: set[str] = set()
        self._undone: set[str] = set()
        # Waiting rows this engine wrote for executions it let go of before
        # their units left the line (owned elsewhere now): deleted at the
        # next reconciliation. The new owner's units re-ask if they wait.
        self._orphans: list[StepSlot] = []
        # Slot rows of executions that never came to be (`abandon`) that
        # could not be deleted yet (the database away): tried again by
        # `reconcile`.
        self._abandoned: list[StepSlot] = []

    def take(
        self, scope: Scope, holder: Holder, offer: Offer, limit: int, *, priority: int, since: int
    ) -> bool:
        """Asks the store for a slot; refused, the unit's waiting row is there."""
        if self._rows.get(holder) == (scope, offer):
            return True
        if not self._port.take_step_slot(slot_of(scope, holder, offer), limit, priority, since):
            self._waits[holder] = (scope, offer)
            self._waits_of.setdefault(holder[0], set()).add(holder[1])
            return False
        self._unwait(holder)
        self.held(scope, holder, offer)
        return True

    def _unwait(self, holder: Holder) -> None:
        if self._waits.pop(holder, None) is not None:
            keys = self._waits_of[holder[0]]
            keys.discard(holder[1])
            if not keys:
                del self._waits_of[holder[0]]

    def holds(self, scope: Scope, holder: Holder, offer: Offer) -> bool:
        return self._rows.get(holder) == (scope, offer)

    def held(self, scope: Scope, holder: Holder, offer: Offer) -> None:
        """A slot this engine holds in the store (taken, or adopted)."""
        self._rows[holder] = (scope, offer)
        self._of.setdefault(holder[0], set()).add(holder[1])

    def freed(self, execution_ids: Iterable[str]) -> list[StepSlot]:
        """The slots of these executions whose units let go of their offer:
        for the group's commit (forgotten here already; an undone group
        brings them back through adoption)."""
        return _let_go(self._rows, self._of, execution_ids, self._holding)

    def left(self, execution_ids: Iterable[str]) -> list[StepSlot]:
        """The waiting rows of these executions whose units no longer wait
        with that offer (not taken: cancelled, paused, retried, ended), for
        the group's commit; forgotten here already."""
        return _let_go(
            self._waits,
            self._waits_of,
            execution_ids,
            lambda holder, offer: self._place(holder, offer) is not None,
        )

    def forget(self, execution_id: str, *, ended: bool = True) -> None:
        """The execution left this engine: it ended (its rows are all stale:
        a reconciliation still due deletes those of units adopted but not
        held yet, seed 663376), or another server owns it now (its rows are
        no longer this engine's to judge: from a memory without it every row
        looks stale, the new owner's too; seed 653870 deleted the slot of an
        attempt still out)."""
        if not ended:
            self._adopted.discard(execution_id)
        for unit_key in self._of.pop(execution_id, ()):
            self._rows.pop((execution_id, unit_key), None)
        for unit_key in self._waits_of.pop(execution_id, ()):
            scope, offer = self._waits.pop((execution_id, unit_key))
            self._orphans.append(slot_of(scope, (execution_id, unit_key), offer))

    def adopted(self, execution_id: str) -> None:
        self._adopted.add(execution_id)

    def undone(self, execution_ids: Iterable[str]) -> None:
        """A group that changed these executions was undone: the waiting rows
        it wrote go at the next reconciliation (its slots are found again by
        their holder: the same offer asks for them again). An execution
        the group created is `abandon`ed as well."""
        self._undone.update(execution_ids)

    def abandon(self, execution_id: str) -> None:
        """The execution never came to be (its creating group was undone and
        the store holds no history of it): the slot and waiting rows this
        engine wrote for it are deleted now (a server that stops before its
        next reconciliation must not leave them: nobody else ever will) or,
        with the database away, by `reconcile`."""
        for unit_key in sorted(self._of.pop(execution_id, ())):
            scope, offer = self._rows.pop((execution_id, unit_key))
            self._abandoned.append(slot_of(scope, (execution_id, unit_key), offer))
        for unit_key in sorted(self._waits_of.pop(execution_id, ())):
            scope, offer = self._waits.pop((execution_id, unit_key))
            self._orphans.append(slot_of(scope, (execution_id, unit_key), offer))
        self._free_abandoned()

    def _free_abandoned(self) -> bool:
        """Deletes the rows `abandon` and `forget` left; False when the
        database is away (they are tried again)."""
        try:
            if self._abandoned:
                self._port.free_step_slots(self._abandoned)
                self._abandoned = []
            if self._orphans:
                self._port.free_step_waits(self._orphans)
                self._orphans = []
        except StorageError:
            return False
        return True

    def reconcile(self) -> None:
        """Deletes the slot rows of the executions adopted since the last
        call whose units do not hold that offer (left by a crash, an undone
        group or a refused commit), those `abandon` could not, and the
        waiting rows of the adopted executions and of the executions of
        undone groups whose units do not wait here with that offer. A
        database away leaves them for the next call."""
        if not self._free_abandoned():
            return
        if not self._adopted and not self._undone:
            return
        ids = sorted(self._adopted)
        unsure = sorted(self._adopted | self._undone)
        try:
            found = self._port.step_slots_of(ids)
            stale = []
            for slot in found:
                holder, offer = (slot.execution_id, slot.unit_key), (slot.run, slot.offer_seq)
                if self._holding(holder, offer):
                    # Held: the unit goes in when its line is next looked at.
                    workflow, _, step = slot.flow.partition(SEPARATOR)
                    self.held((workflow, step, slot.key), holder, offer)
                else:
                    stale.append(slot)
            if stale:
                self._port.free_step_slots(stale)
            # Waiting rows: those of units waiting here with that offer, at
            # that place, keep it (priority and since are the history's, the
            # same here as where they were written, unless a migration
            # changed the priority); the others go.
            kept: list[StepSlot] = []
            gone: list[StepSlot] = []
            for wait in self._port.step_waits_of(unsure):
                row = wait.offer
                holder, offer = (row.execution_id, row.unit_key), (row.run, row.offer_seq)
                here = self._place(holder, offer)
                (kept if here == (wait.priority, wait.since_ms) else gone).append(row)
            if gone:
                self._port.free_step_waits(gone)
        except StorageError:
            return
        for eid in unsure:
            for unit_key in self._waits_of.pop(eid, ()):
                self._waits.pop((eid, unit_key), None)
        for slot in kept:
            workflow, _, step = slot.flow.partition(SEPARATOR)
            holder = (slot.execution_id, slot.unit_key)
            self._waits[holder] = ((workflow, step, slot.key), (slot.run, slot.offer_seq))
            self._waits_of.setdefault(holder[0], set()).add(holder[1])
        self._adopted.difference_update(ids)
        self._undone.difference_update(unsure)


def _let_go(
    rows: dict[Holder, tuple[Scope, Offer]],
    of: dict[str, set[str]],
    execution_ids: Iterable[str],
    kept: Callable[[Holder, Offer], bool],
) -> list[StepSlot]:
    """Removes from `rows` (and its index by execution, `of`) the rows of
    these executions that `kept` no longer keeps, and returns them."""
    out: list[StepSlot] = []
    for eid in execution_ids:
        keys = of.get(eid)
        if not keys:
            continue
        for unit_key in list(keys):
            holder = (eid, unit_key)
            scope, offer = rows[holder]
            if not kept(holder, offer):
                out.append(slot_of(scope, holder, offer))
                del rows[holder]
                keys.discard(unit_key)
        if not keys:
            del of[eid]
    return out
