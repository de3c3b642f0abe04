"""Verify on save: `orbit verify` with a small budget, its violations as
diagnostics (docs/testing/verify.md, "In the editor").

Off unless the client turns it on (`orbit.verify.onSave`). When a document
holding `verify` blocks is saved, its blocks are explored with at most
`maxStates` distinct states and `timeBudgetMs` of wall-clock time each, on
a thread of their own so that the analyses of further edits never queue
behind a search. Each broken invariant becomes an error on its
`invariant` line (E0910; a built-in invariant, E0911, on the block's
`verify` keyword) naming the invariant and the history file its
counterexample was written to. A search cut short by the budget without
finding anything says so with an information-level note: the invariants
were not checked everywhere.

The search reads the saved files from disk (a save is what triggers it),
compiles them fully, as `orbit verify` does, and reports nothing when they
do not compile: the analysis already shows why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from lsprotocol import types as lsp

from orbit_cli.lsp.features import span_range
from orbit_cli.lsp.workspace import identity
from orbit_cli.verify.explore import Bounds, Violation, explore
from orbit_cli.verify.model import Model
from orbit_cli.verify.targets import Target

VIOLATED = "E0910"
BUILT_IN_VIOLATED = "E0911"
# Where counterexamples go, under the workspace root (or the file's folder),
# as `orbit verify`'s default `--out`.
OUT = Path(".orbit") / "verify"
_HAS_VERIFY = re.compile(r'^[ \t]*verify[ \t]+"', re.MULTILINE)


@attrs.frozen(slots=True)
class Settings:
    """The client's `orbit.verify.*` settings."""

    on_save: bool = False
    max_states: int = 5_000
    time_budget_ms: int = 2_000

    def bounds(self) -> Bounds:
        return Bounds(max_states=self.max_states, seconds=self.time_budget_ms / 1000)


def read_settings(options: Any, current: Settings = Settings()) -> Settings:
    """The settings in a client's initializationOptions or
    workspace/didChangeConfiguration settings: `{"orbit": {"verify": {...}}}`,
    or `{"verify": {...}}` without the section. What is missing or of the
    wrong type keeps its current value."""
    if isinstance(options, Mapping) and isinstance(options.get("orbit"), Mapping):
        options = options["orbit"]
    found = options.get("verify") if isinstance(options, Mapping) else None
    if not isinstance(found, Mapping):
        return current
    on_save = found.get("onSave", current.on_save)
    max_states = found.get("maxStates", current.max_states)
    budget = found.get("timeBudgetMs", current.time_budget_ms)
    return Settings(
        on_save if isinstance(on_save, bool) else current.on_save,
        max_states if _positive(max_states) else current.max_states,
        budget if _positive(budget) else current.time_budget_ms,
    )


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def wants(text: str) -> bool:
    """Whether a document may hold a verify block (a cheap look before a
    full compile)."""
    return _HAS_VERIFY.search(text) is not None


def verify_file(path: str, text: str, settings: Settings, root: str | None) -> list[lsp.Diagnostic]:
    """The diagnostics of the verify blocks of the saved file at `path`
    (`text` is its content, for the columns)."""
    from orbit_cli.verify.counterexample import slug, write_history
    from orbit_cli.verify.targets import targets
    from orbit_lang.testplan import plan_tests

    plan = plan_tests([path])
    if not plan.compiled.ok:
        return []
    own = identity(path)
    chosen = [t for t in targets(plan, [Path(path)], None) if identity(t.file) == own]
    if not plan.verifies:
        return []  # without verify blocks `targets` picks every workflow
    out = Path(root if root is not None else str(Path(path).parent)) / OUT
    found: list[lsp.Diagnostic] = []
    for target in chosen:
        result = explore(
            Model(target.definition, codes=target.codes()),
            target.value(),
            target.invariants,
            settings.bounds(),
        )
        for index, violation in enumerate(result.violations):
            stem = slug(target.name) + ("" if index == 0 else f".{index + 1}")
            try:
                written: Path | None = write_history(violation, out, stem)
            except OSError:
                written = None
            found.append(_violated(target, violation, written, text))
        if result.truncated and not result.violations:
            found.append(
                lsp.Diagnostic(
                    range=_line(target.line),
                    message=f'verify "{target.name}": no violation in {result.states} states, '
                    f"but the search on save stopped early ({result.truncated}); "
                    "run `orbit verify` for a complete search",
                    severity=lsp.DiagnosticSeverity.Information,
                    source="orbit",
                )
            )
    return found


def _violated(
    target: Target, violation: Violation, written: Path | None, text: str
) -> lsp.Diagnostic:
    user = violation.user
    lines = [
        f'verify "{target.name}": invariant violated: {violation.invariant}',
        violation.message,
    ]
    choices = violation.node.depth
    if written is None:
        lines.append(f"counterexample: {choices} choices (its history could not be written)")
    else:
        lines.append(f"counterexample ({choices} choices): {written}")
        lines.append(f"replay it: orbit replay --history {written} --definition {target.source}")
    return lsp.Diagnostic(
        range=span_range(user.span, text) if user is not None else _line(target.line),
        message="\n".join(line for line in lines if line),
        severity=lsp.DiagnosticSeverity.Error,
        code=VIOLATED if user is not None else BUILT_IN_VIOLATED,
        source="orbit",
    )


def _line(line: int) -> lsp.Range:
    """The start of a 1-based line (the client extends it to the word)."""
    at = lsp.Position(line=max(line - 1, 0), character=0)
    return lsp.Range(at, at)
