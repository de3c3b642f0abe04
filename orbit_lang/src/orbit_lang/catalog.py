"""The task contracts a compilation declares, as typed values, for tools that
document them (`orbit docs`, `orbit schema`).

A compiled `Definition` carries only the contracts its workflow calls; the
contracts page and the schema export also list contracts no workflow uses.
`declared_contracts(program)` resolves every task declared in the loaded
files (the prelude's built-in tasks are left out: tools add those a
workflow uses from its definition) to the same `TaskContract` the compiler
pins into definitions, with its position, doc comment, description and the
positions and doc comments of its record fields (the `sourcemap` layout).
Its diagnostics are dropped: the caller compiles the program first and
reports those.
"""

from __future__ import annotations

from typing import Any

import attrs

from orbit_core.ir import TaskContract
from orbit_lang import ast
from orbit_lang.check.contracts import check_contracts
from orbit_lang.check.declarations import collect
from orbit_lang.check.report import Reporter
from orbit_lang.check.typeexpr import TypeResolver
from orbit_lang.loader import Program
from orbit_lang.prelude import PRELUDE_PATH
from orbit_lang.sourcemap import _fields


@attrs.frozen
class DeclaredContract:
    contract: TaskContract
    file: str
    line: int
    doc: str | None
    description: str | None
    # {"input": {field: position}, "output": {...}} for record types.
    fields: dict[str, Any]


def declared_contracts(program: Program) -> list[DeclaredContract]:
    """Every task declared outside the prelude, in load order."""
    report = Reporter()
    declarations = collect(program, report)
    types = TypeResolver(declarations, report)
    contracts = check_contracts(declarations, types, report)
    found: list[DeclaredContract] = []
    for module in program.modules:
        if module.path == PRELUDE_PATH:
            continue
        for declaration in module.declarations:
            if not isinstance(declaration, ast.Task):
                continue
            checked = contracts.get(declaration.name.value)
            if checked is None or checked.node is not declaration:
                continue
            found.append(_declared(declaration, checked.ir))
    return found


def _declared(task: ast.Task, contract: TaskContract) -> DeclaredContract:
    description = None
    fields: dict[str, Any] = {}
    for member in task.members:
        if isinstance(member, ast.Description) and description is None:
            description = member.value.value
        elif isinstance(member, ast.TaskInput | ast.TaskOutput):
            which = "input" if isinstance(member, ast.TaskInput) else "output"
            if isinstance(member.type, ast.RecordType):
                fields.setdefault(which, _fields(member.type))
    span = task.name.span
    return DeclaredContract(contract, span.file, span.line, task.doc, description, fields)
