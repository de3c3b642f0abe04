"""What every checking phase shares, and what checking a workflow produces."""

from __future__ import annotations

import attrs

from orbit_core.ir import Definition
from orbit_lang import ast
from orbit_lang.check.contracts import Contract
from orbit_lang.check.declarations import Declarations
from orbit_lang.check.report import Reporter
from orbit_lang.check.typeexpr import TypeResolver


@attrs.frozen
class CheckedWorkflow:
    """A workflow that checked without errors of its own.

    `definition` is complete except for what lowering adds: the contracts of
    child workflows (pinned by hash), the IR version, the hash and the source
    map.
    """

    node: ast.Workflow
    definition: Definition
    children: tuple[str, ...]


@attrs.define
class Compilation:
    report: Reporter
    declarations: Declarations
    types: TypeResolver
    contracts: dict[str, Contract]
    # Workflows checked so far, children before parents.
    checked: dict[str, CheckedWorkflow] = attrs.field(factory=dict)
