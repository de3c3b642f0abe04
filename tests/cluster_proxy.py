"""A small TCP load balancer for the cluster tests, as chapter 44 asks of a
real one: each new connection goes to a backend that answers 200 on
/v1/ready (the leader), and when a backend stops being ready its open
connections are closed, so kept-alive clients reconnect to the new leader.
Standard library only; loopback only."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from collections.abc import Callable


def ready(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    try:
        conn = http.client.HTTPConnection(host, int(port), timeout=0.5)
        try:
            conn.request("GET", "/v1/ready")
            return conn.getresponse().status == 200
        finally:
            conn.close()
    except OSError:
        return False


class Proxy:
    def __init__(self, backends: Callable[[], list[str]], check_s: float = 0.05) -> None:
        """`backends`: the current `host:port` of each server (read each check)."""
        self._backends = backends
        self._check_s = check_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.url = f"http://{self.addr}"
        self._lock = threading.Condition()
        self._ready: str | None = None
        self._open: dict[str, set[socket.socket]] = {}
        self._stop = threading.Event()
        for target in (self._accept, self._monitor):
            threading.Thread(target=target, daemon=True).start()

    def _monitor(self) -> None:
        while not self._stop.wait(self._check_s):
            found = next((a for a in self._backends() if a and ready(a)), None)
            with self._lock:
                before, self._ready = self._ready, found
                if before is not None and before != found:
                    for sock in self._open.pop(before, set()):
                        with contextlib.suppress(OSError):
                            sock.shutdown(socket.SHUT_RDWR)
                self._lock.notify_all()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with self._lock:
            self._lock.wait_for(lambda: self._ready is not None or self._stop.is_set(), 10)
            backend = self._ready
        if backend is None:
            client.close()
            return
        host, port = backend.rsplit(":", 1)
        try:
            upstream = socket.create_connection((host, int(port)), timeout=2)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            self._open.setdefault(backend, set()).update((client, upstream))
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join()
        with self._lock:
            self._open.get(backend, set()).difference_update((client, upstream))
        client.close()
        upstream.close()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            for socks in self._open.values():
                for sock in socks:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
            self._lock.notify_all()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
