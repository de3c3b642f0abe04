"""Threads that run the gRPC binding's calls: a thread pool without futures.

`concurrent.futures.ThreadPoolExecutor` makes a Future (a Condition and its
lock), a work item and a semaphore round per task, and signals the Future
when the task ends, though nothing here ever waits on one: the handler of a
call answers the call itself. Per call that was several times the CPU of the
hand-off proper, spent on `grpc_unary`'s polling thread, which every call of
the server goes through one at a time (about 13 us against 1 us per task
measured by a loop of empty tasks).

`CallThreads` keeps what the binding needs: threads are started as calls
need them, up to a limit, and then wait for the next call; a call submitted
while every thread is busy waits in the queue for the first one free, as
with the executor. A count of idle threads under one lock decides whether a
new thread is needed. Threads are daemons: `shutdown` asks them to end, but
a call still running (a long poll) does not hold the process up."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from orbit_server.logs import logger

_log = logger()
_Task = tuple[Callable[..., object], tuple[Any, ...]]


class CallThreads:
    def __init__(self, limit: int, name: str) -> None:
        self._tasks: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._limit = limit
        self._name = name
        self._started = 0
        # Threads waiting for a task that no submitted task has counted on
        # yet. Once every thread is started it may count one too many (a
        # thread that took a queued task also counted itself idle), which
        # then changes nothing: no thread could be started anyway.
        self._idle = 0
        self._closed = False

    def submit(self, fn: Callable[..., object], /, *args: Any) -> None:
        """Runs `fn(*args)` on one of the threads; exceptions are logged."""
        self._tasks.put((fn, args))
        with self._lock:
            if self._idle:
                self._idle -= 1
                return
            if self._started >= self._limit or self._closed:
                return
            self._started += 1
            name = f"{self._name}_{self._started - 1}"
        threading.Thread(target=self._work, name=name, daemon=True).start()

    def shutdown(self) -> None:
        """Each thread ends once it has run the tasks queued before this."""
        with self._lock:
            self._closed = True
            started = self._started
        for _ in range(started):
            self._tasks.put(None)

    def _work(self) -> None:
        take = self._tasks.get
        lock = self._lock
        while True:
            task = take()
            if task is None:
                return
            fn, args = task
            try:
                fn(*args)
            except Exception as exc:  # one task's fault never ends the thread
                _log.error("gRPC call thread task failed", exc_info=exc)
            with lock:
                self._idle += 1
