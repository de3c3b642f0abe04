"""`orbit run`'s follower when the runtime goes away mid-run: it says the
runtime was lost and keeps asking, and never tells the user to start
`orbit server` (the runtime answered the start, so one exists)."""

from __future__ import annotations

from typing import Any

import pytest

from orbit_cli.client import Unreachable, _unreachable
from orbit_cli.commands.run import follow

RUNNING = {"execution_id": "x-1", "status": "RUNNING", "units": []}
DONE = {"execution_id": "x-1", "status": "COMPLETED", "output": {}, "units": []}


class FlakyClient:
    """Answers the first read, is unreachable twice, then answers DONE."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any] | Unreachable] = [
            RUNNING,
            _unreachable("http://127.0.0.1:7233", ConnectionRefusedError()),
            _unreachable("http://127.0.0.1:7233", ConnectionRefusedError()),
            DONE,
        ]

    def get(self, route: str, **params: Any) -> Any:
        answer = self.answers.pop(0)
        if isinstance(answer, Unreachable):
            raise answer
        return answer


def test_a_lost_runtime_is_retried_not_reported_as_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pauses: list[float] = []
    state = follow(FlakyClient(), "x-1", sleep=pauses.append)  # type: ignore[arg-type]
    assert state["status"] == "COMPLETED"
    assert pauses == [0.2, 0.4]
    stderr = capsys.readouterr().err
    assert stderr.count("lost the ORBIT runtime while following") == 1
    assert "retrying until it is back" in stderr
    assert "reconnected to the ORBIT runtime" in stderr
    assert "orbit server" not in stderr
