"""Spans made and exported by a process of their own.

Building a span and encoding it for OTLP costs several times what the
engine spends on the step it describes, and the engine's process is the
one that limits the server (one GIL). So with `--otlp-endpoint` the
engine's process keeps only `tracing.Tracer`'s execution model, without
spans (`export=False`: the ids of its log lines and of each task's
`traceparent`), and `TraceForwarder` hands the committed events of sampled
executions to a child process (`python -m orbit_server.trace_export`),
whose own `Tracer` builds the same model, makes the spans and exports them
with the SDK's batch processor. It runs on the other CPU.

The channel is the child's stdin: length-prefixed pickles of one message per
commit (the histories the engine's tracer read from the store, then the
changes). The commit thread only pickles and queues; a thread of the
forwarder writes. Nothing here may slow or fail the engine: a full queue
drops the batch with the chapter's warning, a child that has gone is
reported once and traffic to it stops. The child logs its export warnings
to the server's stderr in the server's log format, and stops when its stdin
closes: with the server's worker, or at `close`, after sending what it holds
for at most `tracing.CLOSE_TIMEOUT_S`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import IO, Any

from orbit_core import events as ev
from orbit_core.engine.tuning import tune_process
from orbit_core.ports import Store
from orbit_server import logs
from orbit_server.telemetry import Changes
from orbit_server.tracing import CLOSE_TIMEOUT_S, Tracer, TracingSettings

# Commits waiting for the writer thread; past this many, batches are dropped.
QUEUE_BATCHES = 4096
_QUEUE_FULL_EVERY_S = 10.0
_HEADER = struct.Struct("<I")
_STOP = b""

# What one message carries: whether to forget every execution first (a new
# engine), the (execution id, history) pairs read from the store by the
# engine's tracer, then the sampled changes of one commit.
Message = tuple[bool, list[tuple[str, list[ev.Event]]], Changes]


class TraceForwarder:
    """The engine process's side: the `telemetry.Tracing` of a server that
    exports traces."""

    def __init__(self, settings: TracingSettings, log_format: str) -> None:
        self._restored: list[tuple[str, list[ev.Event]]] = []
        self._model = Tracer(settings, export=False, restored=self._note_restored)
        self._lock = threading.Lock()
        self._queue: queue.Queue[bytes] = queue.Queue(QUEUE_BATCHES)
        self._last_full = -_QUEUE_FULL_EVERY_S
        self._child = subprocess.Popen(
            [sys.executable, "-m", "orbit_server.trace_export", log_format],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            # The child reads ORBIT_LOG and the OTEL_* variables itself.
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self._child.stdin is not None
        self._pipe: IO[bytes] = self._child.stdin
        # The settings go down the pipe: headers may hold credentials, which
        # a command line would show to every user of the machine.
        self._put(pickle.dumps(settings, pickle.HIGHEST_PROTOCOL), block=True)
        self._writer = threading.Thread(target=self._write, name="otlp-forward", daemon=True)
        self._writer.start()

    def attach(self, store: Store) -> None:
        """The store of a new engine (a cluster node builds one per term):
        what both tracers knew may be stale, so they start again, and
        rebuild each execution from its history when next seen."""
        with self._lock:
            self._model.attach(store)
            self._model.forget()
            self._restored.clear()
            message: Message = (True, [], [])
            self._put(pickle.dumps(message, pickle.HIGHEST_PROTOCOL), block=False)

    def committed(self, changes: Changes) -> Mapping[str, tuple[str, str]]:
        # One lock around the model and the queue: the child sees commits in
        # the order the model applied them.
        with self._lock:
            ids = self._model.committed(changes)
            sampled = [change for change in changes if change[0] in ids]
            restored = [
                (execution_id, history)
                for execution_id, history in self._restored
                if execution_id in ids or self._model.sampled(execution_id)
            ]
            self._restored.clear()
            if sampled or restored:
                message: Message = (False, restored, sampled)
                self._put(pickle.dumps(message, pickle.HIGHEST_PROTOCOL), block=False)
        return ids

    def traceparent(self, execution_id: str, unit: str) -> str | None:
        return self._model.traceparent(execution_id, unit)

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Stops the child once it has sent what it holds (`timeout_s` at most
        for the export, then it is killed)."""
        with contextlib.suppress(queue.Full):
            self._queue.put(_STOP, timeout=timeout_s)
        self._writer.join(timeout_s)
        with contextlib.suppress(OSError):
            self._pipe.close()
        try:
            self._child.wait(2 * timeout_s + 1)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()

    def _note_restored(self, execution_id: str, history: list[ev.Event]) -> None:
        self._restored.append((execution_id, history))

    def _put(self, data: bytes, *, block: bool) -> None:
        try:
            self._queue.put(data, block=block)
        except queue.Full:
            now = time.monotonic()
            if now - self._last_full >= _QUEUE_FULL_EVERY_S:
                self._last_full = now
                logs.logger().warning("OTLP export queue is full; dropping spans")

    def _write(self) -> None:
        while True:
            data = self._queue.get()
            if data is _STOP:
                return
            try:
                self._pipe.write(_HEADER.pack(len(data)))
                self._pipe.write(data)
                self._pipe.flush()
            except (OSError, ValueError) as exc:
                logs.logger().warning(
                    "cannot export spans to the OTLP collector",
                    error=f"the exporting process has gone: {exc!r}",
                )
                self._drain()
                return

    def _drain(self) -> None:
        # What comes after the child has gone is dropped; the queue must not fill.
        while self._queue.get() is not _STOP:
            pass


def _read(source: IO[bytes]) -> Any | None:
    header = source.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    size = _HEADER.unpack(header)[0]
    data = source.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


def _use_spare_cpu() -> None:
    """Undoes the CPU pinning inherited from the engine's process (see
    `runner._pin_to_one_cpu`): this process is there to use another CPU.
    And it yields to the engine and its workers (nice 10): spans can wait
    half a second in a queue, a caller cannot."""
    if hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
    if hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(10)


def main(argv: list[str]) -> int:
    """The child: reads messages from stdin until it closes."""
    log_format = argv[0] if argv else "text"
    _use_spare_cpu()
    # Spans wait in the processor's queue by the thousand while a collector
    # is slow or down: the collector thresholds of a long-running process.
    tune_process()
    logs.configure(log_format, logs.parse_filter(os.environ.get("ORBIT_LOG")))
    source = sys.stdin.buffer
    settings = _read(source)
    if not isinstance(settings, TracingSettings):
        return 2
    tracer = Tracer(settings)
    try:
        while (message := _read(source)) is not None:
            reset, restored, changes = message
            if reset:
                tracer.forget()
            for execution_id, history in restored:
                tracer.restore(execution_id, history)
            if changes:
                tracer.committed(changes)
    except Exception as exc:  # a span is never worth a traceback loop
        logs.logger().error("the trace exporting process failed", error=repr(exc), exc_info=exc)
    finally:
        tracer.close()
    return 0


if __name__ == "__main__":
    logging.captureWarnings(True)
    raise SystemExit(main(sys.argv[1:]))
