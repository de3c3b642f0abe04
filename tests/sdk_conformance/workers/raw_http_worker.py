"""A worker that speaks the HTTP/JSON worker protocol directly, with the
standard library and no SDK: the suite's reference client, and a readable
example of chapter 68's rules for implementers (interface: ../README.md).

One poll slot; a heartbeat thread that sets the cancellation of the attempt
it holds; results retried on connection errors and 5xx with jittered
backoff; registration again on UNKNOWN_SESSION; SIGTERM or SIGINT stops
polling, lets the running attempt finish and report, then unregisters.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

SERVER = os.environ.get("ORBIT_SERVER", "http://127.0.0.1:7233").rstrip("/")
WORKER_ID = os.environ["CONF_WORKER_ID"]
POLL_WAIT_MS = int(os.environ.get("CONF_POLL_WAIT_MS", "5000"))
CONTRACTS = [
    {"task_name": name, "contract_version": "1.0.0"}
    for name in (
        "conf.echo",
        "conf.flaky",
        "conf.fail_permanent",
        "conf.bad_output",
        "conf.sleep",
        "conf.sleep_until_cancelled",
    )
]
RESULT_RETRY_WINDOW_S = 600.0


class CallError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code} ({status}): {message}")
        self.status = status
        self.code = code


def log(message: str) -> None:
    print(f"[raw] {message}", file=sys.stderr, flush=True)


def call(path: str, body: dict[str, Any], timeout: float = 15.0) -> Any:
    """POSTs body; the decoded answer, None for 204, CallError otherwise
    (status 0: no answer)."""
    request = urllib.request.Request(
        SERVER + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json", "user-agent": "orbit-raw-http/1"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            raw = reply.read()
            return json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            err = json.loads(raw)["error"]
            raise CallError(error.code, err["code"], err["message"]) from None
        except (ValueError, KeyError, TypeError):
            raise CallError(error.code, "HTTP_ERROR", raw.decode(errors="replace")) from None
    except OSError as error:
        raise CallError(0, "CONNECTION", str(error)) from None


class Backoff:
    def __init__(self) -> None:
        self.ceiling = 0.2

    def next(self) -> float:
        delay, self.ceiling = self.ceiling * random.random(), min(self.ceiling * 2, 5.0)
        return delay


class RawWorker:
    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.session = ""
        self.interval_s = 5.0
        self.cancelled: dict[str, threading.Event] = {}

    def register(self, lost: str | None = None) -> None:
        with self.lock:
            if lost is not None and self.session != lost:
                return  # another thread registered already
            backoff = Backoff()
            while True:
                try:
                    answer = call(
                        "/v1/workers/register",
                        {
                            "worker_id": WORKER_ID,
                            "runtime": "raw",
                            "sdk": "orbit-raw-http/1",
                            "contracts": CONTRACTS,
                        },
                    )
                    break
                except CallError as error:
                    if lost is None and error.status and error.status < 500:
                        raise
                    delay = backoff.next()
                    log(f"registration failed: {error}; retrying in {delay:.1f}s")
                    time.sleep(delay)
            self.session = answer["worker_session_id"]
            self.interval_s = answer["heartbeat_interval_ms"] / 1000
            log(f"worker {WORKER_ID} registered ({len(CONTRACTS)} tasks)")
            for warning in answer.get("warnings", []):
                log(f"runtime: {warning}")

    def heartbeat_loop(self) -> None:
        while not self.stopping.wait(self.interval_s):
            session = self.session
            try:
                answer = call("/v1/workers/heartbeat", {"worker_session_id": session})
            except CallError as error:
                if error.code == "UNKNOWN_SESSION":
                    self.register(session)
                else:
                    log(f"heartbeat failed: {error}")
                continue
            for token in answer.get("cancel", []):
                with self.lock:
                    flag = self.cancelled.get(token)
                if flag is not None:
                    flag.set()

    def poll_loop(self) -> None:
        backoff = Backoff()
        while not self.stopping.is_set():
            session = self.session
            try:
                task = call(
                    "/v1/workers/poll",
                    {"worker_session_id": session, "wait_ms": POLL_WAIT_MS},
                    timeout=POLL_WAIT_MS / 1000 + 15,
                )
            except CallError as error:
                if error.code == "UNKNOWN_SESSION":
                    self.register(session)
                else:
                    delay = backoff.next()
                    log(f"poll failed: {error}; retrying in {delay:.1f}s")
                    self.stopping.wait(delay)
                continue
            backoff = Backoff()
            if task is None:
                continue
            if self.stopping.is_set():
                return  # unregistering hands it back
            self.execute(task)

    def execute(self, task: dict[str, Any]) -> None:
        flag = threading.Event()
        with self.lock:
            self.cancelled[task["token"]] = flag
        try:
            path, body = run(task, flag)
        finally:
            with self.lock:
                self.cancelled.pop(task["token"], None)
        self.deliver(path, body)

    def deliver(self, path: str, body: dict[str, Any]) -> None:
        backoff = Backoff()
        give_up = time.monotonic() + RESULT_RETRY_WINDOW_S
        while True:
            try:
                answer = call(path, body)
            except CallError as error:
                if error.status != 0 and error.status < 500:
                    log(f"result refused: {error}")
                    return
                delay = backoff.next()
                if time.monotonic() + delay > give_up:
                    log(f"result not delivered: {error}")
                    return
                log(f"cannot deliver the result: {error}; retrying in {delay:.1f}s")
                time.sleep(delay)
                continue
            if not answer.get("accepted"):
                log(f"result not accepted: {answer.get('reason')}")
            return

    def unregister(self) -> None:
        try:
            call("/v1/workers/unregister", {"worker_session_id": self.session})
        except CallError as error:
            if error.code != "UNKNOWN_SESSION":
                log(f"unregister failed: {error}")
                return
        log(f"worker {WORKER_ID} unregistered")


def event(name: str, task: dict[str, Any]) -> None:
    print(f"CONF {name} {task['execution_id']} {task['step_id']}", file=sys.stderr, flush=True)


def failure(
    task: dict[str, Any], code: str, message: str, retryable: bool, details: Any = None
) -> tuple[str, dict[str, Any]]:
    body: dict[str, Any] = {
        "token": task["token"],
        "error_code": code,
        "error_message": message,
        "retryable": retryable,
    }
    if details is not None:
        body["details"] = details
    return "/v1/tasks/fail", body


def run(task: dict[str, Any], cancelled: threading.Event) -> tuple[str, dict[str, Any]]:
    """The conf.* handlers: the report (path and body) for one attempt."""
    name, data, attempt = task["task_name"], task.get("input") or {}, task["attempt"]
    event("start", task)
    output: dict[str, Any]
    if name == "conf.echo":
        output = {"text": data["text"]}
    elif name == "conf.flaky":
        if attempt < data["succeed_on"]:
            return failure(task, "CONF_RETRYABLE", f"attempt {attempt} fails", True)
        output = {"attempt": attempt}
    elif name == "conf.fail_permanent":
        return failure(
            task, "CONF_PERMANENT", "permanent failure", False, {"source": "conformance"}
        )
    elif name == "conf.bad_output":
        output = {"wrong": True}
    elif name == "conf.sleep":
        time.sleep(data["ms"] / 1000)
        event("done", task)
        output = {"slept": data["ms"]}
    elif name == "conf.sleep_until_cancelled":
        end = time.monotonic() + data["seconds"]
        deadline = task.get("deadline_ms")
        while time.monotonic() < end:
            if cancelled.wait(0.05):
                event("cancelled", task)
                return failure(task, "CANCELLED", "cancelled by the runtime", False)
            if deadline is not None and time.time() * 1000 >= deadline:
                event("deadline", task)
                return failure(task, "CONF_DEADLINE", "the attempt's deadline passed", False)
        output = {"waited": True}
    else:
        return failure(task, "UNKNOWN_TASK", f"no handler for {name}", True)
    return "/v1/tasks/complete", {"token": task["token"], "output": output}


def main() -> None:
    worker = RawWorker()
    worker.register()
    signal.signal(signal.SIGTERM, lambda *_: worker.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: worker.stopping.set())
    threading.Thread(target=worker.heartbeat_loop, daemon=True).start()
    poller = threading.Thread(target=worker.poll_loop, daemon=True)
    poller.start()
    worker.stopping.wait()
    log("shutting down: stopped polling")
    # An open long poll ends within POLL_WAIT_MS; a running attempt first
    # finishes and reports.
    poller.join()
    worker.unregister()


if __name__ == "__main__":
    main()
