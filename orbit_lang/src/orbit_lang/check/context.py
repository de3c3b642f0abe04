"""What every checking phase shares, and what checking a workflow produces."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from orbit_core.ir import Definition
from orbit_lang import ast
from orbit_lang.check.contracts import Contract
from orbit_lang.check.declarations import Declarations
from orbit_lang.check.report import Reporter
from orbit_lang.check.typeexpr import TypeResolver
from orbit_lang.check.types import Type


@attrs.frozen
class CheckedWorkflow:
    """What checking a workflow produced (also after errors, so that parents
    and tests can still be checked against it).

    `definition` is complete except for what lowering adds: the contracts of
    child workflows (pinned by hash), the IR version, the hash and the source
    map. `step_types` gives each step's output type as a finished execution
    shows it, keyed as tests name steps (`charge`, `on_failure:alert`,
    `on_event:location:tell`).
    """

    node: ast.Workflow
    definition: Definition
    children: tuple[str, ...]
    step_types: Mapping[str, Type]


@attrs.define
class Compilation:
    report: Reporter
    declarations: Declarations
    types: TypeResolver
    contracts: dict[str, Contract]
    # Workflows checked so far, children before parents.
    checked: dict[str, CheckedWorkflow] = attrs.field(factory=dict)
