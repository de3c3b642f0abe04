"""Flow-control declarations (issue 39.1, docs/language/flow-control.md):
parsed on workflows and task steps, printed back canonically by the
formatter, checked with located E1100-E1111/W1100 diagnostics, and lowered
to a `flow` IR member that is absent (with the hash unchanged) when nothing
is declared."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbit_core import ir
from orbit_lang.compiler import compile_paths, compile_source
from orbit_lang.formatter import format_source

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flow_control.orbit"

TASK = """\
task "demo.work" {
    version "1.0.0"
    input { customer_id: String }
    output {}
}
"""


def workflow(members: str, step_members: str = "", fields: str = "") -> str:
    return (
        TASK
        + "\nworkflow W {\n"
        + '    version "1.0.0"\n'
        + f"    input {{ customer_id: String, rank: Int = 0{fields} }}\n"
        + members
        + "\n    step work {\n"
        + '        worker "demo.work"\n'
        + "        with { customer_id: input.customer_id }\n"
        + step_members
        + "    }\n}\n"
    )


def codes(source: str) -> list[tuple[str, int]]:
    result = compile_source(source, "w.orbit")
    return [
        (d.code, d.span.line if d.span else 0)
        for d in result.diagnostics
        if d.code.startswith(("E11", "W11"))
    ]


def test_the_example_compiles_to_a_keyed_concurrency_limit() -> None:
    result = compile_paths([EXAMPLE])
    assert result.errors == 0, result.diagnostics
    (definition,) = result.definitions
    document = ir.to_json(definition)
    assert document["flow"] == {
        "concurrency": {
            "limit": 2,
            "key": {"op": "get", "target": {"op": "input"}, "field": "customer_id"},
        }
    }
    assert ir.from_json(document) == definition


def test_every_form_parses_checks_and_round_trips_through_the_ir() -> None:
    source = workflow(
        "    concurrency { max: 5 }\n"
        "    rate { max: 100, per: 1m, burst: 150, key: input.customer_id, on_exceed: drop }\n"
        "    priority: input.rank\n"
        "    debounce { period: 10s, max_wait: 1m, key: input.customer_id }\n",
        "        concurrency { max: 3, key: input.customer_id }\n"
        "        rate { max: 10, per: 1s }\n"
        "        priority: input.rank * 2\n"
        "        fairness { key: input.customer_id, weight: 2 }\n",
    )
    result = compile_source(source, "w.orbit")
    assert result.errors == 0, result.diagnostics
    (definition,) = result.definitions
    flow = definition.flow
    assert flow is not None and flow.concurrency == ir.definition.Concurrency(5)
    assert flow.rate is not None and (flow.rate.on_exceed, flow.rate.burst) == ("drop", 150)
    assert flow.debounce is not None and flow.debounce.max_wait_ms == 60_000
    step = definition.steps[0].flow
    assert step is not None and step.fairness is not None and step.concurrency is not None
    assert ir.from_json(ir.to_json(definition)) == definition


def test_without_flow_control_the_ir_has_no_flow_member_and_keeps_its_hash() -> None:
    plain = compile_source(workflow(""), "w.orbit")
    (definition,) = plain.definitions
    document = ir.to_json(definition)
    steps = document["steps"]
    assert isinstance(steps, list) and isinstance(steps[0], dict)
    assert "flow" not in document and "flow" not in steps[0]
    assert definition.ir_version == ir.IR_V1


def test_the_formatter_prints_the_declarations_canonically() -> None:
    messy = workflow(
        "    concurrency {max:2,key:input.customer_id}\n    priority :input.rank\n",
    )
    formatted = format_source(messy).text
    assert "    concurrency { max: 2, key: input.customer_id }\n" in formatted
    assert "    priority: input.rank\n" in formatted
    assert format_source(formatted).changed is False
    assert format_source(EXAMPLE.read_text()).changed is False


@pytest.mark.parametrize(
    ("members", "step_members", "expected"),
    [
        ("    concurrency { max: 2, kee: input.customer_id }\n", "", [("E1100", 10)]),
        ("    concurrency { max: 2, max: 3 }\n", "", [("E1101", 10)]),
        ("    concurrency { key: input.customer_id }\n", "", [("E1102", 10)]),
        ("    concurrency { max: 0 }\n", "", [("E1103", 10)]),
        ("    rate { max: 1, per: 5 }\n", "", [("E1104", 10)]),
        ("    concurrency { max: 1, key: input.tags }\n", "", [("E1105", 10)]),
        ("    concurrency { max: 1, key: input.note }\n", "", [("E1105", 10)]),
        ("    priority: input.customer_id\n", "", [("E1106", 10)]),
        ("    concurrency { max: 1, key: work.x }\n", "", [("E1107", 10)]),
        ("    rate { max: 1, per: 1s, on_exceed: spill }\n", "", [("E1108", 10)]),
        ("", "        rate { max: 1, per: 1s, on_exceed: drop }\n", [("E1108", 14)]),
        ("", "        debounce { period: 1s }\n", [("E1109", 14)]),
        ("    priority: 1\n    priority: 2\n", "", [("E1110", 11)]),
        ("    rate { max: 5, per: 1s, burst: 2 }\n", "", [("E1111", 10)]),
        ("    debounce { period: 1m, max_wait: 1s }\n", "", [("E1111", 10)]),
        ('    concurrency { max: 1, key: "all" }\n', "", [("W1100", 10)]),
    ],
)
def test_located_diagnostics(members: str, step_members: str, expected: list[object]) -> None:
    fields = ", tags: List<String> = [], note: String? = null"
    assert codes(workflow(members, step_members, fields)) == expected


def test_a_step_that_runs_no_task_takes_no_flow_control() -> None:
    source = (
        'workflow W {\n    version "1.0.0"\n    step nap {\n        sleep 1s\n'
        "        priority: 1\n    }\n}\n"
    )
    assert codes(source) == [("E1109", 5)]
