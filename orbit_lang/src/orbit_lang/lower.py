"""Finishes checked workflows into IR definitions (chapters 19, 29).

Children come first, so a parent can pin each child by its hash
(`workflow:<Name>` contracts). Each definition gets the lowest IR version
that expresses it (RULINGS §7), its source map, then its hash.

A document nested deeper than the runtime accepts (RULINGS §22) is E0100 at
the workflow's name: the checker already refuses each expression too deep
to fit (docs/ir.md, "Depth"), so this catches the rest, deeply nested
inline record types.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from orbit_core import limits
from orbit_core.ir import (
    IR_V1,
    IR_V2,
    ChildContract,
    Definition,
    Migration,
    hash_document,
    needs_ir_v2,
    to_json,
)
from orbit_core.ir.definition import TaskContract
from orbit_lang import ast
from orbit_lang.check import CheckedWorkflow
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.sourcemap import source_map


def lower(
    workflows: list[CheckedWorkflow],
    tasks: Mapping[str, ast.Task],
    schemas: Mapping[str, ast.Schema],
    migrations: Mapping[str, tuple[Migration, ...]] | None = None,
) -> tuple[list[Definition], list[Diagnostic]]:
    """Definitions in the order given, which must be children first, and
    the errors of the documents the runtime would refuse (then no
    definitions: a parent pins its children)."""
    done: dict[str, Definition] = {}
    errors: list[Diagnostic] = []
    for checked in workflows:
        definition = checked.definition
        contracts: dict[str, TaskContract | ChildContract] = dict(definition.contracts)
        for name in checked.children:
            child = done[name]
            contracts[f"workflow:{name}"] = ChildContract(
                child.name, child.version, child.definition_hash, child.input, child.output
            )
        definition = attrs.evolve(definition, contracts=contracts, ir_version=IR_V1)
        if migrations and definition.name in migrations:  # only when declared
            definition = attrs.evolve(definition, migrations=migrations[definition.name])
        if needs_ir_v2(definition):
            definition = attrs.evolve(definition, ir_version=IR_V2)
        definition = attrs.evolve(
            definition, source_map=source_map(checked.node, definition, tasks, schemas)
        )
        document = to_json(definition)
        try:
            limits.check_json(document, int_min=limits.IR_INT_MIN, int_max=limits.IR_INT_MAX)
        except limits.JsonShapeError as error:
            errors.append(_too_deep(checked.node, error))
        definition = attrs.evolve(definition, definition_hash=hash_document(document))
        done[definition.name] = definition
    return ([] if errors else list(done.values())), errors


def _too_deep(node: ast.Workflow, error: limits.JsonShapeError) -> Diagnostic:
    return Diagnostic.error(
        "E0100",
        f"workflow `{node.name.name}` compiles to a definition nested too deeply",
        node.name.span,
        notes=[
            f"at {error.path}: {error.problem}, the most a runtime accepts; "
            "inline record types count three levels per level of nesting"
        ],
        help="nest fewer record types inside one another (a `JSON` field takes any depth)",
    )
