"""Retention end to end (docs/retention.md): a real `orbit server --retention
2s --archive DIR` archives a finished execution under DIR, drops it from
`orbit ps`, and the CLI still reads it with `--archived`; the metrics count
it; a server killed mid-sweep loses nothing."""

from __future__ import annotations

import gzip
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_real import Orbit
from server_harness import ServerProcess

pytestmark = pytest.mark.timeout(120)

QUICK = """\
workflow Quick {
    version "1.0.0"
    input { n: Int = 0 }
    output { n: Int }
    return { n: input.n + 1 }
}
"""

# The sweeper's interval, shortened so the test does not wait a minute.
FAST = {"ORBIT_RETENTION_SWEEP_INTERVAL": "0.2"}


def _archived_files(archive: Path) -> str:
    """Everything the day files of `archive` hold, decompressed."""
    return "".join(gzip.decompress(p.read_bytes()).decode() for p in archive.glob("*.jsonl.gz"))


def _until(check: Callable[[], bool], timeout: float = 70.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _deploy_and_run(orbit: Orbit, tmp_path: Path, ids: list[str]) -> None:
    source = tmp_path / "quick.orbit"
    source.write_text(QUICK)
    orbit.ok("deploy", str(source))
    for eid in ids:
        orbit.ok("run", "Quick", "--id", eid, "--input", '{"n": 1}')


def test_a_finished_execution_is_archived_then_gone_and_still_readable(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    server = ServerProcess(
        tmp_path / "o.db", "--retention", "2s", "--archive", str(archive), env=FAST
    )
    with server:
        orbit = Orbit(f"http://{server.addr}")
        _deploy_and_run(orbit, tmp_path, ["quick-1"])
        http = server.http()
        kept = {"workflow": "Quick", "execution_id": "quick-kept", "retention": "1h"}
        assert http.post("/v1/executions", kept).status == 201
        bad = http.post("/v1/executions", {"workflow": "Quick", "retention": "soon"})
        assert bad.status == 422 and "retention: `soon`" in bad.text, bad
        assert "quick-1" in orbit.ok("ps").stdout
        _until(lambda: "quick-1" in _archived_files(archive))
        _until(lambda: "quick-1" not in orbit.ok("ps").stdout)
        # Its own retention of an hour keeps the other one.
        assert "quick-kept" in orbit.ok("ps").stdout
        logs = orbit.ok("logs", "quick-1", "--archived").stdout
        assert "WorkflowCreated" in logs and "WorkflowCompleted" in logs
        status = orbit.ok("status", "quick-1", "--archived").stdout
        assert "COMPLETED" in status
        assert "quick-1" in orbit.ok("ps", "--archived").stdout
        live = orbit("status", "quick-1")
        assert live.exit_code != 0 and "not found" in live.stderr
        missing = orbit("logs", "nope", "--archived")
        assert missing.exit_code != 0 and "not in the archive" in missing.stderr
        metrics = server.http().get("/v1/metrics").text
        assert "orbit_retention_swept_total 1.0" in metrics
        assert "orbit_retention_archived_total 1.0" in metrics
        assert "orbit_retention_oldest_eligible_age_seconds" in metrics
        assert "retention sweep" in server.wait_for_log("swept=1")
    record = json.loads(_archived_files(archive).splitlines()[0])
    assert record["execution_id"] == "quick-1"
    assert record["definition_hash"].startswith("sha256:")
    assert record["document"]["status"] == "COMPLETED"


BRIEF = """\
workflow Brief {
    version "1.0.0"
    retention 1s
    output { ok: Bool }
    return { ok: true }
}
"""


def test_retention_per_execution_beats_per_workflow_beats_the_server(tmp_path: Path) -> None:
    """The server keeps executions an hour; `Brief` declares one second;
    `orbit run --retention` gives one execution its own either way."""
    archive = tmp_path / "archive"
    server = ServerProcess(
        tmp_path / "o.db", "--retention", "1h", "--archive", str(archive), env=FAST
    )
    with server:
        orbit = Orbit(f"http://{server.addr}")
        _deploy_and_run(orbit, tmp_path, ["plain"])
        brief = tmp_path / "brief.orbit"
        brief.write_text(BRIEF)
        orbit.ok("run", str(brief), "--id", "brief")
        orbit.ok("run", str(brief), "--id", "brief-kept", "--retention", "1h")
        orbit.ok("run", "Quick", "--id", "quick-brief", "--retention", "1s")
        _until(lambda: '"brief"' in _archived_files(archive))
        _until(lambda: "quick-brief" in _archived_files(archive))

        def listed() -> str:
            return orbit.ok("ps").stdout

        # The sweeper deletes in small paced batches after the archive
        # write, so the store lets go of them a moment later.
        _until(lambda: "quick-brief" not in listed() and "brief " not in listed())
        assert "plain" in listed() and "brief-kept" in listed()
        assert orbit("status", "brief").exit_code != 0
        bad = orbit("run", "Quick", "--retention", "soon")
        assert bad.exit_code == 2 and "--retention" in bad.stderr, bad


TAGGED = """\
workflow Tagged {
    version "1.0.0"
    input { customer: String, amount: Float }
    output { ok: Bool }
    search {
        customer: input.customer
        amount: input.amount
    }
    return { ok: true }
}
"""


def test_archived_executions_are_filtered_like_the_index(tmp_path: Path) -> None:
    """`orbit ps --archived --where` and `GET /v1/archive/executions?where=`
    select swept executions by their search fields as the live index does."""
    archive = tmp_path / "archive"
    server = ServerProcess(
        tmp_path / "o.db", "--retention", "1s", "--archive", str(archive), env=FAST
    )
    with server:
        orbit = Orbit(f"http://{server.addr}")
        source = tmp_path / "tagged.orbit"
        source.write_text(TAGGED)
        orbit.ok("deploy", str(source))
        for eid, customer, amount in (
            ("t-small", "c-1", 10.0),
            ("t-big", "c-1", 900.0),
            ("t-other", "c-2", 800.0),
        ):
            answer = json.dumps({"customer": customer, "amount": amount})
            orbit.ok("run", "Tagged", "--id", eid, "--input", answer)
        _until(lambda: orbit.ok("ps").stdout.count("t-") == 0)

        def listed(*args: str) -> list[str]:
            out = orbit.ok("ps", "--archived", *args).stdout
            return [line.split()[0] for line in out.splitlines()[1:] if line.startswith("t-")]

        assert listed("--where", 'customer == "c-1"') == ["t-big", "t-small"]
        assert listed("--where", 'customer == "c-1" and amount > 500') == ["t-big"]
        assert listed("--where", 'status == "COMPLETED"', "--workflow", "Tagged") == [
            "t-other",
            "t-big",
            "t-small",
        ]
        first = orbit.ok("ps", "--archived", "--where", "amount > 0", "--limit", "2").stdout
        assert "more: --cursor " in first
        cursor = first.rsplit("more: --cursor ", 1)[1].split()[0]
        assert listed("--where", "amount > 0", "--cursor", cursor) == ["t-small"]
        typo = orbit("ps", "--archived", "--where", "nosuch == 1")
        assert typo.exit_code == 2 and "unknown field `nosuch`" in typo.stderr, typo
        http = server.http()
        page = http.get("/v1/archive/executions?where=amount%20%3E%20850")
        assert page.status == 200, page
        assert [r["execution_id"] for r in page.body["executions"]] == ["t-big"]
        assert page.body["next_cursor"] is None
        bad = http.get("/v1/archive/executions?where=amount%20%3E%20%22x%22")
        assert bad.status == 400 and bad.body["error"]["code"] == "INVALID_FILTER", bad
        # Without `where` nor `cursor` the answer is as before: no cursor.
        plain = http.get("/v1/archive/executions?limit=1")
        assert plain.status == 200 and "next_cursor" not in plain.body


def test_without_retention_nothing_is_swept_and_the_archive_routes_are_absent(
    tmp_path: Path,
) -> None:
    with ServerProcess(tmp_path / "o.db", env=FAST) as server:
        orbit = Orbit(f"http://{server.addr}")
        _deploy_and_run(orbit, tmp_path, ["kept-1"])
        assert server.http().get("/v1/archive/executions").status == 404
        assert "orbit_retention" not in server.http().get("/v1/metrics").text
        assert "kept-1" in orbit.ok("ps").stdout


def test_archive_none_is_warned_about_at_start(tmp_path: Path) -> None:
    with ServerProcess(
        tmp_path / "o.db", "--retention", "1h", "--archive", "none", env=FAST
    ) as server:
        assert "--archive none" in server.wait_for_log("DELETED")


def test_a_server_killed_while_sweeping_loses_nothing(tmp_path: Path) -> None:
    """SIGKILL at whatever point the sweep has reached: after a restart
    every execution is either still in the store or in the archive."""
    archive = tmp_path / "archive"
    db = tmp_path / "o.db"
    ids = [f"crash-{i}" for i in range(150)]
    with ServerProcess(db) as server:
        orbit = Orbit(f"http://{server.addr}")
        _deploy_and_run(orbit, tmp_path, ids[:1])
        http = server.http()
        for eid in ids[1:]:
            answer = http.post(
                "/v1/executions", {"workflow": "Quick", "input": {"n": 1}, "execution_id": eid}
            )
            assert answer.status in (200, 201), answer
    time.sleep(1.1)  # every execution is now older than the 1s retention
    swept = ServerProcess(db, "--retention", "1s", "--archive", str(archive), env=FAST)
    swept.start()
    _until(lambda: archive.exists() and any(archive.glob("*.jsonl.gz")), 30)
    swept.stop(signal.SIGKILL)
    with ServerProcess(db) as server:
        http = server.http()
        stored = {eid for eid in ids if http.get(f"/v1/executions/{eid}").status == 200}
    in_archive = _archived_files(archive)
    lost = [eid for eid in ids if eid not in stored and f'"{eid}"' not in in_archive]
    assert lost == []
    # Restarted with retention, the sweep finishes on the archive the kill
    # left, and every execution reads back from it.
    again = ServerProcess(db, "--retention", "1s", "--archive", str(archive), env=FAST)
    with again:
        http = again.http()
        _until(lambda: http.get("/v1/executions?limit=1").body["executions"] == [], 60)
        for eid in ids:
            answer = http.get(f"/v1/archive/executions/{eid}/history")
            assert answer.status == 200 and answer.body["execution_id"] == eid, answer


def test_retention_options_are_checked_before_anything_opens(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from orbit_cli.main import cli
    from orbit_server.config import ConfigError, ServerConfig, check, startup_warnings

    with pytest.raises(ConfigError, match="--archive requires --retention"):
        check(ServerConfig(archive=str(tmp_path)))
    # Both cluster modes sweep (tests/test_cluster_retention.py).
    check(ServerConfig(db="postgres://x/y", cluster=True, retention_ms=1000))
    assert startup_warnings(ServerConfig(retention_ms=1000)) == []
    assert any(
        "DELETED" in w for w in startup_warnings(ServerConfig(retention_ms=1000, archive="none"))
    )
    bad = CliRunner().invoke(cli, ["server", "--retention", "soon"])
    assert bad.exit_code == 2 and "--retention" in bad.output and "`soon`" in bad.output
