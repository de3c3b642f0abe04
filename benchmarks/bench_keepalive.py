"""bench_keepalive: how quickly a new connection is answered while many
keep-alive clients are connected (issue 36).

Starts `orbit server` (or uses `--server`), then, in a process of its own so
that its work does not delay the measurement, opens `--clients` keep-alive
connections: `--busy` of them send `GET /v1/health` again as soon as the
previous answer arrives, for the whole run; the others make one request and
then stay idle with the connection open. `--long-polls` more connections
each register a worker session and keep a long poll parked (`wait_ms`
60 s), as idle workers do. Once every connection is open, the benchmark
opens `--probes` new connections one after another, each asking
`GET /v1/health` or `GET /v1/ready` once, and prints the latency of each
(connect to the whole answer): p50, p99, the slowest and how many took
longer than `--timeout`, as a load balancer's probe would give up.

    python benchmarks/bench_keepalive.py --clients 1000 --busy 200
    python benchmarks/bench_keepalive.py --clients 1000 --busy 0 --long-polls 300
    python benchmarks/bench_keepalive.py --server http://127.0.0.1:7233 --token admin
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import multiprocessing.connection
import resource
import socket
import sys
import time
from typing import NamedTuple

from bench_http import percentile, start_server

HEALTH = b"GET /v1/health HTTP/1.1\r\nHost: bench\r\n\r\n"
READY = b"GET /v1/ready HTTP/1.1\r\nHost: bench\r\n\r\n"


class Load(NamedTuple):
    """What the load process is asked to keep up."""

    host: str
    port: int
    clients: int
    busy: int
    long_polls: int
    worker_token: str


def _post(path: str, body: object, token: str) -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


async def _answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One HTTP/1.1 response with a Content-Length: its status and body."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, await reader.readexactly(length) if length else b""


async def _client(load: Load, busy: bool, counts: list[int], stop: asyncio.Event) -> None:
    reader, writer = await asyncio.open_connection(load.host, load.port)
    writer.write(HEALTH)
    await _answer(reader)
    counts[0] += 1
    if busy:
        while not stop.is_set():
            writer.write(HEALTH)
            await _answer(reader)
            counts[1] += 1
    else:
        await stop.wait()
    writer.close()


async def _long_poll(load: Load, index: int, counts: list[int], stop: asyncio.Event) -> None:
    reader, writer = await asyncio.open_connection(load.host, load.port)
    register = {
        "worker_id": f"bench-idle-{index}",
        "runtime": "python",
        "sdk": "bench",
        "contracts": [{"task_name": "bench.none", "contract_version": "1.0.0"}],
    }
    writer.write(_post("/v1/workers/register", register, load.worker_token))
    status, body = await _answer(reader)
    if status != 200:
        raise SystemExit(f"register failed: {status} {body!r}")
    session = json.loads(body)["worker_session_id"]
    counts[2] += 1
    poll = _post(
        "/v1/workers/poll", {"worker_session_id": session, "wait_ms": 60_000}, load.worker_token
    )
    while not stop.is_set():
        writer.write(poll)
        await _answer(reader)
    writer.close()


async def _keep_up(load: Load, pipe: multiprocessing.connection.Connection) -> None:
    stop = asyncio.Event()
    # Idle clients connected, busy requests answered, long polls registered.
    counts = [0, 0, 0]
    tasks = [
        asyncio.ensure_future(_client(load, i < load.busy, counts, stop))
        for i in range(load.clients)
    ]
    tasks += [
        asyncio.ensure_future(_long_poll(load, i, counts, stop)) for i in range(load.long_polls)
    ]
    loop = asyncio.get_running_loop()
    while counts[0] < load.clients or counts[2] < load.long_polls:
        failed = [t for t in tasks if t.done() and t.exception() is not None]
        if failed:
            raise failed[0].exception()  # type: ignore[misc]
        await asyncio.sleep(0.05)
    pipe.send("connected")
    started, answered = time.monotonic(), counts[1]
    await loop.run_in_executor(None, pipe.recv)
    pipe.send((counts[1] - answered) / (time.monotonic() - started))
    stop.set()
    for task in tasks:
        task.cancel()


def _load_process(load: Load, pipe: multiprocessing.connection.Connection) -> None:
    asyncio.run(_keep_up(load, pipe))


def probe(host: str, port: int, request: bytes, timeout: float) -> float:
    """Seconds from connecting to the whole answer on a new connection
    (`timeout` when none came in that time)."""
    started = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(request)
            data = b""
            while b"\r\n\r\n" not in data or not _whole(data):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except TimeoutError:
        return timeout
    return time.perf_counter() - started


def _whole(data: bytes) -> bool:
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return True


def summary(name: str, seconds: list[float], timeout: float) -> str:
    ms = [round(s * 1000) for s in seconds]
    late = sum(1 for s in seconds if s >= timeout)
    return (
        f"{name:<12} p50 {percentile(ms, 50)} ms  p99 {percentile(ms, 99)} ms  "
        f"max {max(ms)} ms  over {timeout:g}s: {late} of {len(ms)}"
    )


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000, help="keep-alive connections")
    parser.add_argument("--busy", type=int, default=200, help="of them, sending back to back")
    parser.add_argument("--long-polls", type=int, default=0, help="parked worker long polls")
    parser.add_argument("--probes", type=int, default=50, help="new connections per route")
    parser.add_argument("--timeout", type=float, default=2.0, help="a probe's patience, s")
    parser.add_argument("--store", default="memory", help="memory or a SQLite file path")
    parser.add_argument("--server", default="none", help="use this runtime instead")
    parser.add_argument("--token", default="admin")
    parser.add_argument("--worker-token", default="worker")
    return parser


def main() -> None:
    args = arguments().parse_args()
    if args.busy > args.clients:
        raise SystemExit("--busy cannot exceed --clients")
    # One descriptor per connection, on both ends when the server is ours.
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    proc = None
    server = args.server
    if server == "none":
        proc, server, _ = start_server(args.store, args.token, args.worker_token, [])
    host, port = server.removeprefix("http://").rsplit(":", 1)
    load = Load(host, int(port), args.clients, args.busy, args.long_polls, args.worker_token)
    ours, theirs = multiprocessing.Pipe()
    loader = multiprocessing.Process(target=_load_process, args=(load, theirs), daemon=True)
    try:
        started = time.monotonic()
        loader.start()
        if not ours.poll(120):
            raise SystemExit("the clients did not all connect within 120 s")
        ours.recv()
        print(f"runtime      {server}")
        print(
            f"clients      {args.clients} keep-alive ({args.busy} busy, "
            f"{args.clients - args.busy} idle), {args.long_polls} long polls, "
            f"connected in {time.monotonic() - started:.1f}s"
        )
        health = [probe(host, int(port), HEALTH, args.timeout) for _ in range(args.probes)]
        ready = [probe(host, int(port), READY, args.timeout) for _ in range(args.probes)]
        ours.send("done")
        if ours.poll(60):
            print(f"busy load    {ours.recv():.0f} requests/s")
        print(summary("/v1/health", health, args.timeout))
        print(summary("/v1/ready", ready, args.timeout))
    finally:
        loader.terminate()
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=90)
    sys.exit(0)


if __name__ == "__main__":
    main()
