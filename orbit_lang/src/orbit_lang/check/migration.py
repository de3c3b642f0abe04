"""Checks `migrate from` blocks (docs/language/migration.md) against both
definitions and builds their IR (`orbit_core.ir.Migration`).

A block names the old version and the file that defines it; that file is
compiled on its own (through `Compile`, given by the compiler, so this
module needs no compiler of its own) and the block is checked against the
old workflow's definition and step types and the new one's:

- every old step has a counterpart: the same name, a `rename`, or a
  `remove` (E1206), which is a warning too (W1200: an execution that has
  started it cannot move);
- a step and its counterpart are of the same kind (E1205) and the old
  output fits where the new one is read (E1204);
- every old signal is declared by the new version with a payload the old
  one fits (E1209, E1210): the old version may have buffered it;
- every required input field of the new version gets a value (E1207):
  from `input { ... }` (each expression typed over the OLD execution: its
  input and its steps, each of which may not have run and so reads as
  optional), else the old input's field of the same name, else a default.

`reverse { ... }` is checked the same way with the two sides swapped.
Codes E1200-E1249 and W1200-W1249 belong to this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import attrs

from orbit_core.ir import Definition, Migration, MigrationMap
from orbit_core.ir import expr as e
from orbit_lang import ast
from orbit_lang.check.context import CheckedWorkflow
from orbit_lang.check.env import Env
from orbit_lang.check.expressions import ExprChecker
from orbit_lang.check.report import Reporter, did_you_mean
from orbit_lang.check.types import EMPTY_RECORD, Type, assignable, optional, render, required
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.source import Span


class OldProgram(Protocol):
    """What compiling the old version's file gave (a `CompileResult`)."""

    @property
    def ok(self) -> bool: ...

    @property
    def definitions(self) -> list[Definition]: ...

    @property
    def workflows(self) -> list[CheckedWorkflow]: ...


# Compiles the file at a path (the compiler's `compile_paths`, one file).
Compile = Callable[[Path], OldProgram]

# Files being compiled for a migration check, so that two versions naming
# each other do not compile each other for ever.
_OPEN: set[Path] = set()


@attrs.frozen
class _Side:
    checked: CheckedWorkflow
    definition: Definition  # lowered: with its hash

    @property
    def version(self) -> str:
        return self.definition.version


def check_migrations(
    workflows: Sequence[CheckedWorkflow], compile_file: Compile
) -> tuple[list[Diagnostic], dict[str, tuple[Migration, ...]]]:
    """The diagnostics of every `migrate` block, and the IR of each
    workflow's blocks (by workflow name) when they are all clean."""
    report = Reporter()
    found: dict[str, tuple[Migration, ...]] = {}
    for workflow in workflows:
        blocks = [m for m in workflow.node.members if isinstance(m, ast.Migrate)]
        if not blocks:
            continue
        errors = report.error_count
        built: list[Migration] = []
        seen: dict[str, Span] = {}
        for block in blocks:
            migration = _check_block(report, workflow, block, seen, compile_file)
            if migration is not None:
                built.append(migration)
        if report.error_count == errors:
            found[workflow.definition.name] = tuple(built)
    return report.diagnostics, found


def _check_block(
    report: Reporter,
    new: CheckedWorkflow,
    block: ast.Migrate,
    seen: dict[str, Span],
    compile_file: Compile,
) -> Migration | None:
    version = block.version.value
    if version == new.definition.version:
        report.error(
            "E1213",
            f"`{new.definition.name}` cannot migrate from its own version {version}",
            block.version.span,
            help="name the version live executions run now",
        )
        return None
    first = seen.get(version)
    if first is not None:
        report.error(
            "E1212",
            f'duplicate `migrate from "{version}"`',
            block.version.span,
            help="keep one block per old version",
        )
        return None
    seen[version] = block.version.span
    old = _old_side(report, new, block, compile_file)
    if old is None:
        return None
    new_side = _Side(new, new.definition)
    forward = _check_map(report, (old, new_side), block.items, block.keyword, "")
    reverse: MigrationMap | None = None
    for back in block.reverse[:1]:
        reverse = _check_map(report, (new_side, old), back.items, back.keyword, "in `reverse`: ")
    for extra in block.reverse[1:]:
        report.error("E1212", "duplicate `reverse`", extra.keyword, help="keep one `reverse`")
    if forward is None:
        return None
    return Migration(version, old.definition.definition_hash, forward, reverse)


def _old_side(
    report: Reporter, new: CheckedWorkflow, block: ast.Migrate, compile_file: Compile
) -> _Side | None:
    path = (Path(block.source.span.file).parent / block.source.value).resolve()
    name = new.definition.name
    if not path.is_file():
        report.error(
            "E1200",
            f"cannot read the old version's source `{block.source.value}`",
            block.source.span,
            help="name the file that defines the old version, relative to this one",
        )
        return None
    if path in _OPEN:
        program = None
    else:
        _OPEN.add(path)
        try:
            program = compile_file(path)
        finally:
            _OPEN.discard(path)
    if program is None or not program.ok:
        report.error(
            "E1200",
            f"the old version's source `{block.source.value}` does not compile",
            block.source.span,
            help=f"run `orbit check {block.source.value}`",
        )
        return None
    for checked in program.workflows:
        d = checked.definition
        if d.name == name and d.version == block.version.value:
            lowered = next(x for x in program.definitions if x.name == name)
            return _Side(checked, lowered)
    versions = [c.definition.version for c in program.workflows if c.definition.name == name]
    where = f"defines {name}@{versions[0]}" if versions else f"does not define `{name}`"
    report.error(
        "E1201",
        f"`{block.source.value}` {where}, not {name}@{block.version.value}",
        block.version.span,
    )
    return None


@attrs.frozen
class _Pair:
    """One direction being checked: from `old` to `new`; `keyword` is where
    a problem without a place of its own is reported, `context` prefixes
    the messages of a `reverse` block."""

    report: Reporter
    old: _Side
    new: _Side
    keyword: Span
    context: str


def _check_map(
    report: Reporter,
    sides: tuple[_Side, _Side],
    items: Sequence[ast.MigrateItem],
    keyword: Span,
    context: str,
) -> MigrationMap | None:
    p = _Pair(report, sides[0], sides[1], keyword, context)
    errors = report.error_count
    renamed, removed, spans, values = _read_items(p, items)
    targets: dict[str, str] = {}
    new_steps = {s.name for s in p.new.definition.steps}
    for step in p.old.checked.definition.steps:
        name = step.name
        if name in removed:
            continue
        target = renamed.get(name, name)
        span = spans.get(name, keyword)
        if target not in new_steps:
            report.error(
                "E1206",
                f"{context}step `{name}` of {p.old.version} has no counterpart in {p.new.version}",
                span,
                help=f"`rename {name} to <step>` or `remove {name}`",
            )
            continue
        other = targets.get(target)
        if other is not None:
            report.error(
                "E1211",
                f"{context}steps `{other}` and `{name}` of {p.old.version} both map to `{target}`",
                span,
            )
            continue
        targets[target] = name
        _check_step(p, name, target, span)
    _check_signals(p)
    built = _check_input(p, values)
    if report.error_count != errors:
        return None
    return MigrationMap({k: v for k, v in renamed.items() if k != v}, tuple(removed), built)


def _read_items(
    p: _Pair, items: Sequence[ast.MigrateItem]
) -> tuple[dict[str, str], list[str], dict[str, Span], ast.MigrateInput | None]:
    """The renames, the removals, where each old step is named, and `input`."""
    report, context = p.report, p.context
    old_steps = {s.name for s in p.old.checked.definition.steps}
    new_steps = {s.name for s in p.new.checked.definition.steps}
    renamed: dict[str, str] = {}
    removed: list[str] = []
    spans: dict[str, Span] = {}
    values: ast.MigrateInput | None = None

    def known_old(ident: ast.Identifier) -> bool:
        if ident.name not in old_steps:
            report.error(
                "E1202",
                f"{context}{p.old.version} has no step `{ident.name}`",
                ident.span,
                help=did_you_mean(ident.name, old_steps),
            )
            return False
        if ident.name in spans:
            report.error(
                "E1211",
                f"{context}step `{ident.name}` of {p.old.version} is mapped twice",
                ident.span,
                help="rename or remove each old step once",
            )
            return False
        spans[ident.name] = ident.span
        return True

    for item in items:
        if isinstance(item, ast.MigrateRename):
            if not known_old(item.old):
                continue
            if item.new.name not in new_steps:
                report.error(
                    "E1203",
                    f"{context}{p.new.version} has no step `{item.new.name}`",
                    item.new.span,
                    help=did_you_mean(item.new.name, new_steps),
                )
                continue
            renamed[item.old.name] = item.new.name
        elif isinstance(item, ast.MigrateRemove):
            if known_old(item.step):
                removed.append(item.step.name)
                report.warning(
                    "W1200",
                    f"{context}step `{item.step.name}` of {p.old.version} may already have "
                    "run; executions that started it cannot migrate",
                    item.step.span,
                    help="`orbit migrate plan` lists them",
                )
        elif values is not None:
            report.error("E1212", f"{context}duplicate `input`", item.keyword)
        else:
            values = item
    return renamed, removed, spans, values


def _check_step(p: _Pair, name: str, target: str, span: Span) -> None:
    old, new, context = p.old, p.new, p.context
    old_step = old.checked.definition.step(name)
    new_step = new.checked.definition.step(target)
    assert old_step is not None and new_step is not None
    if old_step.kind != new_step.kind:
        p.report.error(
            "E1205",
            f"{context}step `{name}` is {_a(old_step.kind)} step in {old.version} "
            f"but `{target}` is {_a(new_step.kind)} step in {new.version}",
            span,
            help="map it to a step of the same kind, or remove it",
        )
        return
    before = old.checked.step_types.get(name)
    after = new.checked.step_types.get(target)
    if before is None or after is None:
        return
    problem = assignable(before, after)
    if problem is not None:
        p.report.error(
            "E1204",
            f"{context}step `{name}` outputs `{render(before)}` in {old.version}; "
            f"`{target}` is read as `{render(after)}` in {new.version}",
            span,
            notes=[problem.detail()],
            help="map it to a step with a compatible output, or remove it",
        )


def _check_signals(p: _Pair) -> None:
    old, new, context = p.old.definition, p.new.definition, p.context
    for signal in old.signals:
        declared = new.signal(signal.name)
        if declared is None:
            p.report.error(
                "E1209",
                f"{context}signal `{signal.name}` of {old.version} is not declared by "
                f"{new.version}; a live execution may have it buffered",
                p.keyword,
                help=f"declare `signal {signal.name}` in {new.version}",
            )
            continue
        problem = assignable(signal.payload, declared.payload)
        if problem is not None:
            p.report.error(
                "E1210",
                f"{context}signal `{signal.name}` carries `{render(signal.payload)}` in "
                f"{old.version} but `{render(declared.payload)}` in {new.version}",
                p.keyword,
                notes=[problem.detail()],
            )


def _check_input(p: _Pair, values: ast.MigrateInput | None) -> dict[str, e.Expr]:
    old, new, context, report = p.old, p.new, p.context, p.report
    old_d, new_d = old.checked.definition, new.checked.definition
    given: Mapping[str, ast.ObjectEntry] = (
        {entry.key: entry for entry in values.value.entries} if values is not None else {}
    )
    built: dict[str, e.Expr] = {}
    checker = ExprChecker(report, _old_env(old.checked))
    for key, entry in given.items():
        field = new_d.input.field(key)
        if field is None:
            report.error(
                "E1208",
                f"{context}the input of {new.version} has no field `{key}`",
                entry.key_span,
                help=did_you_mean(key, [f.name for f in new_d.input.fields]),
            )
            continue
        built[key] = checker.check(entry.value, field.type).ir
    where = values.keyword if values is not None else p.keyword
    for field in new_d.input.fields:
        if field.name in given:
            continue
        before = old_d.input.field(field.name)
        if before is not None:
            problem = assignable(before.type, field.type)
            if problem is not None:
                report.error(
                    "E1207",
                    f"{context}input field `{field.name}` is `{render(before.type)}` in "
                    f"{old.version} but `{render(field.type)}` in {new.version}",
                    where,
                    notes=[problem.detail()],
                    help=f"give `{field.name}` a value in `input {{ ... }}`",
                )
        elif required(field):
            report.error(
                "E1207",
                f"{context}input field `{field.name}` of {new.version} is required and has "
                "no value",
                where,
                help=f"give it one: `input {{ {field.name}: <expression> }}`",
            )
    return built


def _old_env(old: CheckedWorkflow) -> Env:
    """What a migration expression reads: the old execution's input and
    steps (each may not have run yet, so optional)."""
    names = [s.name for s in old.definition.steps]
    steps: dict[str, Type] = {
        name: optional(old.step_types.get(name, EMPTY_RECORD)) for name in names
    }
    return Env(input=old.definition.input, steps=steps, step_names=frozenset(names))


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"
