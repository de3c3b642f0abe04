"""A real `orbit server` guards its SQLite file (issue 11, items 6 to 8): a
database removed while it runs stops writes loudly and makes it unready; a
second server on the same file, a corrupt file and a read-only file are each
refused at start with a clear error and exit status 1."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import server_ir
from server_harness import ORBIT, ServerProcess
from sqlite_damage import corrupt_a_table_under_its_users, corrupt_an_event_page

from orbit_core import events as ev
from orbit_core.ports import CommitBatch, ExecutionChange, ExecutionRow
from orbit_store.sqlite import SqliteStore


def wait_for(proc: ServerProcess, pattern: str, timeout: float = 10.0) -> str:
    """The first log line matching `pattern` (stderr is read on a thread)."""
    deadline = time.monotonic() + timeout
    found = re.compile(pattern)
    while time.monotonic() < deadline:
        for line in list(proc.lines):
            if found.search(line):
                return line
        time.sleep(0.02)
    raise AssertionError(f"no log line matches {pattern!r}:\n{proc.log()}")


def start_body(eid: str) -> dict[str, object]:
    return {"workflow": "Review", "execution_id": eid, "input": {"order_id": eid}}


@pytest.mark.timeout(180)  # three server starts (one refused): about 30 s on a loaded machine
def test_a_database_removed_while_running_stops_writes_and_is_not_recreated_silently(
    tmp_path: Path,
) -> None:
    db = tmp_path / "orbit.db"
    with ServerProcess(db) as proc:
        assert f"INFO orbit: created new database at {db}" in proc.log()
        api = proc.http()
        assert api.get("/v1/ready").status == 200
        assert api.post("/v1/workflows", server_ir.review()).status == 201
        assert api.post("/v1/executions", start_body("r1")).status == 201
        db.unlink()
        ready = api.get("/v1/ready")
        assert (ready.status, ready.body) == (503, {"role": "single", "ready": False})
        wait_for(proc, rf"ERROR orbit: the database cannot be written db={re.escape(str(db))} ")
        for eid in ("r2", "r3"):
            refused = api.post("/v1/executions", start_body(eid))
            assert refused.status == 500
            assert refused.body["error"]["code"] == "STORAGE_ERROR"
            assert refused.body["error"]["message"] == (
                f"the database {db} was removed while in use; every write is refused "
                "from now on (restore the file, then restart)"
            )
        line = wait_for(proc, r"ERROR orbit: storage error op=commit ")
        assert f"db={db} " in line and "was removed while in use" in line
        assert api.get("/v1/ready").status == 503
    # A restart finds no database but the files it left: it refuses to start
    # on an empty one, naming them.
    rc, log = _run_server([ORBIT, "server", "--db", str(db), "--addr", "127.0.0.1:0"])
    assert rc == 1, log
    left = [f"{db}-wal", f"{db}-shm", f"{db}.lock"]
    assert "ERROR orbit: cannot open the database" in log
    assert (
        f"the database {db} is missing, but {' and '.join(left)} show that it was in use; "
        f"restore it from a backup, or delete {' and '.join(left)} to start with an empty "
        "database"
    ) in log
    assert not db.exists()
    # Deleting them asks for a new database, as deleting orbit.db and its
    # -wal and -shm does to start over.
    for name in left[:2]:
        Path(name).unlink()
    Path(left[2]).write_text("")  # as an older server left it: the lock file alone
    with ServerProcess(db) as again:
        assert re.search(
            rf"WARN orbit: created new database at {re.escape(str(db))} note=", again.log()
        )
        assert again.http().get("/v1/ready").status == 200


def test_corruption_met_while_running_stops_writes_and_readiness(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    with ServerProcess(db) as proc:
        api = proc.http()
        assert api.post("/v1/workflows", server_ir.review()).status == 201
        for eid in ("c1", "c2", "c3"):
            assert api.post("/v1/executions", start_body(eid)).status == 201
        assert api.get("/v1/ready").status == 200
        corrupt_a_table_under_its_users(db, "workflow_executions")
        refusal = (
            f"the database {db} is corrupt (database disk image is malformed); every write is "
            "refused from now on (restore it from a backup, then restart)"
        )
        for eid in ("c4", "c5"):
            refused = api.post("/v1/executions", start_body(eid))
            assert refused.status == 500
            assert refused.body["error"] == {"code": "STORAGE_ERROR", "message": refusal}
        # Readiness stays down, although a write elsewhere in the file works.
        for _ in range(3):
            ready = api.get("/v1/ready")
            assert (ready.status, ready.body) == (503, {"role": "single", "ready": False})
        wait_for(proc, rf"ERROR orbit: the database cannot be written db={re.escape(str(db))} ")
        deploy = api.post("/v1/workflows", server_ir.greet())
        assert (deploy.status, deploy.body["error"]["message"]) == (500, refusal)
        assert api.get("/v1/ready").status == 503


def test_a_second_server_on_the_same_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    with ServerProcess(db) as first:
        assert first.proc is not None
        owners = {first.proc.pid} | _children(first.proc.pid)
        rc, log = _run_server([ORBIT, "server", "--db", str(db), "--addr", "127.0.0.1:0"])
        assert rc == 1, log
        found = re.search(r"is in use by another process \(pid (\d+)\)", log)
        assert found, log
        assert int(found[1]) in owners
        assert "ERROR orbit: cannot open the database" in log
        assert first.http().get("/v1/ready").status == 200  # the first one is unharmed
    # Once the first has stopped, the file is free again.
    with ServerProcess(db) as third:
        assert third.http().get("/v1/ready").status == 200


def test_a_corrupt_database_is_refused_at_start(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    store = SqliteStore(db)
    for k in range(0, 300, 50):
        store.commit(CommitBatch(executions=[_finished(f"x-{i}") for i in range(k, k + 50)]))
    store.close()
    corrupt_an_event_page(db)
    rc, log = _run_server([ORBIT, "server", "--db", str(db), "--addr", "127.0.0.1:0"])
    assert rc == 1, log
    assert "ERROR orbit: cannot open the database" in log
    assert f"the database {db} is corrupt (PRAGMA quick_check: " in log


def test_a_read_only_database_is_refused_at_start(tmp_path: Path) -> None:
    db = tmp_path / "orbit.db"
    SqliteStore(db).close()
    argv = [ORBIT, "server", "--db", str(db), "--addr", "127.0.0.1:0"]
    rc, log = _run_server(_read_only(db, argv))
    assert rc == 1, log
    assert "ERROR orbit: cannot open the database" in log
    assert f"the database {db} is not writable: attempt to write a readonly database" in log


# ---- helpers


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ORBIT_", "OTEL_"))}


def _children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.add(int(entry))
    return found


def _run_server(argv: list[str], timeout: float = 60.0) -> tuple[int | None, str]:
    """Runs a server that should refuse to start: its exit status and log, or
    (None, log) if it started listening after all (it is then stopped)."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env()
    )
    lines: list[str] = []
    listening = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "ORBIT runtime listening" in line:
                listening.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    rc: int | None = None
    while time.monotonic() < deadline:
        rc = proc.poll()
        if rc is not None or listening.wait(0.05):
            break
    if rc is None:
        proc.terminate()
        proc.wait(30)
    reader.join(10)
    assert proc.stderr is not None
    proc.stderr.close()
    return rc, "".join(lines)


def _finished(eid: str) -> ExecutionChange:
    created = ev.WorkflowCreated(1, 1000, "Wf", "1.0.0", "sha256:x", {"p": "y" * 200}, None, None)
    row = ExecutionRow(eid, "Wf", "1.0.0", "sha256:x", "COMPLETED", 1000, 1000, 2)
    return ExecutionChange(eid, row, [created, ev.WorkflowStarted(2, 1000)], new=True)


_RO_MOUNT = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'


def _read_only(path: Path, argv: list[str]) -> list[str]:
    """`argv` run with `path` read-only: chmod for a normal user; for root,
    whom file modes do not stop, a read-only bind mount in a private mount
    namespace."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        return argv
    if shutil.which("unshare") is None:
        pytest.skip("root without unshare: cannot make a file read-only")
    unshare = ["unshare", "-m", "sh", "-c", _RO_MOUNT, str(path)]
    probe = subprocess.run([*unshare, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount read-only here: {probe.stderr.strip()}")
    return [*unshare, *argv]


def test_every_storage_error_is_logged_whichever_call_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reads fail too (a damaged page, a vanished disk): the server logs them
    as it logs failed commits, then answers STORAGE_ERROR as before."""
    from orbit_core.errors import StorageError
    from orbit_server import logs
    from orbit_server.storage import LoggedStore

    class Broken(SqliteStore):
        def history(self, execution_id: str, run: int | None = None) -> list[ev.Event] | None:
            raise StorageError("database disk image is malformed")

    logs.configure("text")
    db = tmp_path / "orbit.db"
    store = LoggedStore(Broken(db), str(db))
    with pytest.raises(StorageError, match="malformed"):
        store.history("x-1")
    assert store.write_problem() is None
    store.close()
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].endswith(
        f'ERROR orbit: storage error op=history db={db} error="database disk image is malformed"'
    )
