"""The commit pipeline merges the groups prepared while a commit ran into one
batch (engine/pipeline.py `_merge`): nothing a group's changes carry may be
lost on the way, or the store never writes it."""

from __future__ import annotations

from orbit_core.engine.live import NO_ROW
from orbit_core.engine.pipeline import _merge
from orbit_core.ports import CommitBatch, ExecutionChange, IdempotencyRow, StepSlot


def _start(execution_id: str, key: str) -> CommitBatch:
    batch = CommitBatch()
    row = IdempotencyRow(key, execution_id, "W", "digest", 1, 2)
    batch.executions.append(ExecutionChange(execution_id, NO_ROW, new=True, idempotency=row))
    return batch


def test_merged_groups_keep_each_start_s_idempotency_key() -> None:
    merged = _merge([_start("e-1", "k-1"), _start("e-2", "k-2")])
    keys = {c.execution_id: c.idempotency and c.idempotency.key for c in merged.executions}
    assert keys == {"e-1": "k-1", "e-2": "k-2"}


def test_a_later_group_of_the_same_execution_keeps_the_key_of_its_start() -> None:
    later = CommitBatch()
    later.executions.append(ExecutionChange("e-1", NO_ROW))
    (change,) = _merge([_start("e-1", "k-1"), later]).executions
    assert change.idempotency is not None and change.idempotency.key == "k-1"


def test_merged_groups_keep_the_step_slots_and_waits_they_free() -> None:
    """Shared mode's freed step slots and waiting rows (engine/step_slots.py)
    are deleted by the commit that carries them: merged groups must keep
    every one (before, `_merge` dropped them, and the rows of a slot whose
    attempt ended stayed, holding the slot for ever)."""
    one, two = CommitBatch(), CommitBatch()
    a = StepSlot("W/work", "c-1", "e-1", "work", 1, 3)
    b = StepSlot("W/work", "c-1", "e-2", "work", 1, 4)
    one.freed_slots.append(a)
    two.freed_slots.append(b)
    two.freed_waits.append(a)
    merged = _merge([one, two])
    assert merged.freed_slots == [a, b]
    assert merged.freed_waits == [a]
