"""Parsing and compiling leave the process's state alone: no recursion
limit raised and restored, no collector paused, per call. Both are
process-wide, and the language server parses on a thread of its own, so
a restore could lower the limit under another thread that is deep in a
parse. A process raises the limit once, at start-up (orbit_lang.process)."""

from __future__ import annotations

import gc
import sys
import threading
from typing import Any

import pytest

from orbit_lang import compile_source
from orbit_lang.diagnostics import Severity
from orbit_lang.parser import parse_source
from orbit_lang.process import RECURSION_LIMIT, allow_deep_sources


def _deep(levels: int) -> str:
    value = "(" * levels + "1" + ")" * levels
    return f'workflow W {{\n  version "1.0.0"\n  step s {{ compute {{ v: {value} }} }}\n}}\n'


def test_parse_and_compile_touch_neither_the_recursion_limit_nor_the_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: Any) -> None:
        raise AssertionError("a process-wide setting changed during a parse or compile")

    monkeypatch.setattr(sys, "setrecursionlimit", refuse)
    monkeypatch.setattr(gc, "disable", refuse)
    monkeypatch.setattr(gc, "enable", refuse)
    module, diagnostics = parse_source(_deep(90), "deep.orbit")
    assert not [d for d in diagnostics if d.severity is Severity.ERROR], diagnostics
    assert module.declarations
    result = compile_source(_deep(90), "deep.orbit")
    assert not [d for d in result.diagnostics if d.severity is Severity.ERROR], result.diagnostics


def test_threads_parse_deep_sources_at_once() -> None:
    """The language server's case: parses on other threads while this one
    parses too; each keeps the limit raised once at start-up."""
    allow_deep_sources()
    errors: list[object] = []

    def run() -> None:
        for _ in range(3):
            _, diagnostics = parse_source(_deep(95), "deep.orbit")
            errors.extend(d for d in diagnostics if d.severity is Severity.ERROR)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    run()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sys.getrecursionlimit() >= RECURSION_LIMIT


def test_allow_deep_sources_never_lowers_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "getrecursionlimit", lambda: RECURSION_LIMIT * 2)
    monkeypatch.setattr(sys, "setrecursionlimit", lambda n: pytest.fail(f"set to {n}"))
    allow_deep_sources()
