"""The shape every value must have before the engine accepts it
(`orbit_core.limits`): nesting depth, integer range and JSON types, checked
when a command arrives so that one bad value never fails the commit group of
other callers' commands (issue 11, items 2 and 3)."""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from engine_kit import Int, Json, Worker, inp, obj, rec, step, task, workflow
from hypothesis import given, settings
from hypothesis import strategies as st

from orbit_core import events as ev
from orbit_core import ir, limits
from orbit_core.engine import Engine, TaskError
from orbit_core.errors import InvalidError
from orbit_core.ir import Signal
from orbit_core.ir import expr as e
from orbit_core.jsontypes import JsonValue
from orbit_core.limits import MAX_DEPTH, JsonShapeError, check_json
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import CommitBatch
from orbit_core.testing import run_until_idle, simulated_engine
from orbit_core.values import ValidationError, conform


def nested(depth: int, leaf: Any = 0) -> Any:
    """`leaf` inside `depth` levels of objects `{"a": ...}`."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def deep_list(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


class Color(enum.IntEnum):
    RED = 1


# ---------------------------------------------------------------- check_json


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(2**63),
        2**63 - 1,
        1.5e308,
        "",
        "é \u2603 \U0001f600",
        [],
        {},
        nested(MAX_DEPTH),
        deep_list(MAX_DEPTH),
        {"a": [1, 2.5, "x", None, False, {"b": []}]},
    ],
)
def test_json_values_within_the_limits_pass(value: Any) -> None:
    check_json(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (nested(MAX_DEPTH + 1), "$" + ".a" * MAX_DEPTH + ": nested deeper than 128 levels"),
        (deep_list(MAX_DEPTH + 1), "$" + "[0]" * MAX_DEPTH + ": nested deeper than 128 levels"),
        (deep_list(100_000), "$" + "[0]" * MAX_DEPTH + ": nested deeper than 128 levels"),
        (2**63, "$: an integer outside the 64-bit range"),
        ({"n": [-(2**63) - 1]}, "$.n[0]: an integer outside the 64-bit range"),
        ({"n": 10**5000}, "$.n: an integer outside the 64-bit range"),
        ({"x": float("nan")}, "$.x: a number that is not finite"),
        ([float("-inf")], "$[0]: a number that is not finite"),
        ({"a": {1: 2}}, "$.a: an object key that is not a string"),
        ({"a": {"\ud800": 2}}, "$.a: an object key that is not valid Unicode (a lone surrogate)"),
        ({"odd key": ["\udfff"]}, '$["odd key"][0]: a string that is not valid Unicode'),
        ({"t": (1, 2)}, "$.t: a value of Python type `tuple`, which is not JSON"),
        ({"c": Color.RED}, "$.c: a value of Python type `Color`, which is not JSON"),
        ({"k" * 100: 2**64}, '$["' + "k" * 64 + '…"]: an integer outside the 64-bit range'),
    ],
)
def test_values_outside_the_limits_are_located(value: Any, message: str) -> None:
    with pytest.raises(JsonShapeError) as refused:
        check_json(value)
    assert str(refused.value).startswith(message)


def test_a_cycle_is_refused_as_too_deep_rather_than_looping() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(JsonShapeError, match="nested deeper than 128 levels"):
        check_json(loop)


def test_ir_documents_hold_only_integers_canonical_json_writes_exactly() -> None:
    bounds = {"int_min": limits.IR_INT_MIN, "int_max": limits.IR_INT_MAX}
    check_json({"n": 2**53 - 1, "m": -(2**53) + 1}, **bounds)
    with pytest.raises(JsonShapeError) as refused:
        check_json({"n": 2**53}, **bounds)
    assert str(refused.value) == (
        "$.n: an integer outside ±9007199254740991, the range canonical JSON holds exactly "
        "(the IR writes larger integers as strings of digits)"
    )


def test_an_int_beyond_64_bits_is_a_validation_error_on_the_fast_path_too() -> None:
    # The flat-record fast path let the internal exception escape (a 500).
    with pytest.raises(ValidationError) as refused:
        conform({"n": 2**63}, rec(n=Int))
    assert str(refused.value) == "$.n: expected Int, found an integer outside the 64-bit range"


# ---------------------------------------------------------------- the engine


class EncodingStore(MemoryStore):
    """The in-memory store, writing events and worker rows as the SQL stores
    do (orjson), so that what they cannot write fails the commit here too."""

    def commit(self, batch: CommitBatch) -> None:
        for change in batch.executions:
            for event in [*change.events, *change.archived]:
                ev.dumps(event)
        for worker in batch.workers:
            orjson.dumps(worker.contracts)
            orjson.dumps([worker.worker_id, worker.runtime, worker.sdk])
        super().commit(batch)


def sink() -> ir.Definition:
    """A task with JSON input and output, and a signal with a JSON field."""
    return workflow(
        "Sink",
        [step("keep", task="sink.keep", with_=obj(data=inp("data")))],
        [task("sink.keep", rec(data=Json), rec(data=Json))],
        input=rec(data=Json, n=(Int, 0)),
        signals=(Signal("note", rec(data=Json)),),
    )


@pytest.fixture
def engine() -> Iterator[Engine]:
    eng = simulated_engine(EncodingStore())
    eng.deploy(sink())
    yield eng
    eng.close()


def _refused(code: str, message: str) -> Any:
    return pytest.raises(InvalidError, match=rf"^{message}") if code else None


@pytest.mark.parametrize(
    ("input", "message"),
    [
        ({"data": nested(300)}, "workflow input is invalid at $.data" + ".a" * 127),
        ({"data": 2**63}, "workflow input is invalid at $.data: an integer outside the 64-bit"),
        ({"data": 1, "n": 2**63}, "workflow input is invalid at $.n: an integer outside the 64"),
        ({"data": (1,)}, "workflow input is invalid at $.data: a value of Python type `tuple`"),
        ({"data": float("nan")}, "workflow input is invalid at $.data: a number that is not fin"),
        ({"data": {2: 1}}, "workflow input is invalid at $.data: an object key that is not a s"),
        ({"data": "\ud800"}, "workflow input is invalid at $.data: a string that is not valid"),
    ],
)
def test_a_start_with_an_unstorable_input_is_invalid_input(
    engine: Engine, input: Any, message: str
) -> None:
    with pytest.raises(InvalidError) as refused:
        engine.start("Sink", input=input, execution_id="bad")
    assert refused.value.code == "INVALID_INPUT"
    assert refused.value.message.startswith(message)
    assert engine.start("Sink", input={"data": nested(MAX_DEPTH - 1)}, execution_id="ok")["created"]


def test_unstorable_signals_outputs_and_failures_are_refused_and_nothing_is_recorded(
    engine: Engine,
) -> None:
    engine.start("Sink", input={"data": 1}, execution_id="s-1")
    with pytest.raises(InvalidError) as refused:
        engine.signal("s-1", "note", {"data": nested(300)})
    assert refused.value.code == "SIGNAL_PAYLOAD_INVALID"
    assert refused.value.message.startswith("payload for signal `note` is invalid at $.data.a")

    worker = Worker(engine, "w", ["sink.keep"])
    taken = worker.take()
    with pytest.raises(InvalidError) as refused:
        worker.ok(taken, {"data": nested(300)})
    assert (refused.value.code, refused.value.message[:32]) == (
        "INVALID_REQUEST",
        "task output is invalid at $.data",
    )
    with pytest.raises(InvalidError) as refused:
        worker.ok(taken, {"data": 2**64 - 1})
    assert refused.value.message == (
        "task output is invalid at $.data: an integer outside the 64-bit range"
    )
    with pytest.raises(InvalidError) as refused:
        worker.err(taken, "E", details=nested(300))
    assert (refused.value.code, refused.value.message[:33]) == (
        "INVALID_REQUEST",
        "`details` is invalid at $.a.a.a.a",
    )
    with pytest.raises(InvalidError, match="error_message must be a string of valid Unicode"):
        worker.err(taken, "E", "\udc00")
    with pytest.raises(InvalidError, match="reason must be a string of valid Unicode"):
        engine.cancel("s-1", "\ud800")
    with pytest.raises(InvalidError, match="worker_id must be a string of valid Unicode"):
        engine.workers.register("\ud800", "python", [("sink.keep", "1.0.0")])

    # Nothing was recorded and the attempt is still in flight: a storable
    # signal and output are accepted.
    assert engine.signal("s-1", "note", {"data": [1]})["accepted"]
    assert worker.ok(taken, {"data": nested(MAX_DEPTH - 1)}) == {"accepted": True}
    types = [event.TYPE for event in engine.events("s-1")]
    assert types.count("SignalReceived") == 1
    assert "StepFailed" not in types and "AttemptFailed" not in types


def test_an_in_process_handler_with_an_unstorable_output_fails_its_attempt(
    engine: Engine,
) -> None:
    engine.register_handler("sink.keep", "1.0.0", lambda _input: {"data": nested(300)})
    engine.start("Sink", input={"data": 1}, execution_id="h-1")
    run_until_idle(engine)
    state = engine.get("h-1")
    assert state["status"] == "FAILED"
    assert state["error"]["message"].startswith(
        "step `keep` failed: task output is invalid at $.data.a"
    )


def test_a_task_error_with_unstorable_details_keeps_its_code(engine: Engine) -> None:
    def refuse(_input: Any) -> Any:
        raise TaskError("NOPE", "no", retryable=False, details={"x": float("inf")})

    engine.register_handler("sink.keep", "1.0.0", refuse)
    engine.start("Sink", input={"data": 1}, execution_id="h-2")
    run_until_idle(engine)
    error = engine.get("h-2")["error"]
    assert error["code"] == "NOPE"
    assert "details dropped: invalid at $.x: a number that is not finite" in error["message"]


# ---------------------------------------------------------------- deploy


def _document() -> dict[str, Any]:
    return ir.to_json(sink())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(extra=nested(1000)), "$.extra" + ".a" * 127),
        (
            lambda d: d.update(timeout_ms=2**60),
            "$.timeout_ms: an integer outside ±9007199254740991",
        ),
        (lambda d: d.update(timeout_ms=2**63 + 1), "$.timeout_ms: an integer outside ±"),
        (
            lambda d: d["steps"][0]["with"]["entries"][0].update(value=_deep_expr(1000)),
            "$.steps[0].with.entries[0].value" + ".arg" * 122 + ": nested deeper",
        ),
    ],
)
def test_an_ir_document_too_deep_or_with_huge_integers_is_invalid_ir(
    engine: Engine, change: Any, message: str
) -> None:
    document = _document()
    change(document)
    with pytest.raises(InvalidError) as refused:
        engine.deploy(document)
    assert refused.value.code == "INVALID_IR"
    assert refused.value.message.startswith(message)


def _deep_expr(depth: int) -> Any:
    value: Any = {"op": "bool", "value": True}
    for _ in range(depth):
        value = {"op": "not", "arg": value}
    return value


def test_a_definition_object_with_an_int_beyond_64_bits_is_invalid_ir(engine: Engine) -> None:
    # Integers up to 64 bits are written as strings beyond ±(2^53 - 1)
    # (docs/ir.md); a Python int beyond that has no IR form at all.
    defn = workflow("Big", [], [], result=obj(n=0))
    big = ir.Definition(
        **{
            **{f: getattr(defn, f) for f in ("ir_version", "name", "version", "input", "output")},
            "steps": (),
            "result": e.Object((e.Entry("n", e.Int(2**63)),)),
            "contracts": {},
            "definition_hash": "sha256:0",
        }
    )
    with pytest.raises(InvalidError) as refused:
        engine.deploy(big)
    assert refused.value.code == "INVALID_IR"
    assert refused.value.message == "the integer 9223372036854775808 is outside the 64-bit range"


# ---------------------------------------------------------------- other callers


def test_bad_commands_never_fail_the_commit_group_of_good_ones() -> None:
    """Threads send storable and unstorable signals at once; with a real
    pipeline they share commit groups, and every storable one is recorded."""
    eng = Engine(EncodingStore(), handler_threads=0, auto_tick=False)
    try:
        eng.deploy(sink())
        for i in range(4):
            eng.start("Sink", input={"data": i}, execution_id=f"c-{i}")
        failures: list[str] = []
        barrier = threading.Barrier(8)

        def good(i: int) -> None:
            barrier.wait()
            for n in range(40):
                try:
                    eng.signal(f"c-{i}", "note", {"data": [n]})
                except Exception as exc:  # any error of a good command is the bug
                    failures.append(f"good {i}/{n}: {exc!r}")

        def bad(i: int) -> None:
            barrier.wait()
            for _ in range(40):
                payloads: list[JsonValue] = [{"data": nested(300)}, {"data": 2**63}]
                for payload in payloads:
                    try:
                        eng.signal(f"c-{i}", "note", payload)
                        failures.append("an unstorable signal was accepted")
                    except InvalidError as exc:
                        if exc.code != "SIGNAL_PAYLOAD_INVALID":
                            failures.append(f"bad: {exc!r}")

        threads = [threading.Thread(target=good, args=(i,)) for i in range(4)]
        threads += [threading.Thread(target=bad, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert failures == []
        for i in range(4):
            signals = [x for x in eng.events(f"c-{i}") if isinstance(x, ev.SignalReceived)]
            payloads = [s.payload for s in signals]
            assert payloads == [{"data": [n]} for n in range(40)]
    finally:
        eng.close()


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**65), max_value=2**65)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=4)
    | st.sampled_from(["\ud800", "é", "x\udfff", (1,), b"x"])
)
_KEYS = st.text(max_size=3) | st.sampled_from(["\ud800", "ü", 1, None])


@settings(max_examples=400, deadline=None)
@given(
    value=st.recursive(
        _SCALARS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
        max_leaves=30,
    ),
    max_depth=st.integers(min_value=0, max_value=5),
    int_limit=st.sampled_from([limits.INT_MAX, limits.IR_INT_MAX]),
)
def test_the_lean_walk_accepts_only_what_the_full_walk_accepts(
    value: Any, max_depth: int, int_limit: int
) -> None:
    def full(value: Any) -> str | None:
        try:
            check_json(value, max_depth=max_depth, int_min=-int_limit, int_max=int_limit)
        except JsonShapeError as exc:
            return str(exc)
        return None

    verdict = full(value)
    lean = limits._plain
    limits._plain = lambda *args: False  # the full walk alone
    try:
        assert full(value) == verdict
    finally:
        limits._plain = lean


def test_big_integers_as_floats_reads_what_int_cannot_hold_as_a_float() -> None:
    plain: JsonValue = {"a": [1, 2**63 - 1, -(2**63)], "b": 1.5}
    assert limits.big_integers_as_floats(plain) is plain  # nothing to change: no copy
    value: Any = {"a": [1, 2**63, {"b": -(2**63) - 1}], "c": "x", "d": [2**63 - 1]}
    widened = limits.big_integers_as_floats(value)
    assert widened == {
        "a": [1, float(2**63), {"b": float(-(2**63) - 1)}],
        "c": "x",
        "d": [2**63 - 1],
    }
    assert value["a"] == [1, 2**63, {"b": -(2**63) - 1}]  # the caller's value is left alone
    assert limits.big_integers_as_floats(2**64) == float(2**64)
    # An integer no float holds stays, for the checks to refuse.
    assert limits.big_integers_as_floats([10**400]) == [10**400]


def test_big_integers_as_floats_walks_deep_values_without_recursion() -> None:
    deep: JsonValue = 2**63
    for _ in range(5000):
        deep = [deep]
    widened = limits.big_integers_as_floats(deep)
    for _ in range(5000):
        assert isinstance(widened, list)
        widened = widened[0]
    assert widened == float(2**63)
