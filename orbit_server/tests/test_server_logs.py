"""The two log formats."""

from __future__ import annotations

import json
import logging

import pytest

from orbit_server import logs


def test_text_lines_look_like_the_book(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("text")
    logs.logger().info(
        "starting ORBIT runtime", db="orbit.db", backend=logs.Quoted("sqlite"), auth=False
    )
    logs.logger().info("note", text="two words", empty="")
    err = capsys.readouterr().err.splitlines()
    assert err[0].endswith(
        ' INFO orbit: starting ORBIT runtime db=orbit.db backend="sqlite" auth=false'
    )
    assert err[0][:27].endswith("Z")
    assert err[1].endswith('INFO orbit: note text="two words" empty=""')


def test_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("json")
    logs.logger().warning("careful", n=3)
    record = json.loads(capsys.readouterr().err)
    assert record["level"] == "WARN"
    assert record["target"] == "orbit"
    assert record["fields"] == {"message": "careful", "n": 3}


def test_level_filter(capsys: pytest.CaptureFixture[str]) -> None:
    assert logs.level_from_env("warn,orbit=debug") == logging.WARNING
    assert logs.level_from_env("orbit_runtime=debug") == logging.INFO
    logs.configure("text", logs.level_from_env("error"))
    logs.logger().info("hidden")
    assert capsys.readouterr().err == ""
    assert not logs.enabled(logging.INFO)
    logs.configure("text")
