"""What `worker.OrbitWorker` relies on in gunicorn beyond its documented API.

A custom worker class is documented (`worker_class`), but the short path and
the fair sharing of threads override and call members of gunicorn's `gthread`
worker that are not: `enqueue_req`, `handle`, `finish_request`,
`murder_keepalived`, the `poller`, `nr_conns` and `pending_conns` counters and
the module's `_DEFER` answer for a connection that sent nothing yet.
orbit_server's pyproject pins gunicorn to the versions checked here: to let
a newer one in, run these tests and tests/test_server_keepalive.py and
tests/test_server_config.py with it, then update VERIFIED.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

from gunicorn.workers import gthread

VERIFIED = "27.0.1"
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_installed_gunicorn_is_the_version_checked() -> None:
    installed = importlib.metadata.version("gunicorn")
    assert installed == VERIFIED, (
        f"gunicorn {installed} is installed, OrbitWorker was checked with {VERIFIED}: "
        "see this module's docstring"
    )
    pins = re.findall(r'"gunicorn([<>=][^"]*)"', PYPROJECT.read_text(encoding="utf-8"))
    assert pins == [f">=27.0,<={VERIFIED}"], pins


def test_the_gthread_members_the_worker_uses_exist() -> None:
    for name in ("enqueue_req", "handle", "finish_request", "murder_keepalived", "init_process"):
        assert callable(getattr(gthread.ThreadWorker, name, None)), name
    assert hasattr(gthread, "_DEFER")
