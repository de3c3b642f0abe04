"""Name resolution, type checking and static checks of a loaded program.

`check_program` runs every phase over the whole compilation and returns the
diagnostics and the checked workflows, children before parents. Its
`check` and `check_test` arguments stand in for `check_workflow` and
`tests.check_test`: `orbit_lang.checkcache` passes ones that answer from
memory for the workflows and tests an edit did not touch.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from orbit_lang import ast
from orbit_lang.check import callgraph, tests, verify
from orbit_lang.check.context import CheckedWorkflow, Compilation
from orbit_lang.check.contracts import check_contracts
from orbit_lang.check.declarations import collect
from orbit_lang.check.report import Reporter
from orbit_lang.check.typeexpr import TypeResolver
from orbit_lang.check.workflow import check_workflow
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.loader import Program

__all__ = [
    "CheckedProgram",
    "CheckedWorkflow",
    "Compilation",
    "TestCheck",
    "WorkflowCheck",
    "check_program",
]

# Checks one workflow, or one test, of a compilation, reporting into
# `compilation.report`.
WorkflowCheck = Callable[[Compilation, ast.Workflow], CheckedWorkflow]
TestCheck = Callable[[Compilation, ast.Test], None]


@attrs.frozen
class CheckedProgram:
    diagnostics: list[Diagnostic]
    # Every workflow, children before parents, then in load order.
    workflows: list[CheckedWorkflow]


def check_program(
    program: Program,
    check: WorkflowCheck = check_workflow,
    check_test: TestCheck = tests.check_test,
) -> CheckedProgram:
    report = Reporter()
    declarations = collect(program, report)
    types = TypeResolver(declarations, report)
    types.check_schemas()
    contracts = check_contracts(declarations, types, report)
    compilation = Compilation(report, declarations, types, contracts)
    order, _ = callgraph.order(declarations.workflows, report)
    for name in order:
        compilation.checked[name] = check(compilation, declarations.workflows[name])
    tests.check_tests(compilation, check_test)
    verify.check_verifies(compilation)
    workflows = [compilation.checked[name] for name in order]
    return CheckedProgram(report.diagnostics, workflows)
