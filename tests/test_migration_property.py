"""Issue 41's property: a history of Flow 1.0.0, cut at a random safe point
and migrated to 2.0.0, is accepted by replay (each part decided by its own
definition), keeps every recorded outcome of the mapped steps, and ends as
2.0.0 dictates from the mapped state."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from orbit_cli.replay import replay
from orbit_core.engine import Engine
from orbit_core.testing import SimulatedClock, simulated_engine
from orbit_lang.compiler import compile_files

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "migration"
V1 = compile_files([FIXTURES / "flow-v1.orbit"])[-1]
V2 = compile_files([FIXTURES / "flow-v2.orbit"])[-1]
HOUR = 3_600_000


def serve_one(engine: Engine, add: int) -> None:
    """Runs one `t.add` task: its output is its input plus `add`."""
    session = engine.workers.register("w", "python", [("t.add", "1.0.0")])
    task = engine.workers.poll(session["worker_session_id"], wait_ms=0)
    assert task is not None
    given = task["input"]
    assert isinstance(given, dict) and isinstance(given["n"], int)
    engine.workers.complete(task["token"], {"v": given["n"] + add})


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(-1000, 1000),
    add=st.integers(0, 50),
    k=st.integers(-5, 5),
    cut=st.sampled_from(["in_sleep", "in_await"]),
    early_signal=st.booleans(),
)
def test_a_migrated_history_replays_and_ends_as_v2_says(
    n: int, add: int, k: int, cut: str, early_signal: bool
) -> None:
    clock = SimulatedClock()
    engine = simulated_engine(clock=clock)
    engine.deploy(V1)
    engine.start("Flow", "1.0.0", {"n": n}, execution_id="f")
    # Before `a` ends its attempt is in flight: not yet a safe point.
    engine.deploy(V2)
    planned = engine.migrations.plan("Flow", "1.0.0", "2.0.0")["executions"]
    assert planned[0]["verdict"] == "at_safe_point"
    serve_one(engine, add)
    if early_signal:
        engine.signal("f", "go", {"k": k})
    if cut == "in_await":
        clock.advance(HOUR)
        engine.tick()
    if cut == "in_await" and early_signal:  # it took the signal and finished
        assert engine.get("f")["status"] == "COMPLETED"
        return
    before = engine.get("f")
    assert engine.migrations.run("Flow", "1.0.0", "2.0.0")["migrated"] == 1
    after = engine.get("f")
    assert after["version"] == "2.0.0"
    assert after["input"] == {"n": n, "m": n * 2 + n + add}
    assert after["units"]["a"]["output"] == before["units"]["a"]["output"]
    if cut == "in_await":
        assert after["units"]["pause"]["output"] == before["units"]["b"]["output"]
    clock.advance(HOUR)
    engine.tick()
    if not early_signal:
        engine.signal("f", "go", {"k": k})
    serve_one(engine, add)
    done = engine.get("f")
    assert done["status"] == "COMPLETED"
    assert done["output"] == {"v": n + add, "k": k, "d": n * 2 + n + add + add}
    report = replay("f", engine.events("f"), V1, migrated_to=[V2])
    assert report.divergences == []
    engine.close()
