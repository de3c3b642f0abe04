"""The worker loop (orbit_server/worker_loop.py) on a real `orbit server`.

A plain kept-alive connection moves to the loop once the thread path has
answered one of its hot calls (a poll, a result, a result with its poll);
from then on the loop answers those calls. Its answers must be the thread
path's, byte for byte: the same requests are sent to a server with the loop
and to one without (`ORBIT_WORKER_LOOP=off`), and the raw responses are
compared (with the Date header and the random task tokens masked). The
other tests check what the loop does with time: polls that park and are
answered later or expire, a worker that hangs up while its poll waits, and
a server stopping with connections on the loop.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import server_ir
from server_harness import Http, ServerProcess, wait_until

pytestmark = pytest.mark.timeout(90)

TOKEN = "loop-admin-token-0123456789"
WORKER_TOKEN = "loop-worker-token-0123456789"
CHAIN = {"task_name": "bench.step", "contract_version": "1.0.0"}
ON_LOOP = "worker connection on the worker loop"
BACK = "worker connection back on the thread path"
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DATE = re.compile(rb"Date: [^\r]*\r\n")


# The loop on its own thread, and with its HTTP in the front process.
MODES = ["on", "front"]


def _server(db: Path, *, mode: str) -> ServerProcess:
    env = {"ORBIT_LOG": "debug", "ORBIT_WORKER_LOOP": mode}
    proc = ServerProcess(db, "--token", TOKEN, "--worker-token", WORKER_TOKEN, env=env)
    return proc.start()


@pytest.fixture(scope="module", params=MODES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ServerProcess]:
    proc = _server(tmp_path_factory.mktemp("loop") / "orbit.db", mode=request.param)
    assert proc.http(TOKEN).post("/v1/workflows", server_ir.chain()).status == 201
    yield proc
    proc.stop()


class Raw:
    """One kept-alive socket speaking HTTP/1.1 by hand."""

    def __init__(self, proc: ServerProcess, token: str = WORKER_TOKEN) -> None:
        host, port = proc.addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.token = token
        self.buf = b""

    def request(
        self, path: str, body: Any, *, extra: bytes = b"", token: str | None = None
    ) -> bytes:
        data = orjson.dumps(body)
        auth = (token if token is not None else self.token).encode()
        self.sock.sendall(
            b"POST %s HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n%s"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (path.encode(), auth, extra, len(data), data)
        )
        return self.response()

    def response(self) -> bytes:
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        found = re.search(rb"(?i)content-length: (\d+)", head)
        length = int(found[1]) if found else 0
        self.buf = rest
        while len(self.buf) < length:
            self._more()
        body, self.buf = self.buf[:length], self.buf[length:]
        return head + b"\r\n\r\n" + body

    def closed(self) -> bool:
        return self.buf == b"" and self.sock.recv(1) == b""

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed by the server")
        self.buf += chunk

    def close(self) -> None:
        self.sock.close()


def _body(response: bytes) -> Any:
    return orjson.loads(response.partition(b"\r\n\r\n")[2])


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def _register(api: Http, worker_id: str) -> str:
    reply = api.post(
        "/v1/workers/register",
        {
            "worker_id": worker_id,
            "runtime": "python",
            "contracts": [CHAIN],
            "extensions": ["result-then-poll"],
        },
    )
    assert reply.status == 200, reply
    return str(reply.body["worker_session_id"])


def _start(api: Http, eid: str) -> None:
    reply = api.post("/v1/executions", {"workflow": "Chain", "input": {}, "execution_id": eid})
    assert reply.status == 201, reply


def _on_loop(raw: Raw, session: str) -> None:
    """Moves the connection to the loop: a hot call answered on the short
    path (a connection's first request is gunicorn's)."""
    for _ in range(2):
        answer = raw.request("/v1/workers/poll", {"worker_session_id": session, "wait_ms": 0})
        assert _status(answer) == 204


def _closed(raw: Raw, answers: list[bytes]) -> list[bytes]:
    """The answers of a scenario whose last request closed the connection,
    with what differs from run to run (the date, random ids) masked."""
    assert raw.closed()
    raw.close()
    return [_UUID.sub(b"<uuid>", _DATE.sub(b"Date: <date>\r\n", r)) for r in answers]


def _on_both(
    tmp_path: Path, scenario: Callable[[ServerProcess], list[bytes]], loop_lines: int, mode: str
) -> tuple[list[bytes], list[bytes], str]:
    """The scenario's answers from a server with the loop and from one
    without, and the first one's log once it shows `loop_lines` moves to
    the loop (the server's lines are read on a thread)."""
    with_loop = _server(tmp_path / "loop.db", mode=mode)
    try:
        looped = scenario(with_loop)
        wait_until(lambda: with_loop.log().count(ON_LOOP) >= loop_lines, 10, "on the loop")
        with_loop.wait_for_log(BACK)
        log = with_loop.log()
    finally:
        with_loop.stop()
    without = _server(tmp_path / "threads.db", mode="off")
    try:
        threaded = scenario(without)
        assert ON_LOOP not in without.log()
    finally:
        without.stop()
    return looped, threaded, log


def _scenario(proc: ServerProcess) -> list[bytes]:
    """The hot calls' answers, of every kind, on one connection."""
    api = proc.http(TOKEN)
    assert api.post("/v1/workflows", server_ir.chain()).status == 201
    session = _register(api, "diff")
    raw = Raw(proc)
    out = [raw.request("/v1/workers/heartbeat", {"worker_session_id": session})]
    out.append(raw.request("/v1/workers/poll", {"worker_session_id": session, "wait_ms": 0}))
    _start(api, "diff-1")
    polled = raw.request("/v1/workers/poll", {"worker_session_id": session, "wait_ms": 1000})
    out.append(polled)
    token = _body(polled)["token"]
    poll = {"worker_session_id": session, "wait_ms": 1000}
    reported = raw.request("/v1/tasks/complete", {"token": token, "output": {"i": 1}, "poll": poll})
    out.append(reported)
    second = _body(reported)["task"]["token"]
    # The same result again: not accepted, and its poll still made.
    out.append(
        raw.request(
            "/v1/tasks/complete",
            {"token": token, "output": {"i": 1}, "poll": {**poll, "wait_ms": 0}},
        )
    )
    out.append(
        raw.request(
            "/v1/tasks/fail",
            {
                "token": second,
                "error_code": "BOOM",
                "retryable": False,
                "poll": {**poll, "wait_ms": 0},
            },
        )
    )
    out.append(raw.request("/v1/tasks/complete", {"token": second, "output": {"i": 2}}))
    out.append(raw.request("/v1/tasks/fail", {"token": second, "error_code": "X"}))
    out.append(raw.request("/v1/workers/poll", {"worker_session_id": "nope", "wait_ms": 0}))
    out.append(
        raw.request(
            "/v1/tasks/complete",
            {"token": second, "poll": {"worker_session_id": "nope", "wait_ms": 0}},
        )
    )
    # Refused before the engine: answered on the thread path, then back.
    out.append(raw.request("/v1/tasks/complete", {"token": "", "output": 1}))
    out.append(raw.request("/v1/workers/poll", {"worker_session_id": session}, token="wrong"))
    out.append(raw.request("/v1/workers/poll", {"wait_ms": 0}))
    out.append(raw.request("/v1/workers/poll", {"worker_session_id": session, "wait_ms": 0}))
    # A worker that says it closes after this call.
    out.append(
        raw.request(
            "/v1/workers/poll",
            {"worker_session_id": session, "wait_ms": 0},
            extra=b"Connection: close\r\n",
        )
    )
    return _closed(raw, out)


@pytest.mark.parametrize("mode", MODES)
def test_the_loop_answers_byte_for_byte_as_the_thread_path(tmp_path: Path, mode: str) -> None:
    looped, threaded, log = _on_both(tmp_path, _scenario, 1, mode)
    assert looped == threaded
    # The loop served them: connections moved to it, and came back for the
    # requests it leaves to the thread path.
    assert ON_LOOP in log and BACK in log
    assert b"204 No Content" in looped[-1] and b"Connection: close" in looped[-1]


def _start_scenario(proc: ServerProcess) -> list[bytes]:
    """Starts of every outcome on one client connection: after its first
    successful start on the short path the loop answers them; what the
    route refuses before the engine goes back to the thread path."""
    assert proc.http(TOKEN).post("/v1/workflows", server_ir.chain()).status == 201
    raw = Raw(proc, TOKEN)
    start = "/v1/executions"
    out = [
        raw.request(start, {"workflow": "Chain", "input": {}, "execution_id": f"s-{i}"})
        for i in range(3)
    ]
    out += [
        raw.request(start, {"workflow": "Chain", "input": {}, "execution_id": "s-2"}),
        raw.request(start, {"workflow": "Chain", "version": "1.0.0", "input": {}}),
        raw.request(start, {"workflow": "Nope", "input": {}}),
        raw.request(start, {"workflow": "Chain", "version": "9.9.9", "input": {}}),
        raw.request(start, {"workflow": "Chain", "input": {"extra": 1}}),
        raw.request(start, {"workflow": "Chain", "input": {}, "execution_id": "bad id"}),
        raw.request(start, {"workflow": "Chain", "input": {}, "execution_id": "s-x"}),
        raw.request(start, {"workflow": "Chain", "input": {}, "idempotency_key": "k-1"}),
        raw.request(start, {"workflow": "Chain", "input": {}, "idempotency_key": "k-1"}),
        # Refused before the engine: the thread path's, then back on the loop.
        raw.request(start, {"input": {}}),
        raw.request(start, {"workflow": 7}),
        raw.request(start, [1]),
        raw.request(start, {"workflow": "Chain", "input": {}}, token=WORKER_TOKEN),
        raw.request(start, {"workflow": "Chain", "input": {}, "execution_id": "s-after"}),
        raw.request(
            start,
            {"workflow": "Chain", "input": {}, "execution_id": "s-last"},
            extra=b"Connection: close\r\n",
        ),
    ]
    return _closed(raw, out)


@pytest.mark.parametrize("mode", MODES)
def test_the_loop_answers_starts_byte_for_byte_as_the_thread_path(
    tmp_path: Path, mode: str
) -> None:
    looped, threaded, log = _on_both(tmp_path, _start_scenario, 2, mode)
    assert looped == threaded
    # The loop answered every start the engine made: the connection left it
    # at the first start the route refuses, stayed on the thread path while
    # its starts failed, and came back after the next one that succeeded.
    assert (log.count(ON_LOOP), log.count(BACK)) == (2, 1), log
    statuses = [_status(r) for r in looped]
    assert statuses[:12] == [201, 201, 201, 200, 201, 404, 404, 400, 400, 201, 201, 200]
    assert statuses[12:] == [422, 422, 422, 403, 201, 201], statuses
    assert b"Connection: close" in looped[-1]


def test_a_parked_poll_is_answered_when_a_task_arrives(server: ServerProcess) -> None:
    api = server.http(TOKEN)
    session = _register(api, "parked")
    raw = Raw(server)
    _on_loop(raw, session)
    raw.sock.sendall(_poll_request(session, 20_000))
    time.sleep(0.2)  # the poll parks on the loop (an answer now would be a bug)
    _start(api, "parked-1")
    answer = raw.response()
    assert _status(answer) == 200
    task = _body(answer)
    assert (task["execution_id"], task["step_id"]) == ("parked-1", "s0")
    # A result carrying a poll that parks, answered by the next task.
    poll = {"worker_session_id": session, "wait_ms": 20_000}
    raw.sock.sendall(
        _request("/v1/tasks/complete", {"token": task["token"], "output": {"i": 1}, "poll": poll})
    )
    answer = raw.response()
    assert _body(answer)["task"]["step_id"] == "s1"
    _finish(raw, session, _body(answer)["task"])


def test_a_parked_poll_expires_after_its_wait(server: ServerProcess) -> None:
    session = _register(server.http(TOKEN), "expiring")
    raw = Raw(server)
    _on_loop(raw, session)
    started = time.monotonic()
    answer = raw.request("/v1/workers/poll", {"worker_session_id": session, "wait_ms": 400})
    waited = time.monotonic() - started
    assert _status(answer) == 204
    assert 0.35 < waited < 5
    poll = {"worker_session_id": session, "wait_ms": 300}
    answer = raw.request("/v1/tasks/complete", {"token": "gone", "poll": poll})
    assert orjson.loads(answer.partition(b"\r\n\r\n")[2])["task"] is None
    raw.close()


def test_a_worker_that_hangs_up_mid_poll_takes_no_task(server: ServerProcess) -> None:
    api = server.http(TOKEN)
    session = _register(api, "hangup")
    raw = Raw(server)
    _on_loop(raw, session)
    raw.sock.sendall(_poll_request(session, 30_000))
    time.sleep(0.2)
    raw.close()  # the worker leaves while its poll waits on the loop
    time.sleep(0.2)
    _start(api, "hangup-1")
    other = Raw(server)
    other_session = _register(api, "hangup-other")
    started = time.monotonic()
    task = _body(
        other.request("/v1/workers/poll", {"worker_session_id": other_session, "wait_ms": 10_000})
    )
    assert (task["execution_id"], task["step_id"], task["attempt"]) == ("hangup-1", "s0", 1)
    assert time.monotonic() - started < 5
    _finish(other, other_session, task)


def test_a_task_whose_answer_cannot_be_written_is_redelivered(server: ServerProcess) -> None:
    """The worker hangs up after its result-then-poll was read: the task the
    poll takes meets a closed connection and goes to another worker at once,
    as its second attempt, not after a session timeout."""
    api = server.http(TOKEN)
    session = _register(api, "undelivered")
    raw = Raw(server)
    _on_loop(raw, session)
    _start(api, "undelivered-1")
    task = _body(raw.request("/v1/workers/poll", {"worker_session_id": session, "wait_ms": 5000}))
    poll = {"worker_session_id": session, "wait_ms": 30_000}
    # Report the last step but one, and leave before the next task comes.
    raw.sock.sendall(
        _request(
            "/v1/tasks/complete",
            {"token": task["token"], "output": {"i": 1}, "poll": {**poll, "wait_ms": 0}},
        )
    )
    task = _body(raw.response())["task"]
    raw.sock.sendall(
        _request("/v1/tasks/complete", {"token": task["token"], "output": {"i": 2}, "poll": poll})
    )
    raw.sock.shutdown(socket.SHUT_WR)
    raw.close()
    other_session = _register(api, "undelivered-other")
    other = Raw(server)
    found = _body(
        other.request("/v1/workers/poll", {"worker_session_id": other_session, "wait_ms": 10_000})
    )
    assert (found["execution_id"], found["step_id"]) == ("undelivered-1", "s2")
    _finish(other, other_session, found)
    wait_until(
        lambda: api.get("/v1/executions/undelivered-1").body["status"] == "COMPLETED",
        10,
        "the execution completes",
    )


@pytest.mark.parametrize("mode", MODES)
def test_stopping_closes_loop_connections_and_answers_parked_polls(
    tmp_path: Path, mode: str
) -> None:
    proc = _server(tmp_path / "stop.db", mode=mode)
    try:
        api = proc.http(TOKEN)
        assert api.post("/v1/workflows", server_ir.chain()).status == 201
        session = _register(api, "stopping")
        idle, parked = Raw(proc), Raw(proc)
        _on_loop(idle, session)
        _on_loop(parked, session)
        parked.sock.sendall(_poll_request(session, 60_000))
        time.sleep(0.2)
        started = time.monotonic()
        assert proc.stop() == 0
        assert time.monotonic() - started < 10
        answer = parked.response()
        assert _status(answer) == 204 and b"Connection: close" in answer, proc.log()
        assert parked.closed() and idle.closed()
        idle.close()
        parked.close()
    finally:
        proc.stop()


def _front_pid(proc: ServerProcess) -> int:
    """The pid of the server's front process (a grandchild of `orbit server`)."""
    assert proc.proc is not None
    family = {proc.proc.pid}
    for _ in range(3):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            parent = int(stat[stat.rindex(")") + 2 :].split()[1])
            if parent in family:
                if b"orbit_server.front" in cmdline:
                    return int(entry.name)
                family.add(int(entry.name))
    raise AssertionError("no front process")


def test_a_server_whose_front_process_dies_serves_on(tmp_path: Path) -> None:
    """The front is killed while a poll waits on it: that worker's
    connection closes, and the server serves workers and clients on its
    thread path from then on; the task the killed connection did not take
    goes to the next worker at once."""
    proc = _server(tmp_path / "front.db", mode="front")
    try:
        api = proc.http(TOKEN)
        assert api.post("/v1/workflows", server_ir.chain()).status == 201
        session = _register(api, "front-dies")
        parked = Raw(proc)
        _on_loop(parked, session)
        parked.sock.sendall(_poll_request(session, 60_000))
        time.sleep(0.2)
        os.kill(_front_pid(proc), signal.SIGKILL)
        assert parked.closed()
        proc.wait_for_log("the front process ended")
        parked.close()
        other = Raw(proc)
        other_session = _register(api, "front-dies-other")
        _on_loop(other, other_session)
        _start(api, "front-dies-1")
        task = _body(
            other.request(
                "/v1/workers/poll", {"worker_session_id": other_session, "wait_ms": 10_000}
            )
        )
        assert (task["execution_id"], task["step_id"]) == ("front-dies-1", "s0")
        _finish(other, other_session, task)
        wait_until(
            lambda: api.get("/v1/executions/front-dies-1").body["status"] == "COMPLETED",
            10,
            "the execution completes",
        )
        assert proc.stop() == 0
    finally:
        proc.stop()


def _request(path: str, body: Any) -> bytes:
    data = orjson.dumps(body)
    return (
        b"POST %s HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (path.encode(), WORKER_TOKEN.encode(), len(data), data)
    )


def _poll_request(session: str, wait_ms: int) -> bytes:
    return _request("/v1/workers/poll", {"worker_session_id": session, "wait_ms": wait_ms})


def _finish(raw: Raw, session: str, first: dict[str, Any]) -> None:
    """Completes the chain the task belongs to."""
    task: dict[str, Any] | None = first
    while task is not None:
        poll = {"worker_session_id": session, "wait_ms": 2000}
        output = {"i": task["input"]["i"] + 1}
        answer = raw.request(
            "/v1/tasks/complete", {"token": task["token"], "output": output, "poll": poll}
        )
        task = _body(answer)["task"]
    raw.close()
