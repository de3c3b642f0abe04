"""What `orbit verify` checks: the `verify` blocks of a compilation, or,
when the named files have none, every workflow they define (built-in
invariants only, generated input)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from orbit_cli.simulate import sample
from orbit_core.ir import Definition
from orbit_lang.testplan import Invariant, TestPlan


@attrs.frozen
class Target:
    name: str
    definition: Definition
    # The execution input; None when generated from the input type.
    input: Any
    invariants: tuple[Invariant, ...]
    file: str
    line: int
    # The source file defining the workflow (for `orbit replay --definition`).
    source: str

    def codes(self) -> list[str]:
        """The error codes the invariants name, in order."""
        return [
            str(e.value)
            for invariant in self.invariants
            for e in (invariant.expectation, *invariant.conditions)
            if e.kind == "error"
        ]

    def value(self) -> Any:
        return sample(self.definition.input) if self.input is None else self.input


def targets(plan: TestPlan, files: Sequence[Path], workflow: str | None) -> list[Target]:
    compiled = plan.compiled
    definitions = {d.name: d for d in compiled.definitions}
    sources = {w.definition.name: w.node.span.file for w in compiled.workflows}
    found = [
        Target(
            case.name,
            definitions[case.workflow],
            case.input,
            case.invariants,
            case.file,
            case.line,
            sources.get(case.workflow, case.file),
        )
        for case in plan.verifies
        if workflow is None or case.workflow == workflow
    ]
    if plan.verifies:
        return found
    named = {str(f) for f in files} | {str(f.resolve()) for f in files}
    for checked in compiled.workflows:
        name = checked.definition.name
        file = checked.node.span.file
        if workflow is not None and name != workflow:
            continue
        if workflow is None and file not in named and str(Path(file).resolve()) not in named:
            continue
        definition = definitions.get(name)
        if definition is None:
            continue
        found.append(Target(name, definition, None, (), file, checked.node.span.line, file))
    return found
