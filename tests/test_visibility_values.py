"""SearchPlan.values (orbit_core.visibility.fields): the direct reads of
`input.a` and `step.a` give what the evaluator gives, other expressions go
through the evaluator, and changes that make nothing known are skipped."""

from __future__ import annotations

from orbit_core import events as ev
from orbit_core.ir import Definition
from orbit_core.jsontypes import JsonValue
from orbit_core.visibility.fields import SearchPlan, SearchValue
from orbit_lang import compile_source

SOURCE = """\
task "risk.score" {
    version "1.0.0"
    input { customer: String }
    output { level: String }
}

workflow Scored {
    version "1.0.0"
    input { customer: String, amount: Float }
    search {
        customer: input.customer
        doubled: input.amount * 2.0
        who: execution.workflow
        risk: score.level
    }
    step score { worker "risk.score" with { customer: input.customer } }
}
"""


def _definition() -> Definition:
    result = compile_source(SOURCE, "x.orbit")
    assert result.errors == 0, [d.message for d in result.diagnostics]
    (defn,) = result.definitions
    return defn


def _created(input: JsonValue) -> ev.WorkflowCreated:
    return ev.WorkflowCreated(1, 0, "Scored", "1.0.0", "h", input)


EXECUTION = {"id": "e-1", "workflow": "Scored", "version": "1.0.0"}


def test_input_fields_are_known_at_creation() -> None:
    plan = SearchPlan(_definition())
    assert plan.reads_execution
    rows = plan.values(
        [_created({"customer": "c-1", "amount": 2.5})],
        {"customer": "c-1", "amount": 2.5},
        {},
        EXECUTION,
    )
    assert sorted(rows, key=lambda r: r.field) == [
        SearchValue("customer", "c-1", None),
        SearchValue("doubled", None, 5.0),
        SearchValue("who", "Scored", None),
    ]


def test_a_null_or_non_object_input_writes_no_direct_row() -> None:
    plan = SearchPlan(_definition())
    assert [r.field for r in plan.values([_created(None)], None, {}, EXECUTION)] == ["who"]
    # The evaluator refuses a field of a list: no row, no error.
    assert [r.field for r in plan.values([_created([1])], [1], {}, EXECUTION)] == ["who"]


def test_step_fields_are_known_when_the_step_has_its_output() -> None:
    plan = SearchPlan(_definition())
    completed = ev.StepSucceeded(5, 0, "score", 1, {"level": "high"})
    assert plan.values([completed], {"customer": "c"}, {}, EXECUTION) == []
    rows = plan.values([completed], {"customer": "c"}, {"score": {"level": "high"}}, EXECUTION)
    assert rows == [SearchValue("risk", "high", None)]
    assert plan.values([completed], {}, {"score": "text"}, EXECUTION) == []


def test_changes_without_a_known_value_write_nothing() -> None:
    plan = SearchPlan(_definition())
    assert plan.values([], {"customer": "c"}, {}, EXECUTION) == []
