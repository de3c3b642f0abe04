"""A worker as a real process: signals, graceful shutdown and logging setup."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sdk_fake_runtime import FakeRuntime

WORKER_SCRIPT = """
import logging, sys, time
from orbit_sdk import Worker

if "--own-logging" in sys.argv:
    logging.basicConfig(level=logging.WARNING, format="custom %(levelname)s %(message)s")

worker = Worker("proc-worker", concurrency=1, poll_wait_ms=300)

@worker.task("a.slow")
def slow(input, ctx):
    print("started", flush=True)
    time.sleep(input.get("seconds", 1.0))
    return {"finished": True}

worker.run()
print("run returned", flush=True)
"""

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (\w+) orbit (.*)$")


class WorkerProcess:
    """Runs the script above and collects its output as it arrives."""

    def __init__(self, tmp_path: Path, fake: FakeRuntime, *args: str, **env: str) -> None:
        script = tmp_path / "worker.py"
        script.write_text(WORKER_SCRIPT)
        environment = {**os.environ, "ORBIT_SERVER": fake.url, "PYTHONFAULTHANDLER": "1", **env}
        # A shell's background job ignores SIGINT, and so would the worker
        # (and keep ignoring the second one): started with Python's own
        # handler here, it gets the default.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, str(script), *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=environment,
            )
        finally:
            signal.signal(signal.SIGINT, previous)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout)),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr)),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: object, lines: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.append(line.rstrip("\n"))

    def wait_for_line(self, lines: list[str], text: str, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in lines):
            assert time.monotonic() < deadline, f"no {text!r} in {lines}"
            time.sleep(0.02)

    def finish(self, timeout: float = 10) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # What a hang waits for: faulthandler prints every thread's stack.
            self.proc.send_signal(signal.SIGABRT)
            self.proc.wait(timeout)
            for reader in self._readers:
                reader.join(timeout)
            pytest.fail("the worker did not exit:\n" + "\n".join(self.stderr))
        for reader in self._readers:
            reader.join(timeout)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.finish()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_drains_the_running_task_then_unregisters(
    tmp_path: Path, fake: FakeRuntime, signum: signal.Signals
) -> None:
    token = fake.enqueue("a.slow", {"seconds": 1.0})
    worker = WorkerProcess(tmp_path, fake)
    try:
        worker.wait_for_line(worker.stdout, "started")
        worker.proc.send_signal(signum)
        code = worker.finish()
    finally:
        worker.kill()

    assert code == 0, worker.stderr
    assert worker.stdout == ["started", "run returned"]
    assert fake.results[token].body == {"token": token, "output": {"finished": True}}
    [unregister] = fake.calls_to("/v1/workers/unregister")
    assert unregister.at > fake.results[token].at
    assert not fake.sessions
    messages = [m.group(2) for m in map(LOG_LINE.match, worker.stderr) if m]
    assert messages[0] == "worker proc-worker registered (1 tasks)"
    assert f"received {signum.name}" in messages
    assert messages[-1] == "worker proc-worker unregistered"


def test_a_second_signal_ends_the_process_at_once(tmp_path: Path, fake: FakeRuntime) -> None:
    fake.enqueue("a.slow", {"seconds": 30})
    worker = WorkerProcess(tmp_path, fake)
    try:
        worker.wait_for_line(worker.stdout, "started")
        worker.proc.send_signal(signal.SIGTERM)
        worker.wait_for_line(worker.stderr, "received SIGTERM")
        worker.proc.send_signal(signal.SIGTERM)
        code = worker.finish(timeout=5)
    finally:
        worker.kill()

    assert code == -signal.SIGTERM
    assert not fake.results


@pytest.mark.parametrize(
    ("args", "env", "shows_info"),
    [
        ((), {}, True),
        ((), {"ORBIT_LOG_LEVEL": "WARNING"}, False),
        ((), {"ORBIT_LOG_LEVEL": "debug"}, True),
        ((), {"ORBIT_LOG_LEVEL": ""}, True),
        (("--own-logging",), {"ORBIT_LOG_LEVEL": "DEBUG"}, False),
    ],
)
def test_run_configures_logging_from_orbit_log_level(
    tmp_path: Path, fake: FakeRuntime, args: tuple[str, ...], env: dict[str, str], shows_info: bool
) -> None:
    worker = WorkerProcess(tmp_path, fake, *args, **env)
    try:
        fake.wait_for(lambda: bool(fake.calls_to("/v1/workers/poll")))
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.finish() == 0
    finally:
        worker.kill()

    registered = [line for line in worker.stderr if "registered (1 tasks)" in line]
    if shows_info:
        [line] = registered
        match = LOG_LINE.match(line)
        assert match is not None, line
        assert match.group(1) == "INFO"
    else:
        assert registered == []


LONG_POLL_SCRIPT = WORKER_SCRIPT.replace("poll_wait_ms=300", "poll_wait_ms=20000")


@pytest.fixture
def long_poll_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "WORKER_SCRIPT", LONG_POLL_SCRIPT)


@pytest.mark.usefixtures("long_poll_script")
def test_ctrl_c_on_an_idle_worker_does_not_wait_for_its_long_poll(
    tmp_path: Path, fake: FakeRuntime
) -> None:
    worker = WorkerProcess(tmp_path, fake)
    try:
        fake.wait_for(lambda: bool(fake.calls_to("/v1/workers/poll")))
        started = time.monotonic()
        worker.proc.send_signal(signal.SIGINT)
        code = worker.finish(timeout=10)
        took = time.monotonic() - started
    finally:
        worker.kill()
    assert code == 0, worker.stderr
    # The poll is open for 20 s; shutdown does not wait for it.
    assert took < 2, took
    assert worker.stdout == ["run returned"]
    assert not any("Traceback" in line for line in worker.stderr), worker.stderr
    messages = [m.group(2) for m in map(LOG_LINE.match, worker.stderr) if m]
    assert messages[-3:] == [
        "received SIGINT",
        "shutting down: stopped polling; no task is running",
        "worker proc-worker unregistered",
    ]


@pytest.mark.usefixtures("long_poll_script")
def test_a_second_ctrl_c_abandons_running_tasks_without_a_traceback(
    tmp_path: Path, fake: FakeRuntime
) -> None:
    fake.enqueue("a.slow", {"seconds": 30})
    worker = WorkerProcess(tmp_path, fake)
    try:
        worker.wait_for_line(worker.stdout, "started")
        worker.proc.send_signal(signal.SIGINT)
        worker.wait_for_line(worker.stderr, "waiting for 1 running task(s) to finish")
        started = time.monotonic()
        worker.proc.send_signal(signal.SIGINT)
        code = worker.finish(timeout=5)
        took = time.monotonic() - started
    finally:
        worker.kill()
    assert code == 130, worker.stderr
    assert took < 2, took
    assert not fake.results
    assert not any("Traceback" in line for line in worker.stderr), worker.stderr
    assert any(
        "received SIGINT again: exiting now; 1 running task(s) abandoned" in line
        for line in worker.stderr
    ), worker.stderr
