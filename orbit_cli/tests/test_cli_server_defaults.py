"""`orbit server`'s defaults are written once (issue 37), in
`orbit_server.defaults`: the flags show them and `ServerConfig` starts from
them, so `--help` cannot promise one value while the server uses another."""

from __future__ import annotations

import ast
from pathlib import Path

import attrs
import click

from orbit_cli.commands import server as server_command
from orbit_server import defaults
from orbit_server.config import ServerConfig

SOURCE = Path(server_command.__file__)
# flag -> the ServerConfig field it fills
FIELDS = {
    "db": "db",
    "session_timeout": "session_timeout_s",
    "max_body": "max_body",
    "log_format": "log_format",
    "threads": "threads",
    "cluster_mode": "cluster_mode",
    "node_timeout": "node_timeout_s",
}


def _literal_defaults(source: str) -> list[str]:
    """`default=` values written as literals (not None, True or False)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg == "default":
            value = node.value
            literal = isinstance(value, ast.Constant | ast.BinOp | ast.UnaryOp)
            if literal and not (
                isinstance(value, ast.Constant) and value.value in (None, True, False)
            ):
                found.append(f"line {node.lineno}: default={ast.unparse(value)}")
    return found


def test_the_literal_check_finds_literals() -> None:
    found = _literal_defaults(
        "@click.option('--a', default=30.0)\n@click.option('--b', default=4 * 1024)\n"
        "@click.option('--c', default=None, is_flag=True)\n@click.option('--d', default=x.Y)\n"
        "def f(): pass\n"
    )
    assert len(found) == 2, found


def test_the_server_command_writes_no_default_of_its_own() -> None:
    assert _literal_defaults(SOURCE.read_text()) == []


def test_the_flags_show_the_defaults_the_server_starts_from() -> None:
    command = server_command.cli
    params = {p.name: p for p in command.params if isinstance(p, click.Option)}
    fields = attrs.fields_dict(ServerConfig)
    for flag, field in FIELDS.items():
        assert params[flag].default == fields[field].default, flag
    assert str(ServerConfig().addr) == params["addr"].default == defaults.ADDR
    assert ServerConfig().archive_location == defaults.ARCHIVE
    assert f"[default: {defaults.ARCHIVE}]" in (params["archive"].help or "")
    hours = ServerConfig().idempotency_retention_ms // 3_600_000
    assert f"[default: {hours}h]" in (params["idempotency_retention"].help or "")
