"""The compilation-wide namespaces (chapter 07): one each for schemas, tasks
and workflows, shared by every file of the compilation and the prelude.

A name declared twice is E0200, reported at the second declaration with a
label at the first, which stays the one in force. Schemas may not take the
name of a built-in type, and task names under `orbit.` belong to the
prelude.
"""

from __future__ import annotations

from typing import TypeVar

import attrs

from orbit_lang import ast
from orbit_lang.check.report import Reporter, first_declared
from orbit_lang.check.types import PRIMITIVE_TYPES
from orbit_lang.loader import Program
from orbit_lang.prelude import PRELUDE_PATH

BUILT_IN_TYPE_NAMES = frozenset(PRIMITIVE_TYPES) | {"List", "Map"}
RESERVED_TASK_PREFIX = "orbit."

# A declaration: its name has a span.
_D = TypeVar("_D", ast.Schema, ast.Task, ast.Workflow)


@attrs.define
class Declarations:
    schemas: dict[str, ast.Schema] = attrs.field(factory=dict)
    tasks: dict[str, ast.Task] = attrs.field(factory=dict)
    workflows: dict[str, ast.Workflow] = attrs.field(factory=dict)
    tests: list[ast.Test] = attrs.field(factory=list)
    verifies: list[ast.Verify] = attrs.field(factory=list)


def collect(program: Program, report: Reporter) -> Declarations:
    found = Declarations()
    for module in program.modules:
        in_prelude = module.path == PRELUDE_PATH
        for declaration in module.declarations:
            if isinstance(declaration, ast.Schema):
                _schema(found, declaration, report)
            elif isinstance(declaration, ast.Task):
                _task(found, declaration, report, in_prelude)
            elif isinstance(declaration, ast.Workflow):
                _declare(found.workflows, "workflow", declaration.name.name, declaration, report)
            elif isinstance(declaration, ast.Test):
                found.tests.append(declaration)
            elif isinstance(declaration, ast.Verify):
                found.verifies.append(declaration)
    return found


def _schema(found: Declarations, schema: ast.Schema, report: Reporter) -> None:
    name = schema.name.name
    if name in BUILT_IN_TYPE_NAMES:
        report.error(
            "E0200",
            f"schema `{name}` redefines the built-in type `{name}`",
            schema.name.span,
            help="give the schema another name",
        )
        return
    _declare(found.schemas, "schema", name, schema, report)


def _task(found: Declarations, task: ast.Task, report: Reporter, in_prelude: bool) -> None:
    name = task.name.value
    if name.startswith(RESERVED_TASK_PREFIX) and not in_prelude:
        report.error(
            "E0200",
            "task names starting with `orbit.` are reserved for built-in tasks",
            task.name.span,
            help="rename the task",
        )
        return
    _declare(found.tasks, "task", name, task, report)


def _declare(
    namespace: dict[str, _D], kind: str, name: str, declaration: _D, report: Reporter
) -> None:
    """Enters `declaration` under `name`, unless the name is taken: then E0200,
    and the first declaration stays."""
    first = namespace.get(name)
    if first is None:
        namespace[name] = declaration
        return
    report.error(
        "E0200",
        f"{kind} `{name}` is declared more than once",
        declaration.name.span,
        labels=[first_declared(first.name.span)],
        help="rename one of the declarations",
    )
