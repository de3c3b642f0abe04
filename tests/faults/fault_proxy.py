"""A TCP proxy between one `orbit server` and PostgreSQL that can cut or
slow the link on command: the campaign's network faults.

A proxy on loopback was chosen over network namespaces and `tc netem`: it
needs no root and no namespaces, works on any CI machine, and never touches
the host's real network. `partition()` closes every open connection and
closes new ones at once (the server sees its database vanish); `delay(s)`
holds each chunk for `s` seconds before passing it on; `heal()` restores
the plain link. Standard library only; every thread ends with `close()`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class FaultProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self._target = (host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._partitioned = False
        self._delay_s = 0.0
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def partition(self) -> None:
        with self._lock:
            self._partitioned = True
            doomed, self._open = self._open, set()
        for sock in doomed:
            _shut(sock)

    def delay(self, seconds: float) -> None:
        with self._lock:
            self._delay_s = seconds

    def heal(self) -> None:
        with self._lock:
            self._partitioned = False
            self._delay_s = 0.0

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                cut = self._partitioned
            if cut:
                _shut(client)
                client.close()
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self._target, timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            self._open.update((client, upstream))
        back = threading.Thread(target=self._pipe, args=(upstream, client), daemon=True)
        back.start()
        self._pipe(client, upstream)
        back.join(60)
        with self._lock:
            self._open.difference_update((client, upstream))
        client.close()
        upstream.close()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                with self._lock:
                    wait, cut = self._delay_s, self._partitioned
                if cut:
                    break
                if wait:
                    time.sleep(wait)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _shut(src)
            _shut(dst)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self.partition()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
