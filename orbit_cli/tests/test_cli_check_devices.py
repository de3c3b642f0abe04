"""`orbit check` of a path that is not a regular file stops at once (E0206)."""

from __future__ import annotations

import os
import threading

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli
from orbit_lang.parser import SOURCE_FILES_NOTE


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_orbit_check_of_a_device_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    results: list[Result] = []
    thread = threading.Thread(
        target=lambda: results.append(CliRunner().invoke(cli, ["check", "/dev/zero"])),
        daemon=True,
    )
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "orbit check still reading /dev/zero after 10 s"
    result = results[0]
    assert result.exit_code == 1
    assert result.stderr == (
        "error[E0206]: cannot read `/dev/zero`: not a regular file (a character device)\n"
        f" = note: {SOURCE_FILES_NOTE}\n"
        "\n"
        "error: compilation failed: 1 error(s), 0 warning(s)\n"
    )
