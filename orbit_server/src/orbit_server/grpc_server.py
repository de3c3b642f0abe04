"""The worker protocol's gRPC binding: `orbit.worker.v1.WorkerService` (chapter 68).

`orbit server --grpc-addr` (ORBIT_GRPC_ADDR) starts a gRPC server in the
worker process, beside the HTTP app and over the same engine: grpcio's core
with our own unary loop on it (`grpc_unary.UnaryServer`, which says why).
Each RPC authenticates its caller with the HTTP API's `auth.Credentials`
(the bearer token in the `authorization` metadata, else the verified client
certificate under mutual TLS), then makes the same `WorkerCalls` call as
the HTTP route: this module only translates messages and errors.

The binding's own rules, as the chapter lists them:
- PollTask answers an ExecuteTaskRequest with an empty token when no task
  came, and a wait_ms of 0 means the default wait (20 s);
- FailTask's retryable is false when unset (proto3 has no absent bool);
- numbers cross as doubles (`grpc_values`);
- an error is a status whose message is `CODE: message`, with the code in
  the `orbit-error-code` trailing metadata, except for a missing or invalid
  credential and an empty token or error_code (the message only). The
  status follows the code's HTTP status (`errors.STATUS`) through `_STATUS`.
- a client identity may not use the binding at all (PERMISSION_DENIED).

The `result-then-poll` extension (worker_calls.py) is the ReportThenPoll
RPC: a CompleteTaskRequest or FailTaskRequest with a PollTaskRequest, made
as the two calls would be in turn. A refused result is the call's error
status (no poll is made); otherwise the answer has the result's ack and the
task (an empty token when none came), or `poll_error` when the poll could
not be made. A server started without the extension does not serve the RPC
(UNIMPLEMENTED, as a server that never knew it).

The caller is authenticated from the call's metadata before its message
is read (`WorkerService.admit`, run by `grpc_unary` on the call's arrival):
a call without a valid credential is refused without the server reading,
let alone decoding, what it sends.

Requests are decoded here (`_decoder`): a message that does not parse is
the caller's error (INVALID_ARGUMENT, where grpcio's own server answers
INTERNAL); and a request larger than --max-body is PAYLOAD_TOO_LARGE with
its metadata (grpc core's own limit, set to twice that, refuses anything
larger still, with RESOURCE_EXHAUSTED). Responses are serialized here
too: a handler gets and answers bytes.

TLS uses the HTTP port's files and rules. With --tls-client-ca a client
certificate is optional, as on the HTTP port: one that is presented must
verify and then identifies its entry of the workers file, and a client
without one authenticates with its token. grpcio cannot offer that mode,
so the handshake is then `grpc_tls.TlsFront`'s, in front of a plaintext
gRPC server on the loopback; a bearer token sent with a certificate still
decides who the caller is. There is no server reflection.

Transport: grpc core's EventEngine listener and endpoints read and write
each connection on threads of their own, which wake the thread polling the
completion queue for every event; the older polling engine does that work
in the polling thread itself. On the one CPU the server's threads share,
the older engine costs less per call (with grpcio's own server and an
empty handler, 0.20-0.25 ms of CPU per call against 0.26-0.31 ms), so
`GRPC_EXPERIMENTS` turns the two EventEngine experiments off unless the
environment sets it. A grpcio that no longer knows them logs "Unknown
experiment" once at start (tests/test_server_grpc.py checks it does not).
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

# Read by grpc core once, when it starts; set before grpc is imported. See
# the module docstring ("Transport"); a value set by the user wins.
os.environ.setdefault(
    "GRPC_EXPERIMENTS", "-event_engine_listener,-event_engine_for_all_other_endpoints"
)
import attrs
import grpc
from google.protobuf.message import DecodeError, Message

from orbit_core.errors import OrbitError
from orbit_server import tls
from orbit_server.auth import ANYONE, Caller, Credentials, Kind
from orbit_server.call_threads import CallThreads
from orbit_server.cluster import NotLeader
from orbit_server.config import Address, ServerConfig
from orbit_server.contract_check import presented
from orbit_server.errors import STATUS
from orbit_server.grpc_proto import worker_pb2 as pb
from orbit_server.grpc_tls import TlsFront
from orbit_server.grpc_unary import Call, Handler, Reply, UnaryServer
from orbit_server.grpc_values import from_value, to_value
from orbit_server.identities import Identities
from orbit_server.logs import logger
from orbit_server.worker_calls import RESULT_THEN_POLL, NextPoll, ThenPolled, WorkerCalls

SERVICE = "orbit.worker.v1.WorkerService"
ERROR_CODE_KEY = "orbit-error-code"
# A standby's refusal names the leader's advertised address here too.
LEADER_KEY = "x-orbit-leader"
# How long a stopping server lets running calls finish (a poll is drained
# at once by the engine, so only short calls remain).
STOP_GRACE_S = 10.0
# The RPCs that may wait for a task.
_WAITING = ("/PollTask", "/ReportThenPoll")

_log = logger()
_HTTP_TO_GRPC = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    409: grpc.StatusCode.FAILED_PRECONDITION,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    503: grpc.StatusCode.UNAVAILABLE,
}


def status_of(code: str) -> grpc.StatusCode:
    """The gRPC status of an ORBIT error code: through its HTTP status."""
    return _HTTP_TO_GRPC.get(STATUS.get(code, 500), grpc.StatusCode.INTERNAL)


class _Failure(Exception):
    """An error answered as a status; `tagged`: with the metadata."""

    def __init__(self, code: str, message: str, *, tagged: bool = True) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.tagged = tagged


_M = TypeVar("_M", bound=Message)


@attrs.frozen
class _Admitted:
    """What `admit` found for a call: its caller and the calls to make."""

    caller: Caller
    calls: WorkerCalls


# An RPC: request, caller, the serving engine's calls, the call -> response.
_Method = Callable[[Any, Caller, WorkerCalls, Call], Message]


def _decoder(kind: type[_M], max_body: int) -> Callable[[bytes], _M]:
    name = kind.DESCRIPTOR.name

    def decode(data: bytes) -> _M:
        if len(data) > max_body:
            raise _Failure(
                "PAYLOAD_TOO_LARGE",
                f"{name} is {len(data)} bytes; the limit is {max_body} (--max-body)",
            )
        try:
            message: _M = kind.FromString(data)
        except DecodeError as exc:
            raise _Failure("INVALID_REQUEST", f"malformed {name}: {exc}") from None
        return message

    return decode


class WorkerService:
    """The six RPCs over `WorkerCalls`; `handlers()` is what the server
    serves, by method path."""

    def __init__(
        self,
        calls: WorkerCalls | Callable[[], WorkerCalls],
        credentials: Credentials,
        max_body: int,
        certificate_names: Callable[[Call], list[str] | None] | None = None,
        extensions: tuple[str, ...] = (RESULT_THEN_POLL,),
    ) -> None:
        # The calls of the engine serving now (a cluster node changes its
        # engine as it gains and loses the lead; a standby raises NotLeader).
        self._source: Callable[[], WorkerCalls] = calls if callable(calls) else lambda: calls
        self._credentials = credentials
        self._max_body = max_body
        # The verified client certificate's names (mutual TLS only).
        self._certificate_names = certificate_names
        self._extensions = extensions

    def handlers(self) -> dict[str, Handler]:
        methods: dict[str, tuple[_Method, type[Message]]] = {
            "RegisterWorker": (self._register, pb.RegisterWorkerRequest),
            "Heartbeat": (self._heartbeat, pb.HeartbeatRequest),
            "PollTask": (self._poll, pb.PollTaskRequest),
            "CompleteTask": (self._complete, pb.CompleteTaskRequest),
            "FailTask": (self._fail, pb.FailTaskRequest),
            "UnregisterWorker": (self._unregister, pb.UnregisterWorkerRequest),
        }
        if RESULT_THEN_POLL in self._extensions:
            methods["ReportThenPoll"] = (self._report_then_poll, pb.ReportThenPollRequest)
        return {
            f"/{SERVICE}/{name}": self._rpc(call, _decoder(kind, self._max_body))
            for name, (call, kind) in methods.items()
        }

    def admit(self, rpc: Call) -> Reply | None:
        """Before the call's message is read: a standby's refusal (before
        authentication, as over HTTP), then the caller authenticated from
        the metadata. A refusal, or None with the caller kept on the call."""
        try:
            calls = self._source()
            rpc.principal = _Admitted(self._caller(rpc), calls)
        except NotLeader as exc:
            where = ((LEADER_KEY, exc.leader_addr),) if exc.leader_addr else ()
            return _refusal(exc.code, exc.message, extra=where)
        except OrbitError as exc:
            return _refusal(exc.code, exc.message, tagged=exc.code != "UNAUTHENTICATED")
        return None

    def _rpc(self, call: _Method, decode: Callable[[bytes], Message]) -> Handler:
        def rpc(rpc: Call, data: bytes) -> Reply:
            admitted = rpc.principal
            assert isinstance(admitted, _Admitted), "the server runs WorkerService.admit first"
            try:
                request = decode(data)
                answer: bytes = call(
                    request, admitted.caller, admitted.calls, rpc
                ).SerializeToString()
            except _Failure as failure:
                return _refusal(failure.code, failure.message, tagged=failure.tagged)
            except OrbitError as exc:
                return _refusal(exc.code, exc.message, tagged=exc.code != "UNAUTHENTICATED")
            except Exception as exc:
                _log.error("gRPC call failed", exc_info=exc)
                return _refusal("INTERNAL", f"internal error: {type(exc).__name__}")
            return Reply(answer)

        return rpc

    def _caller(self, rpc: Call) -> Caller:
        """The HTTP gate's authentication, from the call's metadata and
        certificate; a client identity is refused here, since every RPC is
        a worker call."""
        credentials = self._credentials
        if not credentials.required:
            return ANYONE
        authorization = None
        for key, value in rpc.metadata:
            if key == "authorization":
                authorization = value if isinstance(value, str) else None
                break
        certified = None
        if self._certificate_names is not None and authorization is None:
            certified = credentials.certified(self._certificate_names(rpc))
        caller = credentials.caller(authorization, certified)
        if caller.kind is Kind.CLIENT:
            assert caller.identity is not None
            raise OrbitError(
                f"client `{caller.identity.id}` may not use the worker protocol", "FORBIDDEN"
            )
        return caller

    # ---- the RPCs: message in, `WorkerCalls`, message out

    def _register(
        self, request: pb.RegisterWorkerRequest, who: Caller, calls: WorkerCalls, rpc: Call
    ) -> pb.RegisterWorkerResponse:
        contracts = [
            {"task_name": c.task_name, "contract_version": c.contract_version}
            for c in request.contracts
        ]
        hashes = [
            found
            for i, c in enumerate(request.contracts)
            if c.contract_hash
            and (found := presented(_hashed_entry(c), f"contracts[{i}]")) is not None
        ]
        answer = calls.register(
            who,
            request.worker_id,
            request.runtime,
            contracts,
            request.sdk or None,
            presented=hashes,
            asked=list(request.extensions) or None,
        )
        return pb.RegisterWorkerResponse(
            accepted=answer["accepted"],
            worker_session_id=answer["worker_session_id"],
            heartbeat_interval_ms=answer["heartbeat_interval_ms"],
            session_timeout_ms=answer["session_timeout_ms"],
            warnings=answer["warnings"],
            extensions=answer.get("extensions", []),
        )

    def _heartbeat(
        self, request: pb.HeartbeatRequest, who: Caller, calls: WorkerCalls, rpc: Call
    ) -> pb.HeartbeatResponse:
        answer = calls.heartbeat(who, request.worker_session_id)
        return pb.HeartbeatResponse(accepted=answer["accepted"], cancel=answer["cancel"])

    def _poll(
        self, request: pb.PollTaskRequest, who: Caller, calls: WorkerCalls, rpc: Call
    ) -> pb.ExecuteTaskRequest:
        task = calls.poll(who, request.worker_session_id, request.wait_ms or None, rpc.is_active)
        if task is None:
            return pb.ExecuteTaskRequest()
        # As over HTTP: a task whose worker hung up is redelivered now, not
        # after the session timeout.
        rpc.on_undelivered(functools.partial(calls.undelivered, task))
        return _assignment(task)

    def _complete(
        self, request: pb.CompleteTaskRequest, who: Caller, calls: WorkerCalls, rpc: Call
    ) -> pb.TaskResultAck:
        if not request.token:
            return _untagged(lambda: calls.complete(who, "", None))
        output = _json(request, "output")
        return _ack(calls.complete(who, request.token, output))

    def _fail(
        self, request: pb.FailTaskRequest, who: Caller, calls: WorkerCalls, rpc: Call
    ) -> pb.TaskResultAck:
        def fail() -> Mapping[str, Any]:
            return calls.fail(
                who,
                request.token,
                error_code=request.error_code,
                error_message=request.error_message,
                retryable=request.retryable,
                details=_json(request, "details"),
            )

        if not request.token or not request.error_code:
            return _untagged(fail)
        return _ack(fail())

    def _report_then_poll(
        self, request: pb.ReportThenPollRequest, who: Caller, calls: WorkerCalls, rpc: Call
    ) -> pb.ReportThenPollResponse:
        which = request.WhichOneof("result")
        if which == "complete":
            done = request.complete
        elif which == "fail":
            failed = request.fail
        else:
            raise _Failure("INVALID_REQUEST", "ReportThenPollRequest carries no result")
        if not request.HasField("poll"):
            if which == "complete":
                return pb.ReportThenPollResponse(ack=self._complete(done, who, calls, rpc))
            return pb.ReportThenPollResponse(ack=self._fail(failed, who, calls, rpc))
        poll = NextPoll(request.poll.worker_session_id, request.poll.wait_ms or None)

        # The result and its poll, as one call of the engine (worker_calls.py).
        def report() -> tuple[Mapping[str, Any], ThenPolled]:
            if which == "complete":
                output = _json(done, "output") if done.token else None
                return calls.complete_then_poll(who, done.token, output, poll, rpc.is_active)
            return calls.fail_then_poll(
                who,
                failed.token,
                error_code=failed.error_code,
                error_message=failed.error_message,
                retryable=failed.retryable,
                details=_json(failed, "details"),
                poll=poll,
                connected=rpc.is_active,
            )

        if which == "complete":
            untagged = not done.token
        else:
            untagged = not failed.token or not failed.error_code
        try:
            answer, found = report()
        except OrbitError as exc:
            if not untagged:
                raise
            # As `_untagged`: the refusal of an empty token or error_code.
            raise _Failure(exc.code, exc.message, tagged=False) from None
        ack = _ack(answer)
        if found.error is not None:
            error = found.error
            return pb.ReportThenPollResponse(ack=ack, poll_error=f"{error.code}: {error.message}")
        task = found.task
        if task is None:
            return pb.ReportThenPollResponse(ack=ack, task=pb.ExecuteTaskRequest())
        rpc.on_undelivered(functools.partial(calls.undelivered, task))
        return pb.ReportThenPollResponse(ack=ack, task=_assignment(task))

    def _unregister(
        self, request: pb.UnregisterWorkerRequest, who: Caller, calls: WorkerCalls, rpc: Call
    ) -> pb.UnregisterWorkerResponse:
        answer = calls.unregister(who, request.worker_session_id)
        return pb.UnregisterWorkerResponse(accepted=answer["accepted"])


def _untagged(call: Callable[[], Mapping[str, Any]]) -> pb.TaskResultAck:
    """An empty token or error_code: the engine refuses it, and the
    chapter has that refusal carry its code in the message only."""
    try:
        return _ack(call())
    except OrbitError as exc:
        raise _Failure(exc.code, exc.message, tagged=False) from None


def _refusal(
    code: str, message: str, *, tagged: bool = True, extra: tuple[tuple[str, str], ...] = ()
) -> Reply:
    """The status answering an error: `CODE: message`, and the code in the
    trailing metadata when `tagged` (with `extra` entries after it)."""
    return Reply(
        None,
        status_of(code),
        f"{code}: {message}",
        (((ERROR_CODE_KEY, code),) if tagged else ()) + extra,
    )


def _json(request: Message, field: str) -> Any:
    if not request.HasField(field):
        return None
    try:
        return from_value(getattr(request, field), field)
    except ValueError as exc:
        raise _Failure("INVALID_REQUEST", str(exc)) from None


def _ack(answer: Mapping[str, Any]) -> pb.TaskResultAck:
    return pb.TaskResultAck(accepted=answer["accepted"], reason=answer.get("reason") or "")


def _assignment(task: Mapping[str, Any]) -> pb.ExecuteTaskRequest:
    message = pb.ExecuteTaskRequest(
        token=task["token"],
        execution_id=task["execution_id"],
        workflow=task["workflow"],
        workflow_version=task["workflow_version"],
        step_id=task["step_id"],
        task_name=task["task_name"],
        contract_version=task["contract_version"],
        input=to_value(task["input"]),
        idempotency_key=task["idempotency_key"],
        attempt=task["attempt"],
        redelivery=task["redelivery"],
        traceparent=task.get("traceparent") or "",
    )
    deadline = task.get("deadline_ms")
    if deadline is not None:
        message.deadline_ms = deadline
    timeout = task.get("timeout_ms")
    if timeout is not None:
        message.timeout_ms = timeout
    return message


class GrpcServer:
    """The gRPC server of one `orbit server` process."""

    def __init__(
        self, config: ServerConfig, calls: WorkerCalls | Callable[[], WorkerCalls]
    ) -> None:
        """`calls`: the engine's worker calls, or what gives the calls of
        the engine serving at the time of each call (a cluster node)."""
        assert config.grpc_addr is not None
        self._config = config
        # One thread per call in progress: long polls each hold one, as on
        # the HTTP side. They have a pool of their own, so that however many
        # polls are parked, results and heartbeats still find a thread (the
        # executors start threads only as calls need them).
        self._polls = CallThreads(config.threads, "orbit-poll")
        self._pool = CallThreads(config.threads, "orbit-grpc")
        options = [
            # A busy port is an error, not a port shared with another server.
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", min(2 * config.max_body, 2**31 - 1)),
        ]
        credentials = Credentials(
            config.token,
            config.worker_token,
            config.identities or Identities(),
            mtls=config.tls_client_ca is not None,
        )
        # Mutual TLS: the handshake is the front's (grpc_tls, which says why).
        self._front: TlsFront | None = None
        names = None
        if config.tls_client_ca is not None:
            assert config.tls_cert is not None
            front = self._front = TlsFront(
                tls.server_context(config.tls_cert, config.tls_key, config.tls_client_ca)
            )
            names = lambda rpc: front.names(rpc.peer())  # noqa: E731
        service = WorkerService(
            calls, credentials, config.max_body, names, config.worker_extensions
        )
        self._server = UnaryServer(
            {
                # A poll (alone or after a result) may park: a thread of its own.
                path: (handler, self._polls if path.endswith(_WAITING) else self._pool)
                for path, handler in service.handlers().items()
            },
            options,
            service.admit,
        )
        self._stopped: threading.Event | None = None
        self.bound: Address | None = None

    def start(self) -> Address:
        """Binds and serves; returns the address bound (its port chosen when
        0 was asked). OSError when the address cannot be bound."""
        addr = self._config.grpc_addr
        assert addr is not None
        target = str(addr)
        front = self._front
        if front is not None:
            port = front.bind(addr)
            target = "127.0.0.1:0"
        try:
            credentials = self._tls() if self._config.tls_cert is not None else None
            bound = self._server.add_port(target, None if front else credentials)
        except RuntimeError as exc:
            raise OSError(str(exc)) from None
        if not bound:
            raise OSError("the address is in use or not available")
        self._server.start()
        if front is not None:
            front.start(bound)
        else:
            port = bound
        self.bound = Address(addr.host, port)
        return self.bound

    def _tls(self) -> grpc.ServerCredentials:
        """grpc core's TLS, without client certificates (with a client CA
        the front does the handshake instead)."""
        config = self._config
        assert config.tls_cert is not None and config.tls_key is not None
        return grpc.ssl_server_credentials(
            [(Path(config.tls_key).read_bytes(), Path(config.tls_cert).read_bytes())]
        )

    def stop(self) -> None:
        """Stops taking calls; those running get `STOP_GRACE_S` to finish."""
        if self._stopped is None:
            self._stopped = self._server.stop(STOP_GRACE_S)

    def wait_stopped(self) -> None:
        self.stop()
        assert self._stopped is not None
        self._stopped.wait(STOP_GRACE_S + 1)
        if self._front is not None:
            self._front.close()
        self._polls.shutdown()
        self._pool.shutdown()


def _hashed_entry(c: pb.TaskContract) -> dict[str, object]:
    """A gRPC contract entry in the JSON binding's shape (contract_check)."""
    document: object = None
    if c.contract_json:
        try:
            document = json.loads(c.contract_json)
        except ValueError:
            document = None
    return {
        "task_name": c.task_name,
        "contract_version": c.contract_version,
        "contract_hash": c.contract_hash,
        "contract": document,
    }
