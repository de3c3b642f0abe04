"""A batch's `where` is typed against the workflow's deployed versions. With
several servers on one store, a server learns of a deploy made through
another on its next round; a batch asked of it before then must not be
refused as naming fields the workflow lacks (it failed that way in CI, in
shared mode, under load)."""

from __future__ import annotations

from pathlib import Path

from orbit_core.memory_store import MemoryStore
from orbit_core.testing import simulated_engine
from orbit_lang.compiler import compile_files
from orbit_server.batches import Filter

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "visibility.orbit"
WHERE = 'customer == "c-1" and amount > 500'


def test_a_workflow_deployed_through_another_engine_is_loaded_to_type_the_filter() -> None:
    store = MemoryStore()
    here = simulated_engine(store)
    there = simulated_engine(store)
    for definition in compile_files([EXAMPLE]):
        there.deploy(definition)
    chosen = Filter.parse({"workflow": "Orders", "where": WHERE})
    assert chosen.typed(here) is not None
    here.close()
    there.close()
