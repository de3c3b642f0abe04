"""Docs that run: every fenced code block of README.md and of every Markdown
page under docs/ (pages added later included) is executed, so an example
that stops working fails the build.

Each page is one test. Its blocks run in order, in one temporary directory
that starts as a copy of `examples/` (so `hello.orbit` is at hand), with the
test environment's `bin` first on the PATH (`orbit` and `python` are this
checkout's). What running means, by the fence's language:

- `python`: run as a script; a block that defines `test_` functions is run
  by pytest instead.
- `sh`, `bash`, `shell`: run by `bash -euo pipefail`.
- `json`: parsed.  `toml`: parsed.
- `orbit`: checked by `orbit check` (a complete file, imports resolved
  against `examples/`).
- no language, or `text`: prose shown as code (a shape, an output); not run.

The directory also has a `node_modules` with the checkout's TypeScript SDK
as `orbit-lang` and its `tsx`, as `npm install orbit-lang tsx` would leave
them, so a script can run a TypeScript worker with `node --import tsx`.

Any other language, and any block not meant to run (a shell session that
needs a running server, a fragment of a file, a long script), is marked on
the line before its fence:

    <!-- docs-test: skip <why> -->

A block of another language without the marker fails the test, so a new
page cannot slip an unchecked example in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import attrs
import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TS_SDK = REPO / "sdks" / "typescript"
SKIP = re.compile(r"^<!--\s*docs-test:\s*skip\b(.*?)-->\s*$")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)[^`]*$")
PROSE = frozenset({"", "text"})
TIMEOUT_S = 120

pytestmark = pytest.mark.timeout(600)


@attrs.frozen
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    skip: str | None  # the reason, when marked

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, with their skip markers."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence = opening["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j])
            j += 1
        marker = SKIP.match(lines[i - 1].strip()) if i > 0 else None
        skip = (marker[1].strip() or "marked") if marker else None
        found.append(Block(page, i + 1, opening["lang"].lower(), "\n".join(body) + "\n", skip))
        i = j + 1
    return found


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def test_the_collector_reads_fences_and_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n```python\nprint(1)\n```\n<!-- docs-test: skip needs a server -->\n"
        "```sh\norbit ps\n```\n| a | ``` inline ``` |\n```\nshape\n```\n",
        encoding="utf-8",
    )
    found = [(b.line, b.lang, b.code, b.skip) for b in blocks_of(page)]
    assert found == [
        (2, "python", "print(1)\n", None),
        (6, "sh", "orbit ps\n", "needs a server"),
        (10, "", "shape\n", None),
    ]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_code_block_runs(page: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(REPO / "examples", work)
    _node_modules(work)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    for number, block in enumerate(blocks_of(page)):
        if block.skip is not None or block.lang in PROSE:
            continue
        _run(block, number, work, env)


def _node_modules(work: Path) -> None:
    """`orbit-lang` and `tsx` where `npm install orbit-lang tsx` would put
    them, from the checkout's TypeScript SDK (built by `npm ci` there, which
    the `repo` nox session runs), for the TypeScript pages' scripts."""
    modules = work / "node_modules"
    modules.mkdir()
    (modules / "orbit-lang").symlink_to(TS_SDK, target_is_directory=True)
    (modules / "tsx").symlink_to(TS_SDK / "node_modules" / "tsx", target_is_directory=True)


def _run(block: Block, number: int, work: Path, env: dict[str, str]) -> None:
    if block.lang == "json":
        _parsed(block, json.loads)
    elif block.lang == "toml":
        _parsed(block, tomllib.loads)
    elif block.lang == "python":
        script = work / f"test_docs_block_{number}.py"
        script.write_text(block.code, encoding="utf-8")
        if re.search(r"^def test_", block.code, re.M):
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            command += ["-W", "error", str(script)]
        else:
            command = [sys.executable, str(script)]
        _process(block, command, work, env)
    elif block.lang in ("sh", "bash", "shell"):
        _process(block, ["bash", "-euo", "pipefail", "-c", block.code], work, env)
    elif block.lang == "orbit":
        source = work / f"docs_block_{number}.orbit"
        source.write_text(block.code, encoding="utf-8")
        _process(block, [str(BIN / "orbit"), "check", source.name], work, env)
    else:
        pytest.fail(
            f"{block.where}: a `{block.lang}` block cannot be run; mark it with "
            "`<!-- docs-test: skip <why> -->` on the line before the fence"
        )


def _parsed(block: Block, parse: object) -> None:
    try:
        parse(block.code)  # type: ignore[operator]
    except ValueError as exc:
        pytest.fail(f"{block.where}: the `{block.lang}` block does not parse: {exc}")


def _process(block: Block, command: list[str], work: Path, env: dict[str, str]) -> None:
    result = subprocess.run(
        command,
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"{block.where}: the `{block.lang}` block failed (exit {result.returncode})\n"
            f"--- stdout\n{result.stdout}--- stderr\n{result.stderr}",
            pytrace=False,
        )
