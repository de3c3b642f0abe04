"""A worker speaking chapter 68's gRPC binding with the stub generated from
protocol/ (no SDK), for the tests that drive a real `orbit server` over
gRPC (tests/test_server_grpc.py, the cluster tests)."""

from __future__ import annotations

import re
from typing import Any

import grpc
from google.protobuf import struct_pb2
from server_harness import ServerProcess

from orbit_server.grpc_proto import worker_pb2 as pb
from orbit_server.grpc_proto import worker_pb2_grpc as pb_grpc

GREETING = [("greeting.compose", "1.0.0")]
_GRPC_LINE = re.compile(r'gRPC worker protocol listening(?: addr=|",\s*"addr":\s*")([0-9.:\[\]]+)')


def grpc_addr(proc: ServerProcess) -> str:
    found = _GRPC_LINE.search(proc.log())
    assert found, proc.log()
    return found[1]


class GrpcWorker:
    """A worker speaking the gRPC binding with a generated stub."""

    def __init__(
        self,
        channel: grpc.Channel,
        token: str | None,
        worker_id: str = "ruby-1",
        contracts: list[tuple[str, str]] = GREETING,
        runtime: str = "ruby",
    ) -> None:
        self.stub = pb_grpc.WorkerServiceStub(channel)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.worker_id = worker_id
        self.contracts = contracts
        self.runtime = runtime
        self.session = ""

    def register(self) -> pb.RegisterWorkerResponse:
        reply: pb.RegisterWorkerResponse = self.stub.RegisterWorker(
            pb.RegisterWorkerRequest(
                worker_id=self.worker_id,
                runtime=self.runtime,
                sdk="raw-grpc",
                contracts=[
                    pb.TaskContract(task_name=n, contract_version=v) for n, v in self.contracts
                ],
            ),
            metadata=self.metadata,
            timeout=30,
        )
        self.session = reply.worker_session_id
        return reply

    def poll(self, wait_ms: int = 5000) -> pb.ExecuteTaskRequest:
        task: pb.ExecuteTaskRequest = self.stub.PollTask(
            pb.PollTaskRequest(worker_session_id=self.session, wait_ms=wait_ms),
            metadata=self.metadata,
            timeout=wait_ms / 1000 + 30,
        )
        return task

    def task(self, wait_ms: int = 5000) -> pb.ExecuteTaskRequest:
        task = self.poll(wait_ms)
        assert task.token, "no task arrived"
        return task

    def heartbeat(self) -> pb.HeartbeatResponse:
        reply: pb.HeartbeatResponse = self.stub.Heartbeat(
            pb.HeartbeatRequest(worker_session_id=self.session), metadata=self.metadata, timeout=30
        )
        return reply

    def complete(self, token: str, output: Any = None) -> pb.TaskResultAck:
        request = pb.CompleteTaskRequest(token=token)
        if output is not None:
            request.output.CopyFrom(value(output))
        ack: pb.TaskResultAck = self.stub.CompleteTask(request, metadata=self.metadata, timeout=30)
        return ack

    def fail(self, token: str, code: str, **fields: Any) -> pb.TaskResultAck:
        details = fields.pop("details", None)
        request = pb.FailTaskRequest(token=token, error_code=code, **fields)
        if details is not None:
            request.details.CopyFrom(value(details))
        ack: pb.TaskResultAck = self.stub.FailTask(request, metadata=self.metadata, timeout=30)
        return ack

    def unregister(self) -> pb.UnregisterWorkerResponse:
        reply: pb.UnregisterWorkerResponse = self.stub.UnregisterWorker(
            pb.UnregisterWorkerRequest(worker_session_id=self.session),
            metadata=self.metadata,
            timeout=30,
        )
        return reply


def value(obj: Any) -> struct_pb2.Value:
    holder = struct_pb2.Struct()
    holder.update({"v": obj})
    return holder.fields["v"]
