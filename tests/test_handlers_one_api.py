"""One handler API (issue 24): the function a worker process runs through the
Python SDK runs unchanged as an in-process handler, under simulated time:
same `(input, ctx)` shape, `orbit_sdk.TaskError` honoured, and the runtime
taken from each step's `using` without being named."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from orbit_core.engine import TaskContext
from orbit_core.testing import run_until_idle, simulated_engine
from orbit_lang import compile_paths
from orbit_sdk import Context, TaskError

HELLO = Path(__file__).resolve().parents[1] / "examples" / "hello.orbit"

seen: list[Any] = []


# Written for a worker process (orbit_sdk.Worker.task), used here as is.
def compose(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    seen.append((ctx.step_id, ctx.attempt, ctx.remaining_ms(), ctx.is_cancelled))
    ctx.log("composing", name=input["name"])
    return {"message": f"Hello, {input['name']}"}


def decorate(input: dict[str, Any], ctx: Context) -> dict[str, Any]:
    if input["excitement"] > 5:
        raise TaskError("TOO_EXCITED", "calm down", retryable=False, details={"max": 5})
    return {"message": input["message"] + "!" * input["excitement"]}


@pytest.fixture
def engine() -> Any:
    engine = simulated_engine()
    for definition in compile_paths([HELLO]).definitions:
        engine.deploy(definition)
    # No runtime given: `compose` is `using python`, `decorate` `using typescript`.
    engine.register_handler("greeting.compose", "1.0.0", compose)
    engine.register_handler("greeting.decorate", "1.0.0", decorate)
    yield engine
    engine.close()


def test_sdk_handlers_run_in_process_whatever_the_steps_runtime(engine: Any) -> None:
    seen.clear()
    engine.start("Hello", input={"name": "Ada", "excitement": 2}, execution_id="h-1")
    run_until_idle(engine)
    state = engine.get("h-1")
    assert (state["status"], state["output"]) == ("COMPLETED", {"greeting": "Hello, Ada!!"})
    assert seen == [("compose", 1, None, False)]


def test_the_sdks_task_error_fails_the_step_without_a_retry(engine: Any) -> None:
    engine.start("Hello", input={"name": "Ada", "excitement": 9}, execution_id="h-2")
    run_until_idle(engine)
    unit = engine.get("h-2")["units"]["decorate"]
    assert unit["status"] == "FAILED" and unit["attempt"] == 1
    assert unit["error"] == {
        "code": "TOO_EXCITED",
        "message": "calm down",
        "retryable": False,
        "details": {"max": 5},
    }


def test_the_context_offers_what_the_sdks_does() -> None:
    public = {name for name in Context.__slots__ if not name.startswith("_")}
    public |= {n for n, _ in inspect.getmembers(Context) if not n.startswith("_")}
    missing = {name for name in public if not hasattr(TaskContext, name)}
    missing -= set(TaskContext.__slots__)
    assert not missing
    ctx = TaskContext({"token": "t", "step_id": "s", "deadline_ms": 1500}, lambda: 1000)
    assert (ctx.remaining_ms(), ctx["step_id"], ctx.get("attempt", 1)) == (500, "s", 1)
