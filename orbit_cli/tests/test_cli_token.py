"""`orbit token`: a token on stdout, its workers-file entry on stderr (chapter 45)."""

from __future__ import annotations

import hashlib
import re
import tomllib

import pytest
from click.testing import CliRunner
from conftest import Golden

from orbit_cli.commands import token
from orbit_cli.main import cli

BOOK_WORKER_TOKEN = "8a7df28ad62d4237a229d884ee8f8d659f3406f060554af19f10cd96c731b2c4"
BOOK_CLIENT_TOKEN = "c47e25df244d4b9c80df65eb6e3d457f43f565e91ae544599834c47de7301932"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["token", *args])
    return result.exit_code, result.stdout, result.stderr


def test_a_token_is_64_hex_characters_and_the_entry_holds_its_hash() -> None:
    code, stdout, stderr = _run()
    assert code == 0
    value = stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", value)
    entry = tomllib.loads(stderr)["worker"][0]
    assert entry == {
        "id": "my-worker",
        "token_sha256": hashlib.sha256(value.encode()).hexdigest(),
        "tasks": ["*"],
    }
    assert _run()[1] != stdout


def test_redirected_stderr_is_a_valid_workers_file() -> None:
    _, _, first = _run("--worker", "a")
    _, _, second = _run("--client", "app", "--action", "cancel", "--action", "read")
    parsed = tomllib.loads(first + second)
    assert parsed["worker"][0]["id"] == "a"
    assert parsed["client"][0] == {
        "id": "app",
        "token_sha256": parsed["client"][0]["token_sha256"],
        "workflows": ["*"],
        "actions": ["cancel", "read"],
    }
    defaults = tomllib.loads(_run("--client", "app")[2])["client"][0]
    assert defaults["actions"] == ["start", "signal", "query", "read"]


@pytest.mark.parametrize(
    ("args", "secret", "name"),
    [
        (
            ["--worker", "payments-1", "--task", "payments.*", "--task", "audit.log"],
            BOOK_WORKER_TOKEN,
            "token_worker",
        ),
        (
            [
                "--client",
                "billing",
                "--workflow",
                "Order*",
                "--action",
                "start",
                "--action",
                "read",
            ],
            BOOK_CLIENT_TOKEN,
            "token_client",
        ),
    ],
)
def test_on_a_terminal_the_book_transcript(
    monkeypatch: pytest.MonkeyPatch, golden: Golden, args: list[str], secret: str, name: str
) -> None:
    monkeypatch.setattr(token, "new_token", lambda: secret)
    monkeypatch.setattr(token, "stderr_is_terminal", lambda: True)
    result = CliRunner().invoke(cli, ["token", *args])
    assert result.exit_code == 0
    golden(name, result.output)


def test_option_conflicts_and_unknown_actions() -> None:
    assert _run("--client", "a", "--worker", "b")[0] == 2
    assert _run("--client", "a", "--task", "x")[0] == 2
    assert _run("--workflow", "X")[0] == 2
    code, stdout, stderr = _run("--client", "a", "--action", "deploy")
    assert (code, stdout) == (1, "")
    assert stderr == (
        "error: unknown action `deploy` (allowed: start, signal, query, read, cancel, schedule)\n"
    )
