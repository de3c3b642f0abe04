"""docs/embedding.md's examples run as written."""

from __future__ import annotations

import contextlib
import gc
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "orbit_core" / "tests"))

from engine_kit import Str, inp, obj, rec, ref, step, task, workflow

from orbit_core import ir

DOC = Path(__file__).resolve().parents[2] / "docs" / "embedding.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def hello() -> ir.Definition:
    return workflow(
        "Hello",
        [step("compose", task="greeting.compose", with_=obj(name=inp("name")))],
        [task("greeting.compose", rec(name=Str), rec(message=Str))],
        input=rec(name=Str),
        output=rec(greeting=Str),
        result=obj(greeting=ref("compose", "message")),
    )


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: Any) -> Path:
    (tmp_path / "hello.orbit.json").write_text(json.dumps(ir.to_json(hello())))
    monkeypatch.chdir(tmp_path)
    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    yield tmp_path
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    sys.setswitchinterval(interval)


def test_the_program_example_runs(workdir: Path, capsys: Any) -> None:
    exec(compile(blocks()[0], "embedding.md", "exec"), {})
    assert capsys.readouterr().out.strip() == "COMPLETED {'greeting': 'Hello, Ada'}"
    assert (workdir / "orbit.db").exists()


def test_the_pytest_example_runs(workdir: Path) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(blocks()[1], "embedding.md", "exec"), namespace)
    fixture = namespace["engine"].__wrapped__()
    engine = next(fixture)
    namespace["test_hello"](engine)
    with contextlib.suppress(StopIteration):
        next(fixture)
