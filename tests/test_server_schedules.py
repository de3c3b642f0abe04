"""Chapter 67's /v1/schedules against a real `orbit server`: shapes, errors,
access, metrics, firing in real time, and a SIGKILL while a one-second
schedule fires (every occurrence started once or counted as skipped)."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import server_ir
from server_harness import Http, ServerProcess

pytestmark = pytest.mark.timeout(120)

ADMIN, WORKER = "admin-secret", "worker-secret"
_OCCURRENCE = re.compile(r"^tick:(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("schedules") / "orbit.db"
    with ServerProcess(db, "--token", ADMIN, "--worker-token", WORKER) as proc:
        assert proc.http(ADMIN).post("/v1/workflows", server_ir.greet()).status == 201
        yield proc


@pytest.fixture
def api(server: ServerProcess) -> Http:
    return server.http(ADMIN)


def create(api: Http, **fields: Any) -> Any:
    body = {"workflow": "Greet", "input": {"name": "Ada"}, **fields}
    return api.post("/v1/schedules", body)


def eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_create_answers_the_schedule_document(api: Http) -> None:
    reply = create(api, schedule_id="doc-1", interval="10s")
    assert reply.status == 201, reply
    doc = reply.body
    assert list(doc) == [
        "schedule_id",
        "workflow",
        "input",
        "interval",
        "overlap",
        "catchup",
        "paused",
        "next_fire_at",
        "next_fire_times",
        "last_fire_at",
        "last_execution_id",
        "fired",
        "skipped",
        "last_error",
        "created_at",
        "updated_at",
    ]
    assert (doc["interval"], doc["overlap"], doc["catchup"], doc["paused"]) == (
        "10s",
        "skip",
        "skip_missed",
        False,
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d0Z", doc["next_fire_at"])
    assert len(doc["next_fire_times"]) == 5
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", doc["created_at"])
    assert api.get("/v1/schedules/doc-1").body["schedule_id"] == "doc-1"
    listed = api.get("/v1/schedules").body["schedules"]
    assert "doc-1" in [s["schedule_id"] for s in listed]
    assert api.request("DELETE", "/v1/schedules/doc-1").body == {
        "schedule_id": "doc-1",
        "deleted": True,
    }


def test_every_setting_round_trips(api: Http) -> None:
    reply = create(
        api,
        schedule_id="full",
        version="1.0.0",
        cron="0 2 * * *",
        timezone="Europe/Berlin",
        overlap="cancel_previous",
        catchup="run_once",
        start_at="2030-01-01T00:00:00+01:00",
        end_at="2031-01-01T00:00:00Z",
        jitter="30s",
        description="nightly",
        paused=True,
    )
    assert reply.status == 201, reply
    doc = reply.body
    assert {k: doc[k] for k in list(doc)[:14]} == {
        "schedule_id": "full",
        "workflow": "Greet",
        "version": "1.0.0",
        "input": {"name": "Ada"},
        "cron": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "overlap": "cancel_previous",
        "catchup": "run_once",
        "start_at": "2029-12-31T23:00:00Z",
        "end_at": "2031-01-01T00:00:00Z",
        "jitter": "30s",
        "description": "nightly",
        "paused": True,
        "next_fire_at": None,
    }
    resumed = api.post("/v1/schedules/full/resume").body
    assert resumed["next_fire_times"][0] == "2030-01-01T01:00:00Z"
    assert resumed["next_fire_at"] >= "2030-01-01T01:00:00Z"
    api.request("DELETE", "/v1/schedules/full")


@pytest.mark.parametrize(
    ("fields", "status", "code", "message"),
    [
        (
            {"schedule_id": "bad", "cron": "0 25 * * *"},
            400,
            "INVALID_SCHEDULE",
            "cron `0 25 * * *`: `25` is out of range for the hour field (0-23)",
        ),
        (
            {"schedule_id": "bad", "cron": "0 2 * * *", "timezone": "Nowhere/City"},
            400,
            "INVALID_SCHEDULE",
            "timezone `Nowhere/City`: unknown time zone (expected an IANA name such as Europe/Berlin)",
        ),
        (
            {"schedule_id": "bad", "cron": "0 2 * * *", "interval": "1h"},
            400,
            "INVALID_SCHEDULE",
            "both cron and interval are set: give exactly one",
        ),
        (
            {"schedule_id": "bad"},
            400,
            "INVALID_SCHEDULE",
            "neither cron nor interval is set: give exactly one",
        ),
        (
            {"schedule_id": "bad", "interval": "-10s"},
            400,
            "INVALID_SCHEDULE",
            "interval `-10s`: must not be negative",
        ),
        (
            {
                "schedule_id": "bad",
                "interval": "1h",
                "start_at": "2030-01-02T00:00:00Z",
                "end_at": "2030-01-01T00:00:00Z",
            },
            400,
            "INVALID_SCHEDULE",
            "end_at `2030-01-01T00:00:00Z` is not after start_at `2030-01-02T00:00:00Z`",
        ),
        (
            {"schedule_id": "bad", "interval": "1h", "every": "1h"},
            400,
            "INVALID_SCHEDULE",
            "unknown field `every` (expected one of schedule_id, workflow, version, input, cron, "
            "interval, timezone, overlap, catchup, start_at, end_at, jitter, description, paused)",
        ),
        (
            {"schedule_id": "no/slash", "interval": "1h"},
            400,
            "INVALID_SCHEDULE",
            "schedule_id `no/slash` must be 1 to 100 letters, digits, `-`, `_` or `.`",
        ),
        (
            {"schedule_id": "bad", "interval": "1h", "workflow": "Nope"},
            404,
            "WORKFLOW_NOT_FOUND",
            "workflow Nope is not registered",
        ),
        (
            {"schedule_id": "bad", "interval": "1h", "input": {"name": 7}},
            400,
            "INVALID_INPUT",
            "the schedule input is invalid for Greet@1.0.0 at $.name: expected String, found an integer",
        ),
    ],
)
def test_bad_schedules_are_refused_and_not_stored(
    api: Http, fields: dict[str, Any], status: int, code: str, message: str
) -> None:
    reply = create(api, **fields)
    assert (reply.status, reply.body) == (status, {"error": {"code": code, "message": message}})
    assert api.get("/v1/schedules/bad").status == 404


def test_a_body_that_is_not_an_object_is_422(api: Http) -> None:
    reply = api.post("/v1/schedules", [1, 2])
    assert reply.status == 422


def test_exists_and_not_found(api: Http) -> None:
    assert create(api, schedule_id="twice", interval="1h").status == 201
    again = create(api, schedule_id="twice", interval="1h")
    assert (again.status, again.body) == (
        409,
        {"error": {"code": "SCHEDULE_EXISTS", "message": "schedule `twice` already exists"}},
    )
    api.request("DELETE", "/v1/schedules/twice")
    missing = {"error": {"code": "SCHEDULE_NOT_FOUND", "message": "schedule `twice` not found"}}
    for method, path in [
        ("GET", "/v1/schedules/twice"),
        ("DELETE", "/v1/schedules/twice"),
        ("POST", "/v1/schedules/twice/pause"),
        ("POST", "/v1/schedules/twice/resume"),
        ("POST", "/v1/schedules/twice/trigger"),
    ]:
        reply = api.request(method, path)
        assert (reply.status, reply.body) == (404, missing), (method, path)
    patched = api.request("PATCH", "/v1/schedules/twice", {"paused": True})
    assert (patched.status, patched.body) == (404, missing)


def test_patch_pause_resume_and_trigger(api: Http) -> None:
    create(api, schedule_id="ops", interval="1h")
    patched = api.request(
        "PATCH",
        "/v1/schedules/ops",
        {"interval": None, "cron": "*/15 * * * *", "overlap": "cancel_previous"},
    )
    assert patched.status == 200, patched
    assert (patched.body["cron"], patched.body["overlap"]) == ("*/15 * * * *", "cancel_previous")
    assert "interval" not in patched.body
    bad = api.request("PATCH", "/v1/schedules/ops", {"cron": "61 * * * *"})
    assert bad.status == 400 and bad.body["error"]["code"] == "INVALID_SCHEDULE"
    paused = api.post("/v1/schedules/ops/pause").body
    assert (paused["paused"], paused["next_fire_at"], paused["next_fire_times"]) == (True, None, [])
    resumed = api.post("/v1/schedules/ops/resume").body
    assert resumed["paused"] is False and resumed["next_fire_at"].endswith(
        ("00:00Z", "15:00Z", "30:00Z", "45:00Z")
    )
    api.request("PATCH", "/v1/schedules/ops", {"overlap": "skip"})
    first = api.post("/v1/schedules/ops/trigger")
    assert first.status == 200
    assert list(first.body) == ["schedule_id", "started", "execution_id"]
    assert re.fullmatch(
        r"ops:manual:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first.body["execution_id"]
    )
    state = api.get(f"/v1/executions/{first.body['execution_id']}").body
    assert state["status"] == "RUNNING"  # no worker serves greeting.compose
    second = api.post("/v1/schedules/ops/trigger")
    assert second.body == {"schedule_id": "ops", "started": False, "skipped": "overlap"}
    doc = api.get("/v1/schedules/ops").body
    assert (doc["fired"], doc["skipped"], doc["last_execution_id"]) == (
        1,
        1,
        first.body["execution_id"],
    )
    api.request("DELETE", "/v1/schedules/ops")


def test_credentials(server: ServerProcess) -> None:
    anonymous = server.http().get("/v1/schedules")
    assert anonymous.status == 401
    worker = server.http(WORKER).get("/v1/schedules")
    assert worker.status == 403


def metric(api: Http, name: str) -> int:
    text = api.get("/v1/metrics").text
    found = re.search(rf"^{re.escape(name)} (\d+)\.0$", text, re.MULTILINE)
    assert found, text
    return int(found[1])


def test_a_schedule_fires_in_real_time_and_counts_in_the_metrics(api: Http) -> None:
    before = metric(api, "orbit_schedules_fired_total")
    assert create(api, schedule_id="tick", interval="1s", overlap="allow").status == 201
    eventually(lambda: api.get("/v1/schedules/tick").body["fired"] >= 2)
    api.post("/v1/schedules/tick/pause")
    doc = api.get("/v1/schedules/tick").body
    assert _OCCURRENCE.match(doc["last_execution_id"])
    state = api.get(f"/v1/executions/{doc['last_execution_id']}").body
    assert state["schedule_id"] == "tick"
    assert metric(api, "orbit_schedules_fired_total") >= before + 2
    assert 'orbit_schedules_skipped_total{reason="overlap"}' in api.get("/v1/metrics").text
    api.request("DELETE", "/v1/schedules/tick")


def occurrences(api: Http) -> list[str]:
    rows = api.get("/v1/executions?workflow=Greet&limit=1000").body["executions"]
    return [r["execution_id"] for r in rows if _OCCURRENCE.match(r["execution_id"])]


def more_than(api: Http, count: int) -> None:
    eventually(lambda: len(occurrences(api)) > count)


def test_sigkill_while_a_one_second_schedule_fires(tmp_path: Path) -> None:
    proc = ServerProcess(tmp_path / "orbit.db").start()
    proc.args += ["--addr", proc.addr]
    try:
        api = proc.http()
        assert api.post("/v1/workflows", server_ir.greet()).status == 201
        body = {"schedule_id": "tick", "workflow": "Greet", "interval": "1s", "overlap": "allow"}
        assert api.post("/v1/schedules", {**body, "input": {"name": "x"}}).status == 201
        for _ in range(3):
            # Kill right after a fire became visible: inside or near the window
            # between an execution's commit and the schedule's advance.
            more_than(api, len(occurrences(api)))
            assert proc.stop(signal.SIGKILL) == -signal.SIGKILL
            proc.start()
            api = proc.http()
        more_than(api, len(occurrences(api)) + 1)
        api.post("/v1/schedules/tick/pause")
        doc = api.get("/v1/schedules/tick").body
        started = sorted(occurrences(api))
    finally:
        proc.stop()
    assert len(started) == len(set(started))
    times = [_seconds(_OCCURRENCE.match(e)[1]) for e in started]  # type: ignore[index]
    # Every occurrence from the first execution to the last handled one was
    # started exactly once or counted as skipped.
    last = _seconds(doc["last_fire_at"])
    span = last - times[0] + 1
    assert doc["fired"] == len(started)
    assert doc["fired"] + doc["skipped"] == span, (doc, started)


def _seconds(text: str) -> int:
    return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())
