"""The check benchmark's generated program stays valid and of the size asked."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from orbit_lang import compile_source

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_check.py"


def test_generated_program_compiles_cleanly_and_is_exactly_sized() -> None:
    spec = importlib.util.spec_from_file_location("bench_check", _PATH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.generate(600)
    assert text.count("\n") == 600
    result = compile_source(text, "bench.orbit")
    assert [d.message for d in result.diagnostics] == []
    assert {d.ir_version for d in result.definitions} == {"orbit-ir/1", "orbit-ir/2"}
