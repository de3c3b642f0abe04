"""bench_http runs end to end on a small load and prints the book's figures."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_http.py"
# A small load: one worker process of two threads, two client threads.
_SMALL = ["--workers", "1", "--concurrency", "2", "--clients", "2"]


def _bench(
    *args: str, timeout: float, check: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """One run of bench_http on the small load, with `args`."""
    return subprocess.run(
        [sys.executable, str(_PATH), *_SMALL, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
        env=env,
    )


# A fresh machine downloads and builds grpc-go before the Go gRPC worker runs.
_GRPC_GO = pytest.mark.timeout(600)


@pytest.mark.parametrize(
    ("tls", "protocol", "kind"),
    [
        pytest.param(False, "http", "raw", id="http"),
        pytest.param(True, "http", "raw", id="https"),
        pytest.param(False, "grpc", "raw", id="grpc"),
        pytest.param(True, "grpc", "raw", id="grpc-tls"),
        # benchmarks/grpcworker, on grpc-go
        pytest.param(False, "grpc", "go", id="grpc-go", marks=_GRPC_GO),
        pytest.param(True, "grpc", "go", id="grpc-go-tls", marks=_GRPC_GO),
    ],
)
def test_bench_http_smoke(tls: bool, protocol: str, kind: str) -> None:
    result = _bench(
        "--executions",
        "20",
        "--store",
        "memory",
        *(["--tls"] if tls else []),
        "--protocol",
        protocol,
        "--worker-kind",
        kind,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(rf"runtime      {'https' if tls else 'http'}://127.0.0.1:\d+", out)
    if protocol == "grpc":
        assert re.search(r"protocol     gRPC at 127.0.0.1:\d+", out)
    assert "executions   20 (3 task steps each)" in out
    assert "workers      1 x 2 handler threads, 2 client threads" in out
    assert re.search(r"throughput   \d+ executions/s, \d+ steps/s", out)
    assert re.search(r"latency      p50 \d+ms, p90 \d+ms, p99 \d+ms \(start to completion\)", out)
    if sys.platform.startswith("linux"):
        assert re.search(
            r"cpu          server \d+\.\d{3} ms/step, benchmark \d+\.\d{3} ms/step", out
        )


@pytest.mark.timeout(600)  # a fresh machine downloads and builds grpc-go first
def test_bench_http_removes_the_go_programs_it_built(tmp_path: Path) -> None:
    """The Go worker programs are built into the temporary directory and
    deleted when the run ends (the gRPC one was once left behind)."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    for protocol in ("http", "grpc"):
        _bench(
            "--executions", "5", "--store", "memory", "--worker-kind", "go",
            "--protocol", protocol, timeout=300, check=True, env=env,
        )  # fmt: skip
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("orbit-bench-go")] == []


def test_bench_http_with_go_workers() -> None:
    """--worker-kind go builds the Go SDK's bench worker and serves with it."""
    result = _bench(
        "--executions", "20", "--store", "memory", "--worker-kind", "go", timeout=300, check=True
    )
    assert re.search(r"throughput   \d+ executions/s, \d+ steps/s", result.stdout)


@pytest.mark.timeout(900)  # the first optimised build of the crate takes minutes
def test_bench_http_with_rust_workers() -> None:
    """--worker-kind rust builds the Rust SDK's bench worker and serves with it."""
    result = _bench(
        "--executions", "20", "--store", "memory", "--worker-kind", "rust", timeout=900, check=True
    )
    assert re.search(r"throughput   \d+ executions/s, \d+ steps/s", result.stdout)


@pytest.mark.timeout(600)  # Maven packages the SDK first
def test_bench_http_with_java_workers() -> None:
    """--worker-kind java packages the Java SDK and serves with its bench worker."""
    result = _bench(
        "--executions", "20", "--store", "memory", "--worker-kind", "java", timeout=600, check=True
    )
    assert re.search(r"throughput   \d+ executions/s, \d+ steps/s", result.stdout)


def test_bench_http_half_load() -> None:
    """`--half-load` runs flat out, then at half the rate reached, and
    prints the p50 there against the latency target."""
    result = _bench(
        "--half-load", "--executions", "40", "--runs", "1", "--half-load-s", "1", timeout=180
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    run = re.search(r"run          flat out (\d+) executions/s; at (\d+)/s p50 (\d+)ms", out)
    assert run, out
    assert abs(int(run[2]) - int(run[1]) / 2) <= 1
    assert re.search(r"maximum      \d+ executions/s \(median of 1 flat-out runs\)", out)
    assert re.search(
        r"half load    p50 \d+ms at half of each run's maximum \[target <= 5 ms: (met|NOT met)\]",
        out,
    )


def test_bench_starts_smoke(tmp_path: Path) -> None:
    """benchmarks/bench_starts.py: starts only, on a small load."""
    result = subprocess.run(
        [
            sys.executable,
            str(_PATH.with_name("bench_starts.py")),
            "--executions",
            "30",
            "--clients",
            "2",
            "--store",
            str(tmp_path / "starts.db"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "starts       30 from 2 clients" in out
    assert re.search(r"throughput   \d+ starts/s", out)
    if sys.platform.startswith("linux"):
        assert re.search(r"cpu          server \d+\.\d{3} ms/start", out)


def test_bench_ipc_smoke() -> None:
    """benchmarks/bench_ipc.py: the pipe crossing alone, on a few calls."""
    result = subprocess.run(
        [sys.executable, str(_PATH.with_name("bench_ipc.py")), "--calls", "200", "--batch", "20"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r"calls        200 in batches of 20 \(\d+ round trips/s\)", result.stdout)
    assert re.search(r"http side    \d+\.\d us of CPU per call", result.stdout)
    assert re.search(r"engine side  -?\d+\.\d us of CPU per call", result.stdout)
