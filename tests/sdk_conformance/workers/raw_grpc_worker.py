"""A worker that speaks the gRPC binding of the worker protocol directly, with
grpcio and the stubs generated from protocol/ (orbit_server.grpc_proto) and
no SDK: the suite's raw gRPC client (interface: ../README.md).

The same design as raw_http_worker.py, with the binding's differences: the
runtime's gRPC address comes from CONF_GRPC_ADDR; an ORBIT error is a status
whose code sits in the `orbit-error-code` trailing metadata (a status without
it is the transport's: no answer); PollTask answers an empty token when no
task came; input, output and details are `google.protobuf.Value`s, whose
numbers are doubles (whole numbers come back as ints, through the
runtime's own conversion, orbit_server.grpc_values). The channel reconnects quickly, so a result outlives a runtime
restart without waiting out grpcio's default reconnection backoff (which
grows to two minutes).
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
from typing import Any

import grpc

from orbit_server.grpc_proto import worker_pb2 as pb
from orbit_server.grpc_proto import worker_pb2_grpc as pb_grpc
from orbit_server.grpc_values import from_value, to_value

GRPC_ADDR = os.environ.get("CONF_GRPC_ADDR", "127.0.0.1:7234")
WORKER_ID = os.environ["CONF_WORKER_ID"]
POLL_WAIT_MS = int(os.environ.get("CONF_POLL_WAIT_MS", "5000"))
TASKS = (
    "conf.echo",
    "conf.flaky",
    "conf.fail_permanent",
    "conf.bad_output",
    "conf.sleep",
    "conf.sleep_until_cancelled",
)
RESULT_RETRY_WINDOW_S = 600.0
CALL_TIMEOUT_S = 15.0

Report = pb.CompleteTaskRequest | pb.FailTaskRequest


class CallError(Exception):
    """A refused or failed call; `code` is the ORBIT code, or "" when the
    runtime did not answer (the transport's status)."""

    def __init__(self, status: grpc.StatusCode, code: str, message: str) -> None:
        super().__init__(f"{code or status.name}: {message}")
        self.status = status
        self.code = code


def log(message: str) -> None:
    print(f"[raw-grpc] {message}", file=sys.stderr, flush=True)


def call(method: Any, request: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
    """`method(request)`; its answer, or CallError."""
    try:
        return method(request, timeout=timeout)
    except grpc.RpcError as error:
        code = ""
        for key, value in error.trailing_metadata() or ():
            if key == "orbit-error-code":
                code = str(value)
        raise CallError(error.code(), code, str(error.details())) from None


class Backoff:
    def __init__(self) -> None:
        self.ceiling = 0.2

    def next(self) -> float:
        delay, self.ceiling = self.ceiling * random.random(), min(self.ceiling * 2, 5.0)
        return delay


class RawGrpcWorker:
    def __init__(self, channel: grpc.Channel) -> None:
        self.stub = pb_grpc.WorkerServiceStub(channel)
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.session = ""
        self.interval_s = 5.0
        self.cancelled: dict[str, threading.Event] = {}

    def register(self, lost: str | None = None) -> None:
        with self.lock:
            if lost is not None and self.session != lost:
                return  # another thread registered already
            request = pb.RegisterWorkerRequest(
                worker_id=WORKER_ID,
                runtime="raw",
                sdk="orbit-raw-grpc/1",
                contracts=[pb.TaskContract(task_name=n, contract_version="1.0.0") for n in TASKS],
            )
            backoff = Backoff()
            while True:
                try:
                    answer = call(self.stub.RegisterWorker, request)
                    break
                except CallError as error:
                    if lost is None and error.code and not transient(error):
                        raise
                    delay = backoff.next()
                    log(f"registration failed: {error}; retrying in {delay:.1f}s")
                    time.sleep(delay)
            self.session = answer.worker_session_id
            self.interval_s = answer.heartbeat_interval_ms / 1000
            log(f"worker {WORKER_ID} registered ({len(TASKS)} tasks)")
            for warning in answer.warnings:
                log(f"runtime: {warning}")

    def heartbeat_loop(self) -> None:
        while not self.stopping.wait(self.interval_s):
            session = self.session
            try:
                answer = call(self.stub.Heartbeat, pb.HeartbeatRequest(worker_session_id=session))
            except CallError as error:
                if error.code == "UNKNOWN_SESSION":
                    self.register(session)
                else:
                    log(f"heartbeat failed: {error}")
                continue
            for token in answer.cancel:
                with self.lock:
                    flag = self.cancelled.get(token)
                if flag is not None:
                    flag.set()

    def poll_loop(self) -> None:
        backoff = Backoff()
        while not self.stopping.is_set():
            session = self.session
            request = pb.PollTaskRequest(worker_session_id=session, wait_ms=POLL_WAIT_MS)
            try:
                task = call(self.stub.PollTask, request, timeout=POLL_WAIT_MS / 1000 + 15)
            except CallError as error:
                if error.code == "UNKNOWN_SESSION":
                    self.register(session)
                else:
                    delay = backoff.next()
                    log(f"poll failed: {error}; retrying in {delay:.1f}s")
                    self.stopping.wait(delay)
                continue
            backoff = Backoff()
            if not task.token:
                continue  # the wait ended without a task
            if self.stopping.is_set():
                return  # unregistering hands it back
            self.execute(task)

    def execute(self, task: pb.ExecuteTaskRequest) -> None:
        flag = threading.Event()
        with self.lock:
            self.cancelled[task.token] = flag
        try:
            report = run(task, flag)
        finally:
            with self.lock:
                self.cancelled.pop(task.token, None)
        self.deliver(report)

    def deliver(self, report: Report) -> None:
        if isinstance(report, pb.CompleteTaskRequest):
            method = self.stub.CompleteTask
        else:
            method = self.stub.FailTask
        backoff = Backoff()
        give_up = time.monotonic() + RESULT_RETRY_WINDOW_S
        while True:
            try:
                answer = call(method, report)
            except CallError as error:
                if not transient(error):
                    log(f"result refused: {error}")
                    return
                delay = backoff.next()
                if time.monotonic() + delay > give_up:
                    log(f"result not delivered: {error}")
                    return
                log(f"cannot deliver the result: {error}; retrying in {delay:.1f}s")
                time.sleep(delay)
                continue
            if not answer.accepted:
                log(f"result not accepted: {answer.reason}")
            return

    def unregister(self) -> None:
        try:
            call(
                self.stub.UnregisterWorker,
                pb.UnregisterWorkerRequest(worker_session_id=self.session),
            )
        except CallError as error:
            if error.code != "UNKNOWN_SESSION":
                log(f"unregister failed: {error}")
                return
        log(f"worker {WORKER_ID} unregistered")


def transient(error: CallError) -> bool:
    """Worth retrying: no answer from the runtime, or its 5xx statuses."""
    if not error.code:
        return True
    return error.status in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL)


def event(name: str, task: pb.ExecuteTaskRequest) -> None:
    print(f"CONF {name} {task.execution_id} {task.step_id}", file=sys.stderr, flush=True)


def failure(
    task: pb.ExecuteTaskRequest, code: str, message: str, retryable: bool, details: Any = None
) -> pb.FailTaskRequest:
    report = pb.FailTaskRequest(
        token=task.token, error_code=code, error_message=message, retryable=retryable
    )
    if details is not None:
        report.details.CopyFrom(to_value(details))
    return report


def run(task: pb.ExecuteTaskRequest, cancelled: threading.Event) -> Report:
    """The conf.* handlers: the report of one attempt."""
    name, attempt = task.task_name, task.attempt
    data: Any = from_value(task.input, "input") if task.HasField("input") else {}  # JSON
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
        deadline = task.deadline_ms if task.HasField("deadline_ms") else None
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
    report = pb.CompleteTaskRequest(token=task.token)
    report.output.CopyFrom(to_value(output))
    return report


def main() -> None:
    channel = grpc.insecure_channel(
        GRPC_ADDR,
        options=[
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ],
    )
    worker = RawGrpcWorker(channel)
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
    channel.close()


if __name__ == "__main__":
    main()
