"""The `result-then-poll` extension over gRPC: the ReportThenPoll RPC
(docs/worker-protocol.md), against a real `orbit server --grpc-addr`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import server_ir
from grpc_client import GrpcWorker, grpc_addr, value
from server_harness import Http, ServerProcess

from orbit_server.grpc_proto import worker_pb2 as pb

pytestmark = pytest.mark.timeout(120)

CHAIN = [("bench.step", "1.0.0")]
EXTENSION = "result-then-poll"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("grpc-rtp") / "orbit.db"
    with ServerProcess(db, "--grpc-addr", "127.0.0.1:0") as proc:
        assert proc.http().post("/v1/workflows", server_ir.chain()).status == 201
        yield proc


@pytest.fixture(scope="module")
def channel(server: ServerProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(grpc_addr(server)) as opened:
        yield opened


def _register(worker: GrpcWorker, asked: list[str]) -> pb.RegisterWorkerResponse:
    reply: pb.RegisterWorkerResponse = worker.stub.RegisterWorker(
        pb.RegisterWorkerRequest(
            worker_id=worker.worker_id,
            runtime="python",
            contracts=[pb.TaskContract(task_name=n, contract_version=v) for n, v in CHAIN],
            extensions=asked,
        ),
        timeout=30,
    )
    worker.session = reply.worker_session_id
    return reply


def _complete_then_poll(
    worker: GrpcWorker, token: str, i: int, wait_ms: int = 5000, session: str | None = None
) -> pb.ReportThenPollResponse:
    answer: pb.ReportThenPollResponse = worker.stub.ReportThenPoll(
        pb.ReportThenPollRequest(
            complete=pb.CompleteTaskRequest(token=token, output=value({"i": i})),
            poll=pb.PollTaskRequest(
                worker_session_id=worker.session if session is None else session,
                wait_ms=wait_ms,
            ),
        ),
        timeout=wait_ms / 1000 + 30,
    )
    return answer


def _start(api: Http, eid: str) -> None:
    assert api.post("/v1/executions", {"workflow": "Chain", "execution_id": eid}).status == 201


def test_register_offers_the_extension_to_a_worker_that_asks(channel: grpc.Channel) -> None:
    worker = GrpcWorker(channel, None, "grpc-rtp-register", CHAIN, "python")
    assert list(_register(worker, []).extensions) == []
    assert list(_register(worker, ["other", EXTENSION]).extensions) == [EXTENSION]


def test_a_chain_runs_on_report_then_poll(server: ServerProcess, channel: grpc.Channel) -> None:
    api = server.http()
    worker = GrpcWorker(channel, None, "grpc-rtp-chain", CHAIN, "python")
    _register(worker, [EXTENSION])
    _start(api, "grpc-rtp-chain")
    task = worker.task()
    for step in range(3):
        assert task.step_id == f"s{step}"
        answer = _complete_then_poll(worker, task.token, step + 1, wait_ms=300)
        assert answer.ack.accepted
        task = answer.task
        assert answer.HasField("task")
    assert task.token == ""  # the last poll found nothing within wait_ms
    state = api.get("/v1/executions/grpc-rtp-chain/wait?timeout_ms=10000").body
    assert state["status"] == "COMPLETED"
    # A duplicate is acknowledged as usual, and its poll still runs.
    again = _complete_then_poll(worker, "no-such-token", 1, wait_ms=100)
    assert not again.ack.accepted
    assert again.ack.reason == "unknown token (execution finished or token invalid)"
    assert again.HasField("task") and again.task.token == ""


def test_a_refused_result_takes_no_task(server: ServerProcess, channel: grpc.Channel) -> None:
    api = server.http()
    worker = GrpcWorker(channel, None, "grpc-rtp-refused", CHAIN, "python")
    _register(worker, [EXTENSION])
    _start(api, "grpc-rtp-refused")
    held = worker.task()
    with pytest.raises(grpc.RpcError) as caught:
        worker.stub.ReportThenPoll(
            pb.ReportThenPollRequest(
                fail=pb.FailTaskRequest(token=held.token, error_code=""),
                poll=pb.PollTaskRequest(worker_session_id=worker.session, wait_ms=100),
            ),
            timeout=30,
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # The result was not reported and no task taken: complete it, and its
    # poll (a session that is not known) reports why it could not run.
    answer = _complete_then_poll(worker, held.token, 1, session="no-such-session")
    assert answer.ack.accepted
    assert not answer.HasField("task")
    assert answer.poll_error == (
        "UNKNOWN_SESSION: unknown or expired worker session; register again"
    )
    # s1 is still queued for the worker's own poll.
    nxt = worker.task()
    assert (nxt.execution_id, nxt.step_id) == ("grpc-rtp-refused", "s1")
    last = _complete_then_poll(worker, nxt.token, 2)
    assert _complete_then_poll(worker, last.task.token, 3, wait_ms=100).task.token == ""


def test_without_extensions_the_rpc_is_not_served(tmp_path: Path) -> None:
    with (
        ServerProcess(
            tmp_path / "off.db", "--grpc-addr", "127.0.0.1:0", "--no-worker-extensions"
        ) as proc,
        grpc.insecure_channel(grpc_addr(proc)) as channel,
    ):
        worker = GrpcWorker(channel, None, "grpc-rtp-off", CHAIN, "python")
        assert list(_register(worker, [EXTENSION]).extensions) == []
        with pytest.raises(grpc.RpcError) as caught:
            _complete_then_poll(worker, "t", 1)
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
