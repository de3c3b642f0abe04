"""Tokens nobody should run with (issue 11 #11).

`orbit server --token ""` (as `--token "$ORBIT_TOKEN"` gives with the
variable unset) used to start an open server, and a whitespace-only token a
server nobody could call. Both exit 1 before anything is opened; an empty
environment variable still counts as unset, as chapter 39 says. A token
shorter than 16 characters starts, with a logged warning.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from server_harness import ServerProcess

from orbit_cli.main import cli
from orbit_server.config import ServerConfig, startup_warnings

LONG = "0123456789abcdef0123"


def _server(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    clean = {"ORBIT_TOKEN": "", "ORBIT_WORKER_TOKEN": "", **(env or {})}
    result = CliRunner(env=clean).invoke(
        cli, ["server", "--db", str(tmp_path / "x.db"), "--addr", "127.0.0.1:0", *args]
    )
    assert not (tmp_path / "x.db").exists()
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--token", ""], {}, "--token is empty (set from an unset variable?)"),
        (["--token", "", "--addr", "0.0.0.0:7233"], {}, "--token is empty"),
        (["--token", " "], {}, "--token is only whitespace"),
        (["--token", "\t \n"], {}, "--token is only whitespace"),
        ([], {"ORBIT_TOKEN": "   "}, "--token is only whitespace"),
        (["--token", ""], {"ORBIT_TOKEN": LONG}, "--token is empty"),
        (["--token", LONG + "\n"], {}, "--token starts or ends with whitespace"),
        (["--token", " " + LONG], {}, "--token starts or ends with whitespace"),
        (["--token", LONG + "\u00e9"], {}, "--token must be printable ASCII"),
        (["--token", LONG + "\x00"], {}, "--token must be printable ASCII"),
        (["--token", LONG, "--worker-token", ""], {}, "--worker-token is empty"),
        (["--token", LONG, "--worker-token", "  "], {}, "--worker-token is only whitespace"),
        (["--token", LONG], {"ORBIT_WORKER_TOKEN": " \t"}, "--worker-token is only whitespace"),
        (["--worker-token", ""], {}, "--worker-token is empty"),
    ],
)
def test_unusable_tokens_are_refused_before_anything_starts(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    code, stderr = _server(tmp_path, *args, env=env)
    assert code == 1
    assert stderr.startswith(f"error: {message}"), stderr


def test_an_empty_environment_variable_is_still_unset(tmp_path: Path) -> None:
    # Chapter 39: ORBIT_TOKEN= counts as no token, so the loopback rule applies.
    code, stderr = _server(tmp_path, "--addr", "0.0.0.0:7233", env={"ORBIT_TOKEN": ""})
    assert code == 1
    assert stderr.startswith("error: refusing to listen on 0.0.0.0:7233 without authentication")


def test_short_tokens_start_with_a_warning(tmp_path: Path) -> None:
    # Tokens that occur in no other text: the log redacts every occurrence.
    with ServerProcess(tmp_path / "a.db", "--token", "Zq8xK2", "--worker-token", "Wv7j") as proc:
        assert proc.http("Zq8xK2").get("/v1/executions").status == 200
        log = proc.log()
    assert (
        "WARN orbit: the admin token (--token) is shorter than 16 characters and may be "
        "guessed; use a long random value (`orbit token` prints one)"
    ) in log
    assert "WARN orbit: the shared worker token (--worker-token) is shorter than 16" in log


def test_long_tokens_start_without_a_warning() -> None:
    assert startup_warnings(ServerConfig(token=LONG, worker_token=LONG[::-1])) == []
    assert startup_warnings(ServerConfig()) == []
