"""A server whose PostgreSQL disappears (`pg_ctl stop -m immediate`: the
server process dies without a goodbye to its clients) and comes back, with a
real server process and a real database: health and readiness say so while
it is away, without waiting for traffic; one clear log line names the
database (password hidden); the server reconnects by itself; nothing
committed is lost and the executions started before the outage complete.
A server started while its database is down stops with one line and a
non-zero exit.

Under load, with Python SDK workers as real processes: PostgreSQL stopped
for a few seconds, three times, loses no execution. Every result report made
while the database is away is answered 500 STORAGE_ERROR; the workers keep
their sessions (they heartbeat), so the runtime never redelivers what they
hold, and an SDK that gave up on such a result would leave its step (which
has no timeout) running forever, or, since the runtime gives such an attempt
a deadline of one session timeout, until it is redelivered: so no execution
may have been redelivered either."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pgkit
import pytest
import server_ir
from cluster_proxy import ready
from server_harness import Http, RawWorker, ServerProcess, run_orbit, wait_until

pytestmark = pytest.mark.postgres

REDACTED = r"postgres://orbit:\*\*\*@127\.0\.0\.1:\d+/\S+"
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z +[A-Z]+ orbit: ")
HERE = Path(__file__).resolve().parent
OUTAGES = 3
OUTAGE_S = 6.0
# Load before each outage, and how often an execution is started.
BETWEEN_OUTAGES_S = 3.0
START_EVERY_S = 0.15


def _no_password(text: str) -> None:
    assert pgkit.PASSWORD not in text
    assert "p%40ss" not in text


def _health(api: Http) -> dict[str, Any]:
    reply = api.get("/v1/health")
    assert reply.status == 200, reply
    return dict(reply.body)


def _serve(api: Http, worker: RawWorker, ids: list[str]) -> None:
    """Runs every task handed out until the executions `ids` completed."""

    def done() -> bool:
        reply = worker.poll(wait_ms=200)
        if reply.status == 200:
            task = reply.body
            answer = worker.complete(task["token"], {"i": task["input"]["i"] + 1})
            assert answer.status == 200, answer
            return False
        return all(api.get(f"/v1/executions/{eid}").body["status"] == "COMPLETED" for eid in ids)

    wait_until(done, 30, f"{ids} to complete")


def test_a_database_stopped_immediately_and_restarted(pg_cluster: pgkit.Cluster) -> None:
    url = pg_cluster.url(pg_cluster.create_database())
    proc = ServerProcess(url).start()
    try:
        api = proc.http()
        assert api.post("/v1/workflows", server_ir.chain(3)).status == 201
        for eid in ("o-1", "o-2"):
            assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": eid}).status
        worker = RawWorker(api, "w-1", [("bench.step", "1.0.0")])
        assert worker.register().status == 200
        held = worker.task()  # o-1's or o-2's first step, in flight during the outage
        committed = {
            eid: len(api.get(f"/v1/executions/{eid}/history").body["events"])
            for eid in ("o-1", "o-2")
        }
        assert _health(api)["status"] == "ok"
        before = len(proc.log().splitlines())

        pg_cluster.stop("immediate")
        # Nothing is sent to the server: it notices by itself.
        wait_until(lambda: api.get("/v1/ready").status == 503, 15, "/v1/ready to answer 503")
        health = wait_until(
            lambda: (h := _health(api))["status"] == "degraded" and h, 15, "a degraded health"
        )
        assert set(health["degraded"]) == {"store"}, health
        # The route is open: the kind of database, not its user, host or name.
        assert health["degraded"]["store"].startswith("postgres: STORAGE_ERROR"), health
        assert "orbit" not in json.dumps(health["degraded"]) and "127.0.0.1" not in str(health)
        refused = worker.complete(held["token"], {"i": held["input"]["i"] + 1})
        assert refused.status == 500 and refused.body["error"]["code"] == "STORAGE_ERROR"
        down = api.post("/v1/executions", {"workflow": "Chain", "execution_id": "o-3"})
        assert down.body["error"]["code"] == "STORAGE_ERROR", down
        errors = [line for line in proc.log().splitlines()[before:] if " ERROR " in line]
        assert errors, proc.log()
        for line in errors:
            assert re.search(rf"ERROR orbit: .*db={REDACTED} error=\"", line), line

        pg_cluster.start()
        wait_until(lambda: api.get("/v1/ready").status == 200, 20, "/v1/ready to answer 200")
        wait_until(lambda: _health(api)["status"] == "ok", 20, "health to be ok again")
        assert re.search(rf"WARN orbit: reconnected to PostgreSQL db={REDACTED}", proc.log())
        # The result refused during the outage is taken now, under its token.
        again = worker.complete(held["token"], {"i": held["input"]["i"] + 1})
        assert again.status == 200, again
        assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": "o-3"}).status
        _serve(api, worker, ["o-1", "o-2", "o-3"])
        for eid in ("o-1", "o-2", "o-3"):
            events = api.get(f"/v1/executions/{eid}/history").body["events"]
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            assert len(events) >= committed.get(eid, 0)
            steps = [e["step"] for e in events if e["type"] == "StepSucceeded"]
            assert steps == ["s0", "s1", "s2"], events
    finally:
        proc.stop()
    _no_password(proc.log())
    # Every line is one of the server's (no library's own messages).
    stray = [line for line in proc.log().splitlines() if not LOG_LINE.match(line)]
    assert not stray, stray


def test_a_server_started_while_its_database_is_down(pg_cluster: pgkit.Cluster) -> None:
    url = pg_cluster.url(pg_cluster.create_database())
    pg_cluster.stop("immediate")
    result = run_orbit("server", "--db", url, "--addr", "127.0.0.1:0")
    assert result.returncode == 1, result.stderr
    _no_password(result.stderr)
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, result.stderr
    assert re.search(
        rf"ERROR orbit: cannot open the database db={REDACTED} "
        r"error=\"cannot connect to PostgreSQL at postgres://orbit:\*\*\*@",
        errors[0],
    ), errors[0]
    assert "Traceback" not in result.stderr


class _Load:
    """Starts a `Chain` execution every START_EVERY_S seconds on a thread of
    its own until stopped. A start answered with an error (the database is
    away) may still have been committed: those are looked up afterwards."""

    def __init__(self, addr: str) -> None:
        self._api = Http(addr, timeout=30)
        self._stop = threading.Event()
        self.started: list[str] = []
        self.uncertain: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(START_EVERY_S):
            n += 1
            eid = f"load-{n}"
            try:
                reply = self._api.post("/v1/executions", {"workflow": "Chain", "execution_id": eid})
            except OSError:
                self._api.close()
                self.uncertain.append(eid)
                continue
            (self.started if reply.status == 201 else self.uncertain).append(eid)

    def started_at_least(self, n: int) -> bool:
        return len(self.started) >= n

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self._api.close()


def _start_sdk_worker(tmp_path: Path, addr: str, n: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORBIT_", "OTEL_"))}
    env.update(ORBIT_SERVER=f"http://{addr}", PYTHONUNBUFFERED="1")
    with open(tmp_path / f"worker-{n}.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, str(HERE / "outage_worker.py")],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def _status(api: Http, eid: str) -> str | None:
    reply = api.get(f"/v1/executions/{eid}")
    return str(reply.body["status"]) if reply.status == 200 else None


def _stuck(api: Http, eids: set[str]) -> str:
    """What these executions (not completed, or redelivered) last recorded."""
    lines = []
    for eid in sorted(eids)[:10]:
        events = api.get(f"/v1/executions/{eid}/history").body["events"]
        tail = [(e["type"], e.get("step"), e.get("attempt")) for e in events[-4:]]
        lines.append(f"{eid}: {tail}")
    return f"{len(eids)} executions:\n" + "\n".join(lines)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sdk_workers_deliver_every_result_through_database_outages(
    pg_cluster: pgkit.Cluster, tmp_path: Path
) -> None:
    url = pg_cluster.url(pg_cluster.create_database())
    proc = ServerProcess(url).start()
    workers = [_start_sdk_worker(tmp_path, proc.addr, n) for n in range(3)]
    load = _Load(proc.addr)
    try:
        api = proc.http()
        assert api.post("/v1/workflows", server_ir.chain(3)).status == 201
        load.start()
        per_round = int(BETWEEN_OUTAGES_S / START_EVERY_S)
        for outage in range(OUTAGES):
            wait_until(
                functools.partial(load.started_at_least, (outage + 1) * per_round),
                60,
                "executions to start",
                proc,
            )
            pg_cluster.stop("fast")
            # The outage itself: its length is the point of the test.
            time.sleep(OUTAGE_S)
            pg_cluster.start()
            wait_until(lambda: ready(proc.addr), 30, "the server to be ready again", proc)
        load.stop()
        committed = [eid for eid in load.uncertain if _status(api, eid) is not None]
        pending = set(load.started + committed)
        assert len(pending) >= OUTAGES * per_round

        def all_completed() -> bool:
            for eid in list(pending):
                if _status(api, eid) == "COMPLETED":
                    pending.discard(eid)
            return not pending

        try:
            wait_until(all_completed, 90, "every execution to complete", every=0.5)
        except AssertionError:
            raise AssertionError(_stuck(api, pending)) from None
        assert [w.poll() for w in workers] == [None] * len(workers)
        # Delivered by the workers that ran them, not rescued by the runtime
        # redelivering attempts whose results never arrived.
        redelivered = [
            eid
            for eid in load.started + committed
            if any(
                e["type"] == "StepScheduled" and e["redelivery"]
                for e in api.get(f"/v1/executions/{eid}/history").body["events"]
            )
        ]
        assert not redelivered, _stuck(api, set(redelivered))
    finally:
        load.stop()
        for w in workers:
            w.terminate()
        for w in workers:
            w.wait(30)
        proc.stop()
    for n in range(len(workers)):
        log = (tmp_path / f"worker-{n}.log").read_text()
        assert "result refused" not in log, log
        assert "result not delivered" not in log, log
