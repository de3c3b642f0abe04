"""call_threads.CallThreads: the gRPC binding's pool without futures."""

from __future__ import annotations

import threading

from orbit_server.call_threads import CallThreads


def _alive(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"{name}_")]


def test_threads_are_kept_for_the_next_calls() -> None:
    pool = CallThreads(2, "ct-serial")
    ran: list[tuple[int, str]] = []
    for i in range(20):
        done = threading.Event()

        def task(i: int = i, done: threading.Event = done) -> None:
            ran.append((i, threading.current_thread().name))
            done.set()

        pool.submit(task)
        assert done.wait(5)
    assert [i for i, _ in ran] == list(range(20))
    # A thread that has just answered may not count as idle yet when the
    # next call comes, so a second one may start; no more.
    assert {name for _, name in ran} <= {"ct-serial_0", "ct-serial_1"}
    pool.shutdown()


def test_blocked_calls_start_threads_up_to_the_limit_and_the_rest_wait() -> None:
    pool = CallThreads(3, "ct-limit")
    release = threading.Event()
    started = threading.Semaphore(0)
    finished: list[int] = []

    def blocked(i: int) -> None:
        started.release()
        release.wait(5)
        finished.append(i)

    for i in range(5):
        pool.submit(blocked, i)
    for _ in range(3):
        assert started.acquire(timeout=5)
    assert not started.acquire(timeout=0.05)  # two wait for a free thread
    assert len(_alive("ct-limit")) == 3
    release.set()
    for _ in range(2):
        assert started.acquire(timeout=5)
    pool.shutdown()
    for thread in _alive("ct-limit"):
        thread.join(5)
    assert sorted(finished) == [0, 1, 2, 3, 4]
    assert not _alive("ct-limit")


def test_a_call_that_raises_is_logged_and_its_thread_goes_on() -> None:
    pool = CallThreads(1, "ct-fault")
    done = threading.Event()

    def broken() -> None:
        raise RuntimeError("boom")

    pool.submit(broken)
    pool.submit(done.set)
    assert done.wait(5)
    assert [t.name for t in _alive("ct-fault")] == ["ct-fault_0"]
    pool.shutdown()
