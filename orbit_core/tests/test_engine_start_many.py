"""`Engine.start_many`: several starts submitted together. Each answers as
its own `start` would, in the order asked; together they share a group, so
one commit makes them all durable, and the caller waits once."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from engine_kit import plain
from test_engine_faults import SwitchableStore, poison

from orbit_core.api import StartRequest
from orbit_core.engine import Engine
from orbit_core.errors import OrbitError, StorageError
from orbit_core.jsontypes import JsonValue
from orbit_core.memory_store import MemoryStore
from orbit_core.testing import simulated_engine


def _code(answer: Any) -> str | None:
    return answer.code if isinstance(answer, OrbitError) else None


def test_each_start_answers_as_a_lone_start_would_in_the_order_asked() -> None:
    engine = simulated_engine(MemoryStore())
    engine.deploy(plain())
    assert engine.start("Plain", input={"n": 1}, execution_id="old")["created"]
    answers = engine.start_many(
        [
            StartRequest("Plain", input={"n": 1}, execution_id="new-1"),
            StartRequest("Plain", input={"n": 1}, execution_id="old"),
            StartRequest("Plain", input={"n": "one"}, execution_id="bad-input"),
            StartRequest("Missing", execution_id="no-workflow"),
            StartRequest("Plain", input={"n": 1}, execution_id="not an id!"),
            StartRequest("Plain", input={"n": 1}, execution_id="new-1"),
            StartRequest("Plain", input={"n": 2}),
        ]
    )
    assert answers[0] == {"execution_id": "new-1", "created": True}
    assert answers[1] == {"execution_id": "old", "created": False}
    assert [_code(a) for a in answers[2:5]] == [
        "INVALID_INPUT",
        "WORKFLOW_NOT_FOUND",
        "INVALID_EXECUTION_ID",
    ]
    # The second start of an id asked twice finds the first one's execution.
    assert answers[5] == {"execution_id": "new-1", "created": False}
    unnamed = answers[6]
    assert isinstance(unnamed, dict) and unnamed["created"] is True
    assert engine.get(unnamed["execution_id"])["input"] == {"n": 2}
    assert engine.get("new-1")["input"] == {"n": 1}
    for refused in ("bad-input", "no-workflow"):
        with pytest.raises(OrbitError):
            engine.get(refused)
    engine.close()


def test_an_input_over_the_size_limit_is_refused_before_anything_is_submitted() -> None:
    engine = simulated_engine(MemoryStore())
    engine.deploy(plain())
    huge: JsonValue = {"n": 1, "pad": "x" * (3 * 2**20)}
    answers = engine.start_many(
        [
            StartRequest("Plain", input=huge, execution_id="big"),
            StartRequest("Plain", input={"n": 1}),
        ]
    )
    assert _code(answers[0]) == "INVALID_INPUT"
    assert isinstance(answers[1], dict) and answers[1]["created"]
    engine.close()


def test_the_starts_of_one_call_share_one_commit() -> None:
    engine = simulated_engine(MemoryStore())
    engine.deploy(plain())
    before = engine.counters.commits
    answers = engine.start_many(
        [StartRequest("Plain", input={"n": i}, execution_id=f"p-{i}") for i in range(50)]
    )
    assert all(isinstance(a, dict) and a["created"] for a in answers)
    assert engine.counters.commits == before + 1
    assert engine.start_many([]) == []
    engine.close()


def test_a_failed_commit_answers_every_start_with_the_storage_error() -> None:
    store = SwitchableStore()
    engine = simulated_engine(store)
    engine.deploy(plain())
    store.failing = True
    answers = engine.start_many(
        [StartRequest("Plain", input={"n": i}, execution_id=f"p-{i}") for i in range(3)]
    )
    assert all(isinstance(a, StorageError) for a in answers)
    store.failing = False
    assert store.execution_row("p-0") is None
    again = engine.start_many([StartRequest("Plain", input={"n": 0}, execution_id="p-0")])
    assert again == [{"execution_id": "p-0", "created": True}]
    engine.close()


@pytest.mark.parametrize("pipeline", [False, True], ids=["inline", "committer-thread"])
def test_a_start_whose_decision_raises_fails_alone(
    monkeypatch: pytest.MonkeyPatch, pipeline: bool
) -> None:
    store = MemoryStore()
    engine = Engine(store, handler_threads=0, auto_tick=False, pipeline=pipeline)
    engine.deploy(plain())
    poison(monkeypatch, {"bad"})
    good, bad, also_good = engine.start_many(
        [
            StartRequest("Plain", input={"n": 1}, execution_id="good"),
            StartRequest("Plain", input={"n": 1}, execution_id="bad"),
            StartRequest("Plain", input={"n": 1}, execution_id="also-good"),
        ]
    )
    assert _code(bad) == "INTERNAL"
    assert good == {"execution_id": "good", "created": True}
    assert also_good == {"execution_id": "also-good", "created": True}
    assert store.execution_row("bad") is None
    assert store.execution_row("good") is not None
    engine.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pipeline", [False, True], ids=["inline", "committer-thread"])
def test_many_callers_mixing_lone_and_batched_starts_all_get_their_answers(
    pipeline: bool,
) -> None:
    """Batches and lone starts from several threads at once: the lead of a
    group passes between them, and every caller returns with every answer."""
    engine = Engine(MemoryStore(), handler_threads=0, auto_tick=False, pipeline=pipeline)
    engine.deploy(plain())
    answers: dict[str, Any] = {}
    lock = threading.Lock()

    def batches(n: int) -> None:
        for round_ in range(30):
            ids = [f"b{n}-{round_}-{i}" for i in range(n % 5 + 1)]
            got = engine.start_many(
                [StartRequest("Plain", input={"n": 1}, execution_id=x) for x in ids]
            )
            with lock:
                answers.update(zip(ids, got, strict=True))

    def lone(n: int) -> None:
        for round_ in range(30):
            x = f"l{n}-{round_}"
            got = engine.start("Plain", input={"n": 1}, execution_id=x)
            with lock:
                answers[x] = got

    threads = [threading.Thread(target=batches, args=(n,)) for n in range(6)]
    threads += [threading.Thread(target=lone, args=(n,)) for n in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    assert not any(th.is_alive() for th in threads)
    expected = sum(n % 5 + 1 for n in range(6)) * 30 + 4 * 30
    assert len(answers) == expected
    assert all(a == {"execution_id": x, "created": True} for x, a in answers.items())
    assert engine.health()["started"] == expected
    engine.close()
