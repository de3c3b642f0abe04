"""W1340/W1341 (a workflow outgrowing its own `max_history_events`) and
their policy form E1340/E1341 (orbit_lang.envelope, orbit_lang.policy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbit_core.envelope import envelope
from orbit_lang.compiler import compile_source
from orbit_lang.diagnostics import Diagnostic, Severity
from orbit_lang.policy import apply_policies, load_policy

TASK = """task "orders.work" {
    version "1.0.0"
    input { customer: String }
    output {}
}
"""


def workflow(limits: str, retry: str = "") -> str:
    return (
        TASK
        + f"""
workflow Batch {{
    version "1.0.0"
    input {{ items: List<String> }}
    {limits}

    step first {{
        worker "orders.work"
        with {{ customer: "a" }}
    }}

    step each {{
        for item in input.items
        worker "orders.work"
        with {{ customer: item }}
        {retry}
    }}
}}
"""
    )


EACH_LINE = workflow("").splitlines().index("    step each {") + 1


def codes(diagnostics: list[Diagnostic]) -> list[str]:
    return [d.code for d in diagnostics]


def test_an_unbounded_for_under_a_history_limit_is_w1340_at_the_step() -> None:
    result = compile_source(workflow("limits { max_history_events: 100 }"))
    assert codes(result.diagnostics) == ["W1340"]
    (found,) = result.diagnostics
    assert found.severity is Severity.WARNING
    assert found.message == (
        "`for` over `input.items` with no `max_fan_out`: a run of `Batch` has no bound on its "
        "history events, and its `max_history_events: 100` ends it with LIMIT_EXCEEDED"
    )
    assert found.span is not None and found.span.line == EACH_LINE
    assert found.help is not None and "max_fan_out" in found.help
    assert result.definitions  # a warning: the workflow still compiles


def test_a_worst_case_above_the_limit_is_w1341_naming_the_largest_step() -> None:
    source = workflow(
        "limits { max_history_events: 100, max_fan_out: 50 }", "retry { attempts: 3 }"
    )
    result = compile_source(source)
    assert codes(result.diagnostics) == ["W1341"]
    (found,) = result.diagnostics
    worst = envelope(result.definitions[0]).cost.worst_events
    assert worst == 2 + 4 + (2 + 50 * 12) + 1 + 1
    assert found.message == (
        f"a run of `Batch` can record up to {worst} history events, more than its "
        "`max_history_events: 100`"
    )
    assert "step `each` alone can record up to 602 events" in found.notes
    assert found.span is not None and found.span.line == EACH_LINE


def test_strict_makes_the_warning_an_error() -> None:
    result = compile_source(workflow("limits { max_history_events: 100 }"), strict=True)
    assert not result.ok


@pytest.mark.parametrize(
    "limits",
    [
        "",  # no history limit: nothing to outgrow
        "limits { max_fan_out: 10 }",
        "limits { max_history_events: 100, max_fan_out: 10 }",  # 2+4+42+2 = 50
    ],
)
def test_nothing_is_said_within_the_limit(limits: str) -> None:
    result = compile_source(workflow(limits))
    assert result.diagnostics == []


def _policy(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "ops.toml"
    path.write_text('[policy]\nname = "ops"\n\n[[rule]]\ntype = "envelope"\n' + body)
    return path


def test_under_a_policy_the_servers_limits_make_it_an_error(tmp_path: Path) -> None:
    policy = load_policy(_policy(tmp_path, "max_history_events = 40\nmax_fan_out = 10\n"))
    result, _ = apply_policies(compile_source(workflow("")), [policy])
    assert codes(result.diagnostics) == ["E1341"]
    (found,) = result.diagnostics
    assert found.message == (
        "policy rule `envelope`: a run of `Batch` can record up to 50 history events, "
        "more than the policy's `max_history_events = 40`"
    )
    unbounded = load_policy(_policy(tmp_path, "max_history_events = 40\n"))
    result, _ = apply_policies(compile_source(workflow("")), [unbounded])
    assert codes(result.diagnostics) == ["E1340"]


def test_a_warning_policy_and_a_waiver(tmp_path: Path) -> None:
    policy = load_policy(_policy(tmp_path, 'max_history_events = 40\nseverity = "warning"\n'))
    result, _ = apply_policies(compile_source(workflow("")), [policy])
    assert codes(result.diagnostics) == ["W1340"]
    waived = workflow("").replace(
        "workflow Batch", "// policy-allow: envelope batches are small\nworkflow Batch"
    )
    result, _ = apply_policies(compile_source(waived), [policy])
    assert result.diagnostics == []


def test_the_policy_refuses_a_bad_limit(tmp_path: Path) -> None:
    from orbit_lang.policy import PolicyError

    with pytest.raises(PolicyError, match="max_history_events"):
        load_policy(_policy(tmp_path, "max_history_events = -1\n"))
