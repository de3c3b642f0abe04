"""Fixtures for the CLI tests: a fake runtime, a runner, and golden files.

Golden files in `golden/` hold what the book prints for the same command.
They are compared after `mask()`, which hides what legitimately differs from
one run to the next: definition hashes here (our IR hashes differ from the
book's Rust ones), and with `volatile=True` also execution ids, timestamps
and durations, for comparing a real server's output with the same files.
`pytest --update-golden` rewrites them from the current output; review the
diff before committing.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_fake_runtime import FakeRuntime
from click.testing import CliRunner, Result

from orbit_cli.main import cli
from orbit_lang.process import allow_deep_sources


@pytest.fixture(autouse=True)
def _deep_sources() -> Iterator[None]:
    """The recursion limit `orbit` raises at start-up (orbit_lang.process),
    put back after the test for the other packages' tests."""
    limit = sys.getrecursionlimit()
    allow_deep_sources()
    yield
    sys.setrecursionlimit(limit)


GOLDEN = Path(__file__).parent / "golden"

_HASH = re.compile(r"sha256:[0-9a-f]{12,64}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DURATION = re.compile(r" *\b\d+(?:\.\d+)?(?:ms|s)\b| *\b\d+m\d\ds\b| *\b\d+h\d\dm\b")
_EPOCH_MS = re.compile(r"\b1[78]\d{11}\b")


def mask(text: str, *, volatile: bool = False) -> str:
    # The book's transcripts lost their trailing blanks; ours keep the padding.
    text = "\n".join(line.rstrip() for line in text.splitlines()).rstrip("\n")
    text = _HASH.sub("sha256:<hash>", text)
    if volatile:
        text = _UUID.sub("<id>", text)
        text = _EPOCH_MS.sub("<ms>", text)
        text = _DURATION.sub(" <duration>", text)
    return text


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite the CLI golden files")


# Compares a command's output with a golden file (the `golden` fixture).
Golden = Callable[[str, str], None]


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    update = request.config.getoption("--update-golden")

    def check(name: str, actual: str) -> None:
        path = GOLDEN / f"{name}.txt"
        if update:
            path.write_text(actual, encoding="utf-8")
        assert path.exists(), f"missing golden file {path.name}; run with --update-golden"
        assert mask(actual) == mask(path.read_text(encoding="utf-8"))

    return check


@pytest.fixture
def fake() -> Iterator[FakeRuntime]:
    with FakeRuntime() as runtime:
        yield runtime


class Orbit:
    """Runs `orbit ...` in-process against a server URL."""

    def __init__(self, server: str) -> None:
        self.server = server

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> Result:
        environment = {"ORBIT_SERVER": self.server, "ORBIT_TOKEN": "", "NO_COLOR": "1"}
        environment.update(env or {})
        return CliRunner(env=environment).invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def orbit(fake: FakeRuntime) -> Orbit:
    return Orbit(fake.url)
