"""Test declarations (chapter 51): type-checked with the program, never lowered."""

from __future__ import annotations

from orbit_lang.check.context import Compilation


def check_tests(c: Compilation) -> None:
    del c
