"""The parse benchmark's generated program stays valid and of the size asked."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from orbit_lang.parser import parse_source

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_parse.py"


def test_generated_program_is_valid_and_exactly_sized() -> None:
    spec = importlib.util.spec_from_file_location("bench_parse", _PATH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.generate(1000)
    assert text.count("\n") == 1000
    _, diagnostics = parse_source(text, "bench.orbit")
    assert diagnostics == []
