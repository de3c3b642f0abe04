"""The worker: registers task handlers, polls for work and reports results.

Threads of a running worker:

    caller of run()   registers, waits for stop(), drains, unregisters
    orbit-poll-<i>    concurrency of them: poll, run one task, report, repeat
    orbit-heartbeat   heartbeats at the runtime's interval; sets ctx.cancelled

Shutdown (SIGINT, SIGTERM or stop()) does not wait for open long polls: the
pollers are daemon threads, and run() waits only for the tasks already
running (counted under `_busy`). A poll that returns a task once shutdown has
begun does not start it; unregistering hands it back to the runtime, which
redelivers it at once. A second SIGINT ends run() at once with SystemExit(130)
(no traceback), abandoning running tasks, which the runtime redelivers after
the session timeout; a second SIGTERM gets the previous handler (by default,
the process ends). Each step is logged, so the person who pressed Ctrl-C sees
what the worker is waiting for.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
from types import FrameType
from typing import Any, Callable, Optional, TypeVar, Union

from orbit_sdk._backoff import Backoff, RandomSource
from orbit_sdk._contact import Contact
from orbit_sdk._delivery import Reporter
from orbit_sdk._execute import Handler, run_handler
from orbit_sdk._log import LOGGER, configure_logging, log_fields
from orbit_sdk._session import Session, describe, is_away, is_unknown_session
from orbit_sdk._version import USER_AGENT
from orbit_sdk.client import ApiError, Client
from orbit_sdk.context import Context

F = TypeVar("F", bound=Callable[..., Any])
SignalHandler = Union[Callable[[int, Optional[FrameType]], Any], int, None]

POLL = "/v1/workers/poll"
HEARTBEAT = "/v1/workers/heartbeat"
UNREGISTER = "/v1/workers/unregister"
STOP_CHECK_INTERVAL_S = 0.5


class Worker:
    """Runs task handlers for an ORBIT runtime.

    server and token default to ORBIT_SERVER and ORBIT_WORKER_TOKEN (then
    ORBIT_TOKEN); pass token="" to send no token. TLS settings come from the
    environment; to set them in code, replace worker.client before run().
    """

    def __init__(  # noqa: PLR0917 - the documented signature
        self,
        worker_id: str | None = None,
        server: str | None = None,
        token: str | None = None,
        concurrency: int = 4,
        runtime: str = "python",
        poll_wait_ms: int = 20000,
    ) -> None:
        self.worker_id = worker_id or f"python-{socket.gethostname()}-{os.getpid()}"
        self.runtime = runtime
        self.concurrency = max(1, int(concurrency))
        self.poll_wait_ms = int(poll_wait_ms)
        # The socket timeout must outlast a long poll that finds no task.
        self.client = Client(server=server, token=token, timeout=self.poll_wait_ms / 1000 + 15)
        self._handlers: dict[str, tuple[str, Handler]] = {}
        self._stopping = threading.Event()
        self._running = False
        self._state_lock = threading.Lock()
        self._inflight: dict[str, Context] = {}
        self._inflight_lock = threading.Lock()
        # Tasks being run or reported; shutdown waits until it drops to 0.
        self._busy = 0
        self._busy_changed = threading.Condition()
        # Jitter of every retry delay; tests replace it to fix the delays.
        self._random: RandomSource = random.random
        # Whether the runtime answers, for the lines logged while it does not.
        self._contact = Contact()

    def task(self, name: str, version: str = "1.0.0") -> Callable[[F], F]:
        """Decorator registering fn(input, ctx) for name@version; returns fn."""

        def decorate(fn: F) -> F:
            self.register(name, fn, version=version)
            return fn

        return decorate

    def register(self, name: str, fn: Handler, version: str = "1.0.0") -> None:
        """Registers fn for name@version; each name can be registered once."""
        if not callable(fn):
            raise TypeError(f"the handler for `{name}` must be callable")
        with self._state_lock:
            if self._running:
                raise RuntimeError("register every task before calling run()")
            if name in self._handlers:
                raise ValueError(f"task `{name}` is already registered")
            self._handlers[name] = (version, fn)

    def run(self, install_signal_handlers: bool = True) -> None:
        """Registers, polls and blocks until SIGINT, SIGTERM or stop().

        Then it stops polling, lets running handlers finish and report, and
        unregisters. Raises RuntimeError without tasks, and ApiError when the
        runtime refuses the registration.
        """
        with self._state_lock:
            if not self._handlers:
                raise RuntimeError("no task is registered: use @worker.task before run()")
            if self._running:
                raise RuntimeError("this worker is already running")
            self._running = True
        configure_logging()
        previous = self._install_signal_handlers() if install_signal_handlers else {}
        client = self.client
        try:
            session = Session(
                client, self._announcement(), self._stopping, self._random, self._contact
            )
            if session.open():
                self._serve(client, session)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            client.close()
            with self._state_lock:
                self._running = False

    def start(self) -> threading.Thread:
        """Runs run(install_signal_handlers=False) on a daemon thread."""
        thread = threading.Thread(
            target=self.run, kwargs={"install_signal_handlers": False}, name="orbit-worker"
        )
        thread.daemon = True
        thread.start()
        return thread

    def stop(self) -> None:
        """Asks run() to finish; returns immediately."""
        self._stopping.set()

    def _announcement(self) -> dict[str, Any]:
        contracts = [
            {"task_name": name, "contract_version": version}
            for name, (version, _) in self._handlers.items()
        ]
        return {
            "worker_id": self.worker_id,
            "runtime": self.runtime,
            "sdk": USER_AGENT,
            "contracts": contracts,
        }

    def _serve(self, client: Client, session: Session) -> None:
        heartbeat = self._thread("orbit-heartbeat", self._heartbeat_loop, client, session)
        reporter = Reporter(client, session, self._stopping, self._random)
        pollers = [
            self._thread(f"orbit-poll-{i + 1}", self._poll_loop, client, session, reporter)
            for i in range(self.concurrency)
        ]
        # A timed wait keeps the main thread responsive to signals everywhere.
        while not self._stopping.wait(STOP_CHECK_INTERVAL_S):
            pass
        with self._busy_changed:
            running = self._busy
        if running:
            LOGGER.info(
                "shutting down: stopped polling; waiting for %d running task(s) to finish "
                "(press Ctrl-C again to abandon them)",
                running,
            )
        else:
            LOGGER.info("shutting down: stopped polling; no task is running")
        with self._busy_changed:
            while self._busy:
                # Timed, so a second signal is handled at once.
                self._busy_changed.wait(STOP_CHECK_INTERVAL_S)
        self._unregister(client, session)
        # The polls still open end now; their threads see the stop and return.
        client._interrupt()
        for thread in [*pollers, heartbeat]:
            thread.join(STOP_CHECK_INTERVAL_S)

    @staticmethod
    def _thread(name: str, target: Callable[..., None], *args: Any) -> threading.Thread:
        # Daemon threads let a second Ctrl-C end the process at once.
        thread = threading.Thread(target=target, args=args, name=name)
        thread.daemon = True
        thread.start()
        return thread

    def _install_signal_handlers(self) -> dict[int, SignalHandler]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, SignalHandler] = {
            signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)
        }

        def on_signal(signum: int, frame: FrameType | None) -> None:
            LOGGER.info("received %s", signal.Signals(signum).name)
            # A second signal gets the previous behaviour, so Ctrl-C twice
            # quits; Python's own SIGINT handler would print a traceback.
            for number, handler in previous.items():
                second = on_second_interrupt if handler is signal.default_int_handler else handler
                signal.signal(number, second)
            self.stop()

        def on_second_interrupt(signum: int, frame: FrameType | None) -> None:
            with self._busy_changed:
                running = self._busy
            LOGGER.warning(
                "received %s again: exiting now; %d running task(s) abandoned "
                "(the runtime redelivers them after the session timeout)",
                signal.Signals(signum).name,
                running,
            )
            raise SystemExit(128 + signum)

        for signum in previous:
            signal.signal(signum, on_signal)
        return previous

    def _poll_loop(self, client: Client, session: Session, reporter: Reporter) -> None:
        backoff = Backoff(self._random)
        lost_session = False
        while not self._stopping.is_set():
            session_id = session.id
            try:
                _, task = client.post(
                    POLL, {"worker_session_id": session_id, "wait_ms": self.poll_wait_ms}
                )
            except ApiError as exc:
                if self._stopping.is_set():
                    return  # the client was closed under a poll left open
                if not is_away(exc):
                    self._contact.answered()
                if is_unknown_session(exc):
                    session.renew(session_id)
                    # A runtime that forgets every new session must not be
                    # hammered: only the first loss is retried at once.
                    if lost_session:
                        self._stopping.wait(backoff.next_delay())
                    lost_session = True
                    continue
                delay = backoff.next_delay()
                line = f"poll failed: {describe(exc)}; retrying in {delay:.1f}s"
                if is_away(exc):
                    self._contact.failed(line)
                else:
                    LOGGER.warning("%s", line)
                self._stopping.wait(delay)
                continue
            self._contact.answered()
            backoff.reset()
            lost_session = False
            if task is not None:
                with self._busy_changed:
                    if self._stopping.is_set():
                        log_fields(
                            logging.INFO,
                            "shutting down: not starting a task that arrived; "
                            "unregistering hands it back",
                            {"task": task.get("task_name"), "token": task.get("token")},
                        )
                        return
                    self._busy += 1
                try:
                    self._execute(reporter, task)
                except Exception:
                    LOGGER.exception("could not process a task assignment: %r", task)
                finally:
                    with self._busy_changed:
                        self._busy -= 1
                        self._busy_changed.notify_all()

    def _execute(self, reporter: Reporter, task: dict[str, Any]) -> None:
        ctx = Context._from_assignment(task)
        entry = self._handlers.get(ctx.task_name)
        log_fields(
            logging.INFO,
            "executing",
            {**ctx._identity(), "task": ctx.task_name, "redelivery": ctx.redelivery},
        )
        with self._inflight_lock:
            self._inflight[ctx.token] = ctx
        try:
            outcome = run_handler(entry[1] if entry else None, task, ctx)
        finally:
            with self._inflight_lock:
                self._inflight.pop(ctx.token, None)
        reporter.deliver(ctx, outcome)

    def _heartbeat_loop(self, client: Client, session: Session) -> None:
        while not self._stopping.wait(session.heartbeat_interval_s):
            session_id = session.id
            try:
                _, answer = client.post(HEARTBEAT, {"worker_session_id": session_id})
            except ApiError as exc:
                if is_away(exc):
                    self._contact.failed(f"heartbeat failed: {describe(exc)}")
                    continue
                self._contact.answered()
                if is_unknown_session(exc):
                    session.renew(session_id)
                else:
                    LOGGER.warning("heartbeat failed: %s", describe(exc))
                continue
            self._contact.answered()
            tokens: list[Any] = (answer or {}).get("cancel") or []
            for token in tokens:
                self._cancel(str(token))

    def _cancel(self, token: str) -> None:
        with self._inflight_lock:
            ctx = self._inflight.get(token)
        if ctx is None or ctx.is_cancelled:
            return
        ctx.cancelled.set()
        log_fields(
            logging.INFO, "cancellation requested", {**ctx._identity(), "task": ctx.task_name}
        )

    def _unregister(self, client: Client, session: Session) -> None:
        try:
            client.post(UNREGISTER, {"worker_session_id": session.id})
        except ApiError as exc:
            # An unknown session holds no tasks, so there is nothing to release.
            if not is_unknown_session(exc):
                LOGGER.warning("unregister failed: %s", describe(exc))
                return
        LOGGER.info("worker %s unregistered", self.worker_id)
