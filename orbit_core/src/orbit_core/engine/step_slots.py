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
offer are deleted (`reconcile`).

Another server's freed slot is not announced: the units waiting here try
again every `RETRY_MS` (and at once after a group of this server frees one
of their scope), so a free slot is found within that time.
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

    def __init__(self, port: StepSlots, holding: Callable[[Holder, Offer], bool]) -> None:
        self._port = port
        self._holding = holding
        # What this engine holds: holder to (scope, offer), and per execution.
        self._rows: dict[Holder, tuple[Scope, Offer]] = {}
        self._of: dict[str, set[str]] = {}
        # Executions adopted since the last reconciliation.
        self._adopted: set[str] = set()

    def take(self, scope: Scope, holder: Holder, offer: Offer, limit: int) -> bool:
        if self._rows.get(holder) == (scope, offer):
            return True
        if not self._port.take_step_slot(slot_of(scope, holder, offer), limit):
            return False
        self.held(scope, holder, offer)
        return True

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
        out: list[StepSlot] = []
        of = self._of
        for eid in execution_ids:
            keys = of.get(eid)
            if not keys:
                continue
            for unit_key in list(keys):
                holder = (eid, unit_key)
                scope, offer = self._rows[holder]
                if not self._holding(holder, offer):
                    out.append(slot_of(scope, holder, offer))
                    del self._rows[holder]
                    keys.discard(unit_key)
            if not keys:
                del of[eid]
        return out

    def forget(self, execution_id: str) -> None:
        """The execution left this engine (ended, or owned elsewhere now)."""
        for unit_key in self._of.pop(execution_id, ()):
            self._rows.pop((execution_id, unit_key), None)

    def adopted(self, execution_id: str) -> None:
        self._adopted.add(execution_id)

    def reconcile(self) -> None:
        """Deletes the rows of the executions adopted since the last call
        whose units do not hold that offer (left by a crash, an undone group
        or a refused commit). A database away leaves them for the next call."""
        if not self._adopted:
            return
        ids = sorted(self._adopted)
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
        except StorageError:
            return
        self._adopted.difference_update(ids)
