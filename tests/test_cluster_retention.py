"""Retention on several servers (docs/retention.md, "Several servers"), on a
real PostgreSQL.

Standby mode: only the leader sweeps, into an archive directory every
server shares, and any server reads it; the leader SIGKILLed mid-sweep
loses nothing, and the new leader finishes the sweep. Shared mode: the
sweep lock goes to one session at a time, and is freed when that session
dies; two shared servers sweep everything exactly once between them.
"""

from __future__ import annotations

import contextlib
import gzip
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from server_harness import Http, ServerProcess, wait_until

from orbit_core.ir.codec import to_json
from orbit_lang.compiler import compile_source
from orbit_store.postgres import PostgresStore
from orbit_store.sweeplock import SweepLock

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]

ENV = {"ORBIT_CLUSTER_INTERVAL_MS": "200", "ORBIT_RETENTION_SWEEP_INTERVAL": "0.2"}
QUICK = """\
workflow Quick {
    version "1.0.0"
    input { n: Int = 0 }
    output { n: Int }
    return { n: input.n + 1 }
}
"""


def _wait(check: Callable[[], Any], timeout: float, what: str, *logs: ServerProcess) -> Any:
    return wait_until(check, timeout, what, *logs, every=0.05)


def _quick() -> Any:
    result = compile_source(QUICK)
    assert result.ok, result.diagnostics
    return to_json(result.definitions[0])


def _archived(archive: Path) -> str:
    out = []
    for day in archive.glob("*.jsonl.gz"):
        # A member being written right now does not decompress yet.
        with contextlib.suppress(EOFError, gzip.BadGzipFile):
            out.append(gzip.decompress(day.read_bytes()).decode())
    return "".join(out)


def _metric(proc: ServerProcess, name: str) -> float:
    text = proc.http().get("/v1/metrics").text
    match = re.search(rf"^{name} (\S+)$", text, re.M)
    assert match, text
    return float(match[1])


def _start_all(api: Http, ids: list[str]) -> None:
    for eid in ids:
        answer = api.post("/v1/executions", {"workflow": "Quick", "execution_id": eid})
        assert answer.status in (200, 201), answer


def _live(api: Http) -> list[str]:
    body = api.get("/v1/executions?limit=1000").body
    return [e["execution_id"] for e in body["executions"]]


def test_standby_only_the_leader_sweeps_and_a_failover_mid_sweep_loses_nothing(
    pg_url: str, tmp_path: Path
) -> None:
    archive = tmp_path / "shared-archive"
    ids = [f"x-{i}" for i in range(1200)]
    # The executions are made by a cluster without retention, then swept by one with it.
    plain = ServerProcess(pg_url, "--cluster", "--node-id", "maker", env=ENV).start(timeout=90)
    try:
        _wait(lambda: plain.http().get("/v1/ready").status == 200, 30, "a leader", plain)
        api = plain.http()
        assert api.post("/v1/workflows", _quick()).status == 201
        _start_all(api, ids)
    finally:
        plain.stop()
    args = ("--retention", "1s", "--archive", str(archive))
    a = ServerProcess(pg_url, "--cluster", "--node-id", "a", *args, env=ENV).start(timeout=90)
    b: ServerProcess | None = None
    try:
        _wait(lambda: a.http().get("/v1/ready").status == 200, 30, "a to lead", a)
        b = ServerProcess(pg_url, "--cluster", "--node-id", "b", *args, env=ENV).start(timeout=90)
        # Killed as soon as the first batch is in the archive.
        _wait(lambda: '"x-' in _archived(archive), 60, "a to sweep", a)
        a.stop(signal.SIGKILL)
        left = len(_live(b.http()))
        standby = b
        _wait(lambda: standby.http().get("/v1/ready").status == 200, 30, "b to lead", b)
        api = b.http()
        _wait(lambda: _live(api) == [], 90, "b to finish the sweep", b)
        in_archive = _archived(archive)
        assert [eid for eid in ids if f'"{eid}"' not in in_archive] == []
        for eid in (ids[0], ids[-1]):
            found = api.get(f"/v1/archive/executions/{eid}")
            assert found.status == 200 and found.body["status"] == "COMPLETED", found
        # What a left (most of it, unless a machine's pause let a finish) b swept.
        assert _metric(b, "orbit_retention_swept_total") >= (left > 0)
        # A new standby sweeps nothing, and reads what the leader archived.
        c = ServerProcess(pg_url, "--cluster", "--node-id", "c", *args, env=ENV).start(timeout=90)
        try:
            _wait(lambda: "following the leader" in c.log(), 30, "c to follow", c)
            _start_all(api, ["late"])
            _wait(lambda: '"late"' in _archived(archive), 30, "b to sweep late", b)
            assert c.http().get("/v1/archive/executions/late").status == 200
            assert _metric(c, "orbit_retention_swept_total") == 0
            assert "retention sweep" not in c.log()
        finally:
            c.stop(signal.SIGKILL)
    finally:
        for proc in (a, b):
            if proc is not None and proc.proc is not None:
                proc.stop(signal.SIGKILL)


def test_the_sweep_lock_goes_to_one_session_at_a_time(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    a, b = SweepLock(store, "a"), SweepLock(store, "b")
    try:
        assert a.try_take() and a.held()
        assert not b.try_take() and not b.held()
        a.release()
        assert not a.held()
        assert b.try_take()
        assert not a.try_take()
        # b's session dies (a crash, a cut): the lock is free, and b knows it lost it.
        with store.session("test-admin") as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'orbit-sweep:b'"
            )
        assert not b.held()
        assert a.try_take()
    finally:
        a.close()
        b.close()
        store.close()


def _shared(url: str, node: str, *args: str) -> ServerProcess:
    return ServerProcess(
        url,
        "--cluster",
        "--cluster-mode",
        "shared",
        "--node-id",
        node,
        "--node-timeout",
        "2",
        *args,
        env=ENV,
    )


def test_shared_servers_sweep_everything_once_between_them(pg_url: str, tmp_path: Path) -> None:
    archive = tmp_path / "shared-archive"
    args = ("--retention", "1s", "--archive", str(archive))
    a = _shared(pg_url, "a", *args).start(timeout=90)
    b: ServerProcess | None = None
    try:
        b = _shared(pg_url, "b", *args).start(timeout=90)
        assert a.http().post("/v1/workflows", _quick()).status == 201
        ids = [f"s-{i}" for i in range(120)]
        _start_all(a.http(), ids[::2])
        _start_all(b.http(), ids[1::2])
        other = b
        _wait(lambda: _live(a.http()) == [] and _live(other.http()) == [], 90, "sweeps", a, b)
        in_archive = _archived(archive)
        assert [eid for eid in ids if f'"{eid}"' not in in_archive] == []
        swept = _metric(a, "orbit_retention_swept_total") + _metric(
            b, "orbit_retention_swept_total"
        )
        assert swept == len(ids)
        for server in (a, b):
            found = server.http().get(f"/v1/archive/executions/{ids[7]}")
            assert found.status == 200, found
    finally:
        for proc in (a, b):
            if proc is not None and proc.proc is not None:
                proc.stop(signal.SIGKILL)
