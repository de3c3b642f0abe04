"""The fault campaign (issue 40): two `orbit server`s on one PostgreSQL, in
standby or shared cluster mode, with real Python SDK workers, under a load
of starts, signals and cancels sent through the HTTP API, while faults are
injected on a seeded schedule. Every client call and every fault is written
to `calls.jsonl`; at the end the faults are healed, every execution is let
finish, the final state is read through a surviving server, and
tests/faults/checker.py judges the lot.

Faults (`schedule()` draws them from the seed; the same seed gives the same
schedule): SIGKILL of a server (started again later) or of a worker
(started again), SIGSTOP/SIGCONT of a server (all its processes) or of a
worker, PostgreSQL stopped with `-m fast` or `-m immediate` and started
again on the same port, and a partition or a delay between one server and
PostgreSQL (each server reaches the database through its own
fault_proxy.FaultProxy), and a clock offset of up to a minute either way
for one server (written to the file its ORBIT_TEST_CLOCK_OFFSET_FILE names,
orbit_server/skewed_clock.py: the engine's clock moves, leases do not).

Hygiene: every process is started here and stopped by its own PID
(ServerProcess.stop, Popen.kill, pg_ctl on the cluster's own data
directory); every loop is bounded by a count and a deadline; all traffic is
on 127.0.0.1.

Run: `nox -s faults -- --minutes 5 --mode both --seed 1`, or
`PYTHONPATH=tests:tests/faults python tests/faults/campaign.py --help`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import checker
import pgkit
from cluster_proxy import Proxy
from fault_proxy import FaultProxy
from server_harness import Http, ServerProcess, _parent_of, _pids
from server_ir import _finish, _get, _obj, _rec

from orbit_core import ir
from orbit_core.ir import expr as e
from orbit_core.ir import types as t

HERE = Path(__file__).resolve().parent
WORKER = HERE.parent / "cluster_worker.py"
# Each committed event is logged at debug (with its execution id, seq and
# type), so the server logs say which server wrote which event.
ENV = {"ORBIT_CLUSTER_INTERVAL_MS": "200", "ORBIT_LOG": "info,orbit=debug"}
MODE_ARGS = {
    "standby": ["--cluster"],
    "shared": ["--cluster", "--cluster-mode", "shared", "--node-timeout", "2"],
}
FAULTS = (
    "server-kill",
    "server-pause",
    "worker-kill",
    "worker-pause",
    "pg-restart-fast",
    "pg-restart-immediate",
    "db-partition",
    "db-delay",
    "clock-skew",
)
NODES = ("a", "b")
REQUEST_TIMEOUT_S = 5.0
NO_ANSWER_BACKOFF_S = 0.1
# Bounds on every loop, whatever the duration asked for.
MAX_OPS = 100_000
MAX_FAULTS = 2_000


@attrs.frozen(slots=True)
class Fault:
    at_s: float
    fault: str
    target: str
    duration_s: float


def schedule(seed: int, seconds: float, every_s: float) -> list[Fault]:
    """The seeded fault schedule: about one fault every `every_s` seconds
    (exponential gaps), none in the first or last few seconds."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    at = 3.0
    while len(faults) < MAX_FAULTS:
        at += rng.expovariate(1 / every_s)
        if at > seconds - 3:
            break
        kind = rng.choice(FAULTS)
        target = "pg" if kind.startswith("pg-") else rng.choice(NODES)
        duration = round(rng.uniform(0.3, 4.0), 2)
        if kind == "db-delay":
            duration = round(rng.uniform(1.0, 5.0), 2)
        faults.append(Fault(round(at, 2), kind, target, duration))
    return faults


def signalled_chain() -> Any:
    """`Go`: a task, a wait for the signal `go` (payload {op: n}, the
    harness's operation number), then two more tasks."""
    record = _rec(i=t.INT)

    def step(name: str, after: str, source: str | None) -> ir.Step:
        value: e.Expr = _get(e.StepRef(source), "i") if source else e.Int(0)
        after_it = (after,) if after else ()
        return ir.Step(name, "task", task="bench.step", depends_on=after_it, with_=_obj(i=value))

    return _finish(
        ir.Definition(
            ir_version=ir.IR_V2,
            name="Go",
            version="1.0.0",
            input=t.EMPTY_RECORD,
            output=t.EMPTY_RECORD,
            steps=(
                step("s0", "", None),
                ir.Step("go", "await", signal="go", timeout_ms=3_600_000, depends_on=("s0",)),
                step("s1", "go", "s0"),
                step("s2", "s1", "s1"),
            ),
            result=e.EMPTY_OBJECT,
            contracts={"bench.step": ir.TaskContract("bench.step", "1.0.0", record, record)},
            signals=(ir.Signal("go", _rec(op=t.INT)),),
        )
    )


def _resume(pids: list[int]) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGCONT)


def _processes(server: ServerProcess) -> list[int]:
    """The server's arbiter and its worker process (which holds the engine)."""
    if server.proc is None:
        return []
    root = server.proc.pid
    return [root, *(p for p in _pids() if _parent_of(p) == root)]


class Campaign:
    def __init__(self, mode: str, seconds: float, seed: int, out: Path, every_s: float) -> None:
        self.mode = mode
        self.seconds = seconds
        self.seed = seed
        self.out = out
        self.every_s = every_s
        self.rng = random.Random(seed * 7919 + 1)
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self._records = (out / "calls.jsonl").open("w")
        self.pg: pgkit.Cluster | None = None
        self.dbname = ""
        self._reader: Http | None = None
        # Every server process started (by PID, to stop them all at the end)
        # and a lock per server held while one is starting.
        self.spawned: list[subprocess.Popen[str] | None] = []
        self.starting: dict[str, threading.Lock] = {}
        self.proxies: dict[str, FaultProxy] = {}
        self.servers: dict[str, ServerProcess] = {}
        self.workers: dict[str, subprocess.Popen[bytes] | None] = {}
        self.balancers: list[Proxy] = []
        self.busy: set[str] = set()  # targets with a fault in force
        self.heals: list[tuple[float, str, Callable[[], None]]] = []
        self.threads: list[threading.Thread] = []
        self.ops = 0
        self.started: list[str] = []  # execution ids, acknowledged or unknown
        self.signalled: set[str] = set()
        self.cancelled: set[str] = set()
        self.faults = Counter[str]()
        self.skipped = Counter[str]()

    # ---- records

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def record(self, **fields: Any) -> None:
        with self._lock:
            self._records.write(json.dumps({"t": self.now(), **fields}) + "\n")
            self._records.flush()

    # ---- processes

    def setup(self) -> None:
        self.pg = pgkit.Cluster().start()
        self.dbname = dbname = self.pg.create_database("faults")
        for name in NODES:
            proxy = FaultProxy(self.pg.port)
            self.proxies[name] = proxy
            url = pgkit.url("127.0.0.1", proxy.port, dbname)
            args = [*MODE_ARGS[self.mode], "--node-id", name, "--session-timeout", "2"]
            env = {**ENV, "ORBIT_TEST_CLOCK_OFFSET_FILE": str(self._clock_file(name))}
            self.servers[name] = ServerProcess(url, *args, env=env).start(timeout=90)
            self.spawned.append(self.servers[name].proc)
            self.starting[name] = threading.Lock()
        self._deploy()
        for name in NODES:
            other = next(n for n in NODES if n != name)
            balancer = Proxy(
                lambda n=name, o=other: [self.servers[n].addr, self.servers[o].addr]  # type: ignore[misc]
            )
            self.balancers.append(balancer)
            self.workers[name] = self._worker(name, balancer.url)

    def _clock_file(self, name: str) -> Path:
        return self.out / f"clock-offset-{name}"

    def _skew(self, name: str, offset_ms: int) -> None:
        path = self._clock_file(name)
        path.write_text(str(offset_ms))
        stat = path.stat()  # a new mtime even within the file system's granularity
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))

    def _deploy(self) -> None:
        definition = signalled_chain()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for server in self.servers.values():
                reply = self._request(server, "POST", "/v1/workflows", definition)
                if reply is not None and reply.status in (200, 201):
                    return
            time.sleep(0.2)
        raise RuntimeError("no server took the workflow definition")

    def _worker(self, name: str, url: str) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ORBIT_", "OTEL_"))}
        env.update(
            ORBIT_SERVER=url,
            CLUSTER_RUNS=str(self.out / "runs.txt"),
            CLUSTER_RELEASE=str(self.out / "release"),
            CLUSTER_HOLD_STEP="",
            PYTHONUNBUFFERED="1",
        )
        with open(self.out / f"worker-{name}.log", "ab") as log:
            return subprocess.Popen(
                [sys.executable, str(WORKER)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )

    def teardown(self) -> None:
        if self._reader is not None:
            self._reader.close()
        for worker in self.workers.values():
            if worker is not None and worker.poll() is None:
                worker.send_signal(signal.SIGCONT)
                worker.kill()
                worker.wait(10)
        for server in self.servers.values():
            for pid in _processes(server):
                os.kill(pid, signal.SIGCONT)
            if server.proc is not None:
                server.stop(signal.SIGKILL)
        for proc in self.spawned:  # any a race left behind, by its own PID
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait(30)
        for balancer in self.balancers:
            balancer.close()
        for proxy in self.proxies.values():
            proxy.close()
        for server_name, server in self.servers.items():
            (self.out / f"server-{server_name}.log").write_text(server.log())
        self._log_lines_of_violations()
        if self.pg is not None:
            (self.out / "postgres.log").write_text(self.pg.server_log())
            self.pg.destroy()
        self._records.close()

    def _log_lines_of_violations(self) -> None:
        """Appends to violations.txt, for each execution named there, the
        server log lines that mention it, so that one reproduction is
        enough to diagnose."""
        path = self.out / "violations.txt"
        if not path.exists() or not path.read_text():
            return
        named = sorted(
            {
                line.split("] ", 1)[1].split(":", 1)[0]
                for line in path.read_text().splitlines()
                if line.startswith("[")
            }
        )
        out = [path.read_text()]
        for eid in named:
            for name, server in self.servers.items():
                lines = [line for line in server.lines if eid in line]
                out.append(f"server {name} log lines on {eid} ({len(lines)}):")
                out += [f"    {line}" for line in lines]
        path.write_text("\n".join(out) + "\n")

    # ---- faults

    def inject(self, fault: Fault) -> None:
        target = fault.target
        down = target in self.servers and self.servers[target].proc is None
        if target in self.busy or down or len(self.busy) >= 2:
            self.skipped[fault.fault] += 1
            self.record(kind="fault", action="skipped", **attrs.asdict(fault))
            return
        self.busy.add(target)
        self.faults[fault.fault] += 1
        self.record(kind="fault", action="inject", **attrs.asdict(fault))
        heal_at = time.monotonic() + fault.duration_s
        heal: Callable[[], None]
        if fault.fault == "server-kill":
            self.servers[target].stop(signal.SIGKILL)
            heal = lambda: self._restart_server(target)  # noqa: E731
        elif fault.fault == "server-pause":
            frozen = _processes(self.servers[target])
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)
            heal = functools.partial(_resume, frozen)
        elif fault.fault == "worker-kill":
            worker = self.workers[target]
            if worker is not None:
                worker.kill()
                worker.wait(10)
            heal = lambda: self._restart_worker(target)  # noqa: E731
        elif fault.fault == "worker-pause":
            paused = self.workers[target]
            if paused is not None:
                paused.send_signal(signal.SIGSTOP)
            heal = lambda: paused.send_signal(signal.SIGCONT) if paused else None  # noqa: E731
        elif fault.fault.startswith("pg-restart"):
            mode = fault.fault.rsplit("-", 1)[1]
            thread = threading.Thread(target=self._restart_pg, args=(mode,), daemon=True)
            thread.start()
            self.threads.append(thread)
            heal = lambda: thread.join(120)  # noqa: E731
            heal_at = time.monotonic()
        elif fault.fault == "clock-skew":
            offset = self.rng.choice((-1, 1)) * self.rng.randint(5_000, 60_000)
            self._skew(target, offset)
            self.record(kind="fault", action="clock", target=target, offset_ms=offset)
            heal = lambda: self._skew(target, 0)  # noqa: E731
        elif fault.fault == "db-partition":
            self.proxies[target].partition()
            heal = self.proxies[target].heal
        else:
            self.proxies[target].delay(round(self.rng.uniform(0.05, 0.4), 2))
            heal = self.proxies[target].heal
        self.heals.append((heal_at, fault.fault, lambda: self._heal(fault, heal)))

    def _heal(self, fault: Fault, heal: Callable[[], None]) -> None:
        heal()
        if fault.fault != "server-kill":  # that target is busy until it is up again
            self.busy.discard(fault.target)
        self.record(kind="fault", action="heal", **attrs.asdict(fault))

    def _restart_pg(self, mode: str) -> None:
        assert self.pg is not None
        self.pg.stop(mode)
        self.pg.start()

    def _restart_server(self, name: str) -> None:
        """Starts a killed server again on a thread of its own; one start of
        a server at a time (two would leave one process untracked)."""
        server = self.servers[name]
        starting = self.starting[name]
        if not starting.acquire(blocking=False):
            return

        def start() -> None:
            try:
                for _ in range(5):  # the database may be down or cut off just now
                    try:
                        server.start(timeout=60)
                        return
                    except RuntimeError:
                        time.sleep(1)
            finally:
                if server.proc is not None:
                    self.spawned.append(server.proc)
                starting.release()
                self.busy.discard(name)

        thread = threading.Thread(target=start, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _restart_worker(self, name: str) -> None:
        self.workers[name] = self._worker(name, self.balancers[NODES.index(name)].url)

    def heal_due(self, everything: bool = False) -> None:
        now = time.monotonic()
        due = [h for h in self.heals if everything or h[0] <= now]
        self.heals = [h for h in self.heals if h not in due]
        for _, _, heal in sorted(due, key=lambda h: h[0]):
            heal()

    # ---- client calls

    def _request(self, server: ServerProcess, method: str, path: str, body: Any) -> Any:
        if not server.addr or server.proc is None:
            return None
        client = Http(server.addr, timeout=REQUEST_TIMEOUT_S)
        try:
            return client.request(method, path, body)
        except (OSError, ValueError):
            return None
        finally:
            client.close()

    def call(self, op: str, eid: str, n: int, path: str, body: Any) -> str:
        """One operation, tried at each server in a random order while the
        answer says it was not applied (a standby's NOT_LEADER) or, for a
        start (whose execution id makes a repeat harmless), was unknown."""
        best = "refused"
        order = list(NODES)
        self.rng.shuffle(order)
        for name in order * 2:
            reply = self._request(self.servers[name], "POST", path, body)
            status = None if reply is None else reply.status
            code = None
            if reply is not None and isinstance(reply.body, dict):
                code = (reply.body.get("error") or {}).get("code")
            result = checker.outcome(status, code)
            self.record(
                kind="call", op=op, execution_id=eid, n=n, server=name, status=status,
                code=code, outcome=result,
            )  # fmt: skip
            if result == "ack":
                return result
            if reply is None:
                time.sleep(NO_ANSWER_BACKOFF_S)  # no server up: do not spin
            if result == "unknown":
                best = result
                if op != "start":
                    return result
            elif code != "NOT_LEADER":
                return best
        time.sleep(NO_ANSWER_BACKOFF_S)  # no leader just now: do not spin
        return best

    def step(self) -> None:
        n = self.ops = self.ops + 1
        waiting = [x for x in self.started if x not in self.signalled and x not in self.cancelled]
        roll = self.rng.random()
        if roll < 0.45 or not waiting:
            eid = f"{self.mode}-{self.seed}-{n}"
            body = {"workflow": "Go", "execution_id": eid}
            if self.call("start", eid, n, "/v1/executions", body) != "refused":
                self.started.append(eid)
        elif roll < 0.85:
            eid = self.rng.choice(waiting)
            self.signalled.add(eid)
            self.call("signal", eid, n, f"/v1/executions/{eid}/signals/go", {"op": n})
        else:
            eid = self.rng.choice(waiting)
            self.cancelled.add(eid)
            self.call("cancel", eid, n, f"/v1/executions/{eid}/cancel", {})

    # ---- the run

    def run(self) -> dict[str, Any]:
        plan = schedule(self.seed, self.seconds, self.every_s)
        (self.out / "schedule.json").write_text(json.dumps([attrs.asdict(f) for f in plan]))
        self.setup()
        try:
            self.t0 = time.monotonic()
            deadline = self.t0 + self.seconds
            # Faults on a thread of their own, so that a client call waiting
            # on a frozen server does not stretch the faults' durations.
            injector = threading.Thread(target=self._faults, args=(plan, deadline), daemon=True)
            injector.start()
            while time.monotonic() < deadline and self.ops < MAX_OPS:
                self.step()
            load_ops = self.ops
            injector.join(300)
            self.heal_due(everything=True)
            for thread in list(self.threads):
                thread.join(180)
            store = self.settle()
            lines = (self.out / "calls.jsonl").read_text().splitlines()
            records = [json.loads(line) for line in lines]
            violations = checker.check(records, store)
            self._dump_rows(sorted({v.execution_id for v in violations}))
            return self.summary(plan, load_ops, records, store, violations)
        finally:
            self.teardown()

    def _faults(self, plan: list[Fault], deadline: float) -> None:
        pending = list(plan)
        while time.monotonic() < deadline:
            self.heal_due()
            while pending and pending[0].at_s <= self.now():
                self.inject(pending.pop(0))
            time.sleep(0.02)

    def _live(self) -> ServerProcess:
        for _ in range(600):
            for server in self.servers.values():
                reply = self._request(server, "GET", "/v1/ready", None)
                if reply is not None and reply.status == 200:
                    return server
            time.sleep(0.1)
        raise RuntimeError("no server is ready after the faults were healed")

    def settle(self, quiet_s: float = 120.0) -> dict[str, checker.Execution]:
        """The quiet period: every server and worker up, every execution not
        yet signalled gets its signal, and every execution is given time to
        finish; then the final state, read through a ready server."""
        for name, server in self.servers.items():
            if server.proc is None:
                self._restart_server(name)
        for thread in self.threads:
            thread.join(180)
        self._live()
        # Whatever still waits for its signal gets one (a cancel without an
        # answer may not have happened).
        with self.pg_admin() as conn:
            sql = "SELECT execution_id FROM workflow_executions WHERE status = 'RUNNING'"
            running = sorted(eid for (eid,) in conn.execute(sql).fetchall())
        for eid in running:
            history = self._get(f"/v1/executions/{eid}/history") or {"events": []}
            kinds = {ev["type"] for ev in history["events"]}
            if not kinds & {"SignalReceived", "CancelRequested"}:
                self.ops += 1
                self.call(
                    "signal", eid, self.ops, f"/v1/executions/{eid}/signals/go", {"op": self.ops}
                )
        deadline = time.monotonic() + quiet_s
        while time.monotonic() < deadline and self._running():
            time.sleep(1)
        # The database's own list: a refused start that left a row, or an
        # execution no client started, is judged too.
        with self.pg_admin() as conn:
            rows = conn.execute("SELECT execution_id FROM workflow_executions").fetchall()
        listed = [eid for (eid,) in rows if eid not in set(self.started)]
        store = {}
        for eid in [*self.started, *sorted(listed)]:
            document = self._get(f"/v1/executions/{eid}")
            if document is None:
                continue
            history = self._get(f"/v1/executions/{eid}/history") or {"events": []}
            store[eid] = checker.Execution(eid, document["status"], tuple(history["events"]))
        return store

    def _dump_rows(self, execution_ids: list[str]) -> None:
        """Writes the coordination rows (shared mode's owners, queue, inbox)
        and projection row of each execution named by a violation to
        rows.txt, for a diagnosis after the database is gone."""
        if not execution_ids:
            return
        lines = []
        queries = {
            "workflow_executions": "SELECT * FROM workflow_executions WHERE execution_id = %s",
            "orbit_owners": "SELECT * FROM orbit_owners WHERE execution_id = %s",
            "orbit_tasks": "SELECT * FROM orbit_tasks WHERE execution_id = %s",
            "orbit_inbox": "SELECT * FROM orbit_inbox WHERE execution_id = %s",
        }
        with self.pg_admin() as conn:
            for eid in execution_ids:
                for table, sql in queries.items():
                    try:
                        rows = conn.execute(sql, (eid,)).fetchall()
                    except Exception as exc:  # a standby cluster has no such table
                        lines.append(f"{eid} {table}: {exc}")
                        continue
                    lines += [f"{eid} {table}: {row}" for row in rows] or [f"{eid} {table}: -"]
            for table in ("orbit_nodes", "orbit_sessions"):
                try:
                    lines += [f"{table}: {row}" for row in conn.execute(f"SELECT * FROM {table}")]
                except Exception as exc:
                    lines.append(f"{table}: {exc}")
        (self.out / "rows.txt").write_text("\n".join(lines) + "\n")

    def pg_admin(self) -> Any:
        """A connection to the campaign's database, straight (no fault proxy)."""
        assert self.pg is not None
        return self.pg.admin(self.dbname)

    def _running(self) -> int:
        """How many executions the database holds as running."""
        with self.pg_admin() as conn:
            sql = "SELECT count(*) FROM workflow_executions WHERE status = 'RUNNING'"
            (count,) = conn.execute(sql).fetchone()
        return int(count)

    def _get(self, path: str) -> Any:
        """A read through a ready server, on one kept-alive connection."""
        for _ in range(20):
            if self._reader is None:
                self._reader = Http(self._live().addr, timeout=REQUEST_TIMEOUT_S)
            try:
                reply = self._reader.get(path)
            except (OSError, ValueError):
                reply = None
            if reply is not None and reply.status == 200:
                return reply.body
            if reply is not None and reply.status == 404:
                return None
            self._reader.close()
            self._reader = None
            time.sleep(0.2)
        raise RuntimeError(f"GET {path} kept failing")

    def summary(
        self,
        plan: list[Fault],
        load_ops: int,
        records: list[dict[str, Any]],
        store: dict[str, checker.Execution],
        violations: list[checker.Violation],
    ) -> dict[str, Any]:
        calls = [r for r in records if r["kind"] == "call"]
        runs_path = self.out / "runs.txt"
        runs = runs_path.read_text().splitlines() if runs_path.exists() else []
        result = {
            "mode": self.mode,
            "seed": self.seed,
            "seconds": self.seconds,
            "fault_every_s": self.every_s,
            "operations": load_ops,
            "calls": len(calls),
            "outcomes": dict(Counter(f"{r['op']}:{r['outcome']}" for r in calls)),
            "faults_planned": len(plan),
            "faults_injected": dict(self.faults),
            "faults_skipped": dict(self.skipped),
            "executions": len(store),
            "final_status": dict(Counter(x.status for x in store.values())),
            "step_runs": len(runs),
            "redelivered_runs": sum(1 for r in runs if r.endswith("True")),
            "violations": len(violations),
        }
        (self.out / "summary.json").write_text(json.dumps(result, indent=2))
        (self.out / "violations.txt").write_text("\n\n".join(v.render() for v in violations))
        return result


def run(mode: str, seconds: float, seed: int, out: Path, every_s: float = 6.0) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    return Campaign(mode, seconds, seed, out, every_s).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="load time per mode")
    parser.add_argument("--mode", choices=["standby", "shared", "both"], default="both")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--fault-every", type=float, default=6.0, help="mean seconds between faults"
    )
    parser.add_argument("--out", type=Path, default=Path("build/faults"))
    args = parser.parse_args(argv)
    modes = ["standby", "shared"] if args.mode == "both" else [args.mode]
    failed = 0
    for mode in modes:
        out = args.out / f"{mode}-seed{args.seed}"
        result = run(mode, args.minutes * 60, args.seed, out, args.fault_every)
        print(json.dumps(result, indent=2), flush=True)
        if result["violations"]:
            print((out / "violations.txt").read_text(), flush=True)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
