"""The `result-then-poll` worker protocol extension over HTTP/JSON
(docs/worker-protocol.md): a result that carries the next poll.

Chapter 68's own behaviour stays in tests/test_server_worker_protocol.py;
this file checks what the extension adds, and that a server started with
`--no-worker-extensions` is the book's server again."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import server_ir
from server_harness import Http, RawWorker, ServerProcess, run_orbit

pytestmark = pytest.mark.timeout(60)

CHAIN = [("bench.step", "1.0.0")]
EXTENSION = "result-then-poll"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("rtp") / "orbit.db"
    with ServerProcess(db) as proc:
        assert proc.http().post("/v1/workflows", server_ir.chain()).status == 201
        yield proc


class Worker(RawWorker):
    """A raw worker that asks for the extension and can use it."""

    def register_asking(self, names: Any = (EXTENSION,)) -> dict[str, Any]:
        reply = self.http.post(
            "/v1/workers/register",
            {
                "worker_id": self.worker_id,
                "runtime": self.runtime,
                "contracts": [
                    {"task_name": name, "contract_version": version}
                    for name, version in self.contracts
                ],
                "extensions": list(names),
            },
        )
        assert reply.status == 200, reply
        self.session = reply.body["worker_session_id"]
        return dict(reply.body)

    def complete_then_poll(
        self, token: str, output: Any, wait_ms: int = 5000, session: str | None = None
    ) -> Any:
        poll = {"worker_session_id": self.session if session is None else session}
        return self.http.post(
            "/v1/tasks/complete",
            {"token": token, "output": output, "poll": {**poll, "wait_ms": wait_ms}},
        )

    def fail_then_poll(self, token: str, code: str, wait_ms: int = 5000) -> Any:
        return self.http.post(
            "/v1/tasks/fail",
            {
                "token": token,
                "error_code": code,
                "retryable": False,
                "poll": {"worker_session_id": self.session, "wait_ms": wait_ms},
            },
        )


def _worker(proc: ServerProcess, worker_id: str) -> Worker:
    worker = Worker(proc.http(), worker_id, CHAIN)
    worker.register_asking()
    return worker


def _drain(worker: Worker, *held: dict[str, Any]) -> None:
    """Completes the tasks held, then every task still queued, so that the
    next test of the module finds none left over."""
    for task in held:
        worker.complete(task["token"], {"i": task["input"]["i"] + 1})
    while True:
        reply = worker.poll(wait_ms=300)
        if reply.status == 204:
            return
        task = reply.body
        worker.complete(task["token"], {"i": task["input"]["i"] + 1})


def _start(api: Http, eid: str) -> None:
    body = {"workflow": "Chain", "input": {}, "execution_id": eid}
    assert api.post("/v1/executions", body).status == 201


def _status(api: Http, eid: str) -> str:
    state = api.get(f"/v1/executions/{eid}/wait?timeout_ms=10000").body
    return str(state["status"])


def test_register_offers_the_extension_only_to_a_worker_that_asks(
    server: ServerProcess,
) -> None:
    worker = Worker(server.http(), "rtp-register", CHAIN)
    assert "extensions" not in worker.register().body  # the book's answer
    assert worker.register_asking()["extensions"] == [EXTENSION]
    assert worker.register_asking(["other", EXTENSION, 7])["extensions"] == [EXTENSION]
    assert worker.register_asking([])["extensions"] == []


def test_a_chain_runs_on_results_that_carry_the_next_poll(server: ServerProcess) -> None:
    api = server.http()
    worker = _worker(server, "rtp-chain")
    _start(api, "rtp-chain")
    task = worker.task()
    for step in range(3):
        assert task["step_id"] == f"s{step}"
        reply = worker.complete_then_poll(task["token"], {"i": step + 1}, wait_ms=300)
        assert reply.status == 200
        if step < 2:
            assert reply.body["accepted"] is True
            task = reply.body["task"]
            assert task["execution_id"] == "rtp-chain"
            assert task["input"] == {"i": step + 1}
        else:
            # Nothing more to do: the poll waited wait_ms and found no task.
            assert reply.body == {"accepted": True, "task": None}
    assert _status(api, "rtp-chain") == "COMPLETED"


def test_a_stale_or_duplicate_result_is_answered_as_usual_and_still_polls(
    server: ServerProcess,
) -> None:
    api = server.http()
    worker = _worker(server, "rtp-stale")
    _start(api, "rtp-stale")
    first = worker.task()
    assert worker.complete(first["token"], {"i": 1}).body == {"accepted": True}
    # The step is resolved: the duplicate is refused, and its poll takes s1.
    again = worker.complete_then_poll(first["token"], {"i": 1})
    assert again.status == 200
    assert again.body["accepted"] is False
    assert again.body["reason"] == "duplicate result; step already resolved"
    assert again.body["task"]["step_id"] == "s1"
    _drain(worker, again.body["task"])
    # Once the execution is over its tokens are unknown; nothing is queued,
    # so the poll waits its wait_ms and ends.
    assert _status(api, "rtp-stale") == "COMPLETED"
    late = worker.fail_then_poll(first["token"], "LATE", wait_ms=200)
    assert late.status == 200
    assert late.body == {
        "accepted": False,
        "reason": "unknown token (execution finished or token invalid)",
        "task": None,
    }


def test_a_refused_result_takes_no_task(server: ServerProcess) -> None:
    api = server.http()
    worker = _worker(server, "rtp-refused")
    _start(api, "rtp-refused-1")
    held = worker.task()
    _start(api, "rtp-refused-2")
    # An empty error_code is refused (400) before any poll: the next task
    # stays queued, and a plain poll gets it.
    refused = worker.http.post(
        "/v1/tasks/fail",
        {
            "token": held["token"],
            "error_code": "",
            "poll": {"worker_session_id": worker.session, "wait_ms": 100},
        },
    )
    assert refused.status == 400
    assert refused.body["error"]["code"] == "INVALID_REQUEST"
    queued = worker.task(wait_ms=2000)
    assert queued["execution_id"] == "rtp-refused-2"
    _drain(worker, held, queued)


def test_a_malformed_poll_is_refused_before_the_result_is_reported(
    server: ServerProcess,
) -> None:
    api = server.http()
    worker = _worker(server, "rtp-malformed")
    _start(api, "rtp-malformed")
    task = worker.task()
    cases = [
        ({"wait_ms": 10}, "poll.missing field `worker_session_id`"),
        ({"worker_session_id": worker.session, "wait_ms": -1}, "poll.wait_ms: invalid type"),
        ("now", "poll: invalid type: string, expected a JSON object"),
    ]
    for poll, text in cases:
        body = {"token": task["token"], "output": {"i": 1}, "poll": poll}
        reply = worker.http.post("/v1/tasks/complete", body)
        assert reply.status == 422, reply
        assert text in reply.text
    # None of them reported the result.
    assert worker.complete(task["token"], {"i": 1}).body == {"accepted": True}
    _drain(worker)


def test_a_poll_that_cannot_run_leaves_the_result_answered(server: ServerProcess) -> None:
    api = server.http()
    worker = _worker(server, "rtp-lost")
    _start(api, "rtp-lost")
    task = worker.task()
    reply = worker.complete_then_poll(task["token"], {"i": 1}, session="no-such-session")
    assert reply.status == 200
    assert reply.body == {
        "accepted": True,
        "poll_error": {
            "code": "UNKNOWN_SESSION",
            "message": "unknown or expired worker session; register again",
        },
    }
    # The next task was not taken: the worker's own poll gets it.
    queued = worker.task()
    assert (queued["execution_id"], queued["step_id"]) == ("rtp-lost", "s1")
    _drain(worker, queued)


def test_a_task_for_a_worker_that_hung_up_goes_to_another(server: ServerProcess) -> None:
    api = server.http()
    worker = _worker(server, "rtp-hangup")
    _start(api, "rtp-hangup-1")
    for step in range(2):
        task = worker.task()
        worker.complete(task["token"], {"i": step + 1})
    last = worker.task()
    host, port = server.addr.rsplit(":", 1)
    body = orjson.dumps(
        {
            "token": last["token"],
            "output": {"i": 3},
            "poll": {"worker_session_id": worker.session, "wait_ms": 30000},
        }
    )
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /v1/tasks/complete HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        # The last step is reported (nothing is queued after it), so the
        # poll parks; the worker then hangs up.
        assert _status(api, "rtp-hangup-1") == "COMPLETED"
    # A task arriving now must not go to the poll of the worker that left.
    _start(api, "rtp-hangup-2")
    other = _worker(server, "rtp-hangup-2")
    started = time.monotonic()
    task = other.task(wait_ms=10_000)
    assert (task["execution_id"], task["step_id"]) == ("rtp-hangup-2", "s0")
    assert time.monotonic() - started < 5  # not after a session timeout
    _drain(other, task)


def test_without_extensions_the_server_is_the_books(tmp_path: Path) -> None:
    for flags, env in (
        (["--no-worker-extensions"], {}),
        ([], {"ORBIT_WORKER_EXTENSIONS": "none"}),
    ):
        with ServerProcess(tmp_path / f"off{len(flags)}.db", *flags, env=env) as proc:
            api = proc.http()
            assert api.post("/v1/workflows", server_ir.chain()).status == 201
            worker = Worker(proc.http(), "rtp-off", CHAIN)
            assert worker.register_asking()["extensions"] == []
            _start(api, "rtp-off")
            task = worker.task()
            # The poll field is ignored, as a field the book does not know.
            reply = worker.complete_then_poll(task["token"], {"i": 1})
            assert reply.body == {"accepted": True}
            assert worker.task()["step_id"] == "s1"


def test_an_unknown_extension_is_a_usage_error(tmp_path: Path) -> None:
    done = run_orbit(
        "server", "--db", str(tmp_path / "x.db"), "--worker-extensions", "result-then-poll,nope"
    )
    assert done.returncode == 2
    assert "unknown worker protocol extension `nope` (known: result-then-poll)" in done.stderr
