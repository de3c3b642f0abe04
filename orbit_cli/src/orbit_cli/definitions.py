"""Loading workflow definitions from the files a user names.

`.json` files are compiled IR, read with `orbit_core.ir.from_json` and their
`definition_hash` recomputed; anything else is ORBIT source compiled by
`orbit_lang.compile_paths`. The result is ordered children before parents,
the order the runtime needs to register them in.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from orbit_cli.output import CliError, colour_enabled, err, json_error, read_text
from orbit_core.ir import ChildContract, Definition, IRError, definition_hash, from_json


def load_definitions(
    paths: Sequence[Path], *, strict: bool = False, policies: Sequence[Any] = ()
) -> list[Definition]:
    """`policies` (`orbit_lang.policy.Policy`) are checked on the sources once they compile."""
    sources = [p for p in paths if p.suffix != ".json"]
    compiled = _compile(sources, strict, policies) if sources else []
    loaded = [load_ir_file(p) for p in paths if p.suffix == ".json"]
    return children_first([*compiled, *loaded])


def load_ir_file(path: Path) -> Definition:
    text = read_text(str(path))
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{path}: not valid JSON: {json_error(exc)}") from None
    try:
        defn = from_json(document)
    except IRError as exc:
        raise CliError(f"{path}: not a valid IR document: {exc}") from None
    if not defn.definition_hash:
        raise CliError(f"{path}: the IR has no definition_hash")
    if definition_hash(defn) != defn.definition_hash:
        raise CliError(
            f"{path}: definition_hash does not match the IR content (was the file modified?)"
        )
    return defn


def _compile(paths: Sequence[Path], strict: bool, policies: Sequence[Any]) -> list[Definition]:
    lang: Any = importlib.import_module("orbit_lang")
    compile_paths = getattr(lang, "compile_paths", None)
    if compile_paths is None:
        raise CliError(
            "this installation cannot compile .orbit files yet; pass compiled IR (.json) instead"
        )
    result = compile_paths(list(paths), strict=strict)
    if policies:
        from orbit_cli.sources import print_notices
        from orbit_lang.policy import apply_policies

        result, notices = apply_policies(result, policies)
        print_notices(notices)
    if result.diagnostics:
        err(lang.render_diagnostics(result.diagnostics, colour_enabled(sys.stderr)).rstrip("\n"))
    if not result.ok:
        errors, warnings = _count(result.diagnostics)
        policy_only = all(
            str(getattr(d, "code", "")).startswith("P")
            for d in result.diagnostics
            if getattr(d, "is_error", True)
        )
        what = "policy check" if policy_only else "compilation"
        raise CliError(f"{what} failed: {errors} error(s), {warnings} warning(s)")
    return list(result.definitions)


def _count(diagnostics: Iterable[Any]) -> tuple[int, int]:
    errors = warnings = 0
    for diagnostic in diagnostics:
        severity = getattr(diagnostic, "severity", "error")
        name = str(getattr(severity, "value", severity)).lower()
        if name.startswith("warn"):
            warnings += 1
        else:
            errors += 1
    return errors, warnings


def children_first(definitions: Sequence[Definition]) -> list[Definition]:
    """Orders definitions so that every child workflow comes before the parents that start it."""
    by_hash = {d.definition_hash: d for d in definitions}
    ordered: list[Definition] = []
    placed: set[str] = set()

    def place(defn: Definition, visiting: frozenset[str]) -> None:
        if defn.definition_hash in placed or defn.definition_hash in visiting:
            return
        for child in _child_hashes(defn):
            if child in by_hash:
                place(by_hash[child], visiting | {defn.definition_hash})
        placed.add(defn.definition_hash)
        ordered.append(defn)

    for defn in definitions:
        place(defn, frozenset())
    return ordered


def _child_hashes(defn: Definition) -> list[str]:
    return [c.definition_hash for c in defn.contracts.values() if isinstance(c, ChildContract)]


def select_workflow(
    definitions: Sequence[Definition], name: str | None, source: str, *, hint: str = ""
) -> Definition:
    """The workflow to run or show: the one named, else the single one no other starts."""
    if not definitions:
        raise CliError(f"{source} declares no workflow")
    if name is not None:
        for defn in definitions:
            if defn.name == name:
                return defn
        available = ", ".join(d.name for d in definitions)
        raise CliError(f"no workflow `{name}`; available: {available}")
    started = {h for d in definitions for h in _child_hashes(d)}
    roots = [d for d in definitions if d.definition_hash not in started]
    if len(roots) == 1:
        return roots[0]
    names = ", ".join(d.name for d in roots)
    raise CliError(f"{source} defines several unrelated workflows ({names}){hint}")
