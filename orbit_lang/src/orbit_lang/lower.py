"""Finishes checked workflows into IR definitions (chapters 19, 29).

Children come first, so a parent can pin each child by its hash
(`workflow:<Name>` contracts). Each definition gets the lowest IR version
that expresses it (RULINGS §7), its hash, then its source map.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from orbit_core.ir import IR_V1, IR_V2, ChildContract, Definition, definition_hash, needs_ir_v2
from orbit_core.ir.definition import TaskContract
from orbit_lang import ast
from orbit_lang.check import CheckedWorkflow
from orbit_lang.sourcemap import source_map


def lower(
    workflows: list[CheckedWorkflow],
    tasks: Mapping[str, ast.Task],
    schemas: Mapping[str, ast.Schema],
) -> list[Definition]:
    """Definitions in the order given, which must be children first."""
    done: dict[str, Definition] = {}
    for checked in workflows:
        definition = checked.definition
        contracts: dict[str, TaskContract | ChildContract] = dict(definition.contracts)
        for name in checked.children:
            child = done[name]
            contracts[f"workflow:{name}"] = ChildContract(
                child.name, child.version, child.definition_hash, child.input, child.output
            )
        definition = attrs.evolve(definition, contracts=contracts, ir_version=IR_V1)
        if needs_ir_v2(definition):
            definition = attrs.evolve(definition, ir_version=IR_V2)
        definition = attrs.evolve(
            definition,
            definition_hash=definition_hash(definition),
            source_map=source_map(checked.node, definition, tasks, schemas),
        )
        done[definition.name] = definition
    return list(done.values())
