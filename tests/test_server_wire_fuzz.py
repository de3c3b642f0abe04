"""Differential fuzz of the worker's short path against gunicorn's parser.

The server's worker reads kept-alive requests with httptools and hands the
ones it does not serve to gunicorn. If the two read a byte stream
differently, a request could be smuggled past one of them, so for generated
streams of pipelined, split and malformed requests this checks that what the
short path serves, followed by what gunicorn makes of whatever it handed
back, is exactly what gunicorn alone would have made of the whole stream:
the same requests (method, target, headers as the app sees them, body),
then the connection's end (by a 400 or the peer's EOF) at the same point.
The short path may only close a connection sooner than gunicorn would; it
never refuses a request itself, it hands it to gunicorn.

Both of gunicorn's parsers are compared (the C one the server uses when it is
installed, and the Python one). ORBIT_WIRE_FUZZ_EXAMPLES sets the number of
streams (default 1200, about 3,000 requests: some 20 s).
"""

from __future__ import annotations

import functools
import io
import itertools
import os
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.errors import NoMoreData, ParseException
from gunicorn.http.parser import RequestParser
from gunicorn.http.unreader import SocketUnreader
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from orbit_server.http_short import MAX_HEAD, _Fallback
from orbit_server.worker import OrbitWorker

EXAMPLES = int(os.environ.get("ORBIT_WIRE_FUZZ_EXAMPLES", "1200"))
CLIENT = ("127.0.0.1", 40000)
SERVER = ("127.0.0.1", 7233)
# What of the environ reflects the request itself.
_KEYS = frozenset(
    {
        "REQUEST_METHOD",
        "RAW_URI",
        "PATH_INFO",
        "QUERY_STRING",
        "SERVER_PROTOCOL",
        "SCRIPT_NAME",
        "CONTENT_TYPE",
        "CONTENT_LENGTH",
        "wsgi.url_scheme",
    }
)


@attrs.frozen
class Served:
    environ: dict[str, str]
    body: bytes
    close: bool


@attrs.frozen
class Ended:
    """The connection ended: `refused` by the parser, or at the peer's EOF.
    Which one is not compared: at EOF, gunicorn's C parser itself refuses
    or waits for more depending on how the bytes were cut into packets."""

    refused: bool = attrs.field(eq=False)


Outcome = Served | Ended


class Peer:
    """The client end as the server reads it: chunks, then EOF."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    def recv(self, size: int = 65536) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def send(self, data: bytes) -> int:
        return len(data)

    def sendall(self, data: bytes) -> None:
        pass


class Conn:
    """What the worker's short path uses of gunicorn's TConn."""

    def __init__(self, sock: Peer) -> None:
        self.sock = sock
        self.client = CLIENT
        self.server = SERVER
        self.parser = RequestParser(_config("python"), sock, CLIENT)


@functools.cache
def _config(parser: str) -> Config:
    cfg = Config()
    cfg.set("http_parser", parser)
    # As `orbit server` sets it: no peer may rewrite the scheme.
    cfg.set("forwarded_allow_ips", "")
    return cfg


def _view(environ: dict[str, Any], body: bytes, close: bool) -> Served:
    seen = {k: v for k, v in environ.items() if k in _KEYS or k.startswith("HTTP_")}
    return Served(seen, body, close)


def _gunicorn(parser: RequestParser, cfg: Config) -> list[Outcome]:
    """What gunicorn reads from the parser's stream."""
    out: list[Outcome] = []
    while True:
        try:
            req = next(parser)
        except StopIteration:
            return out
        except NoMoreData:
            return [*out, Ended(refused=False)]
        except ParseException:
            return [*out, Ended(refused=True)]
        try:
            _, environ = wsgi.create(req, Peer([]), CLIENT, SERVER, cfg)
            body = req.body.read()
        except NoMoreData:
            return [*out, Ended(refused=False)]
        except ParseException:
            return [*out, Ended(refused=True)]
        if "CONTENT_LENGTH" in environ and len(body) < int(environ["CONTENT_LENGTH"]):
            return [*out, Ended(refused=False)]
        close = bool(req.should_close())
        out.append(_view(environ, body, close))
        if close:
            return out


def _reference(chunks: list[bytes], cfg: Config) -> list[Outcome]:
    return _gunicorn(RequestParser(cfg, iter(chunks), CLIENT), cfg)


def _worker(cfg: Config) -> OrbitWorker:
    worker = OrbitWorker.__new__(OrbitWorker)
    worker.cfg = cfg
    worker.alive = True
    worker._set_limits()
    return worker


def _short_path(chunks: list[bytes], cfg: Config) -> tuple[list[Outcome], bool]:
    """The worker's loop over a kept-alive connection, without the app:
    what it serves, then what gunicorn makes of what it handed back; and
    whether it handed anything back."""
    worker = _worker(cfg)
    peer = Peer(chunks)
    conn = Conn(peer)
    unreader = conn.parser.unreader
    out: list[Outcome] = []
    while True:
        data = unreader.buf.getvalue()
        if data:
            unreader.buf = io.BytesIO()
        else:
            data = peer.recv()
            if not data:
                return out, False
        try:
            request = worker._read(conn, data)
        except _Fallback as fallback:
            rest = SocketUnreader(peer)
            rest.unread(fallback.data)
            parser = RequestParser(cfg, iter(()), CLIENT)
            parser.unreader = rest
            return out + _gunicorn(parser, cfg), True
        if request is None:
            return [*out, Ended(refused=False)], False
        environ, close = request
        out.append(_view(environ, environ["wsgi.input"].read(), close))
        if close:
            return out, False


def _assert_agree(short: list[Outcome], reference: list[Outcome]) -> None:
    for i, mine in enumerate(short):
        assert i < len(reference), (short, reference)
        theirs = reference[i]
        if isinstance(mine, Served) and isinstance(theirs, Served) and mine.close:
            # Closing sooner than gunicorn is allowed; never later.
            assert attrs.evolve(theirs, close=True) == mine, (i, short, reference)
            return
        assert mine == theirs, (i, short, reference)
    assert len(short) == len(reference), (short, reference)


# --- generated requests -----------------------------------------------------
# A request is what a well-behaved client sends, or one in three is wild: each
# of its parts is now and then something odd (one or two oddities in a
# request, so that each is seen alone), and a stream has requests the short
# path serves before one it must hand on.


def _flat(*groups: list[bytes]) -> list[bytes]:
    return [item for group in groups for item in group]


_METHODS = (
    st.sampled_from([b"GET", b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS"]),
    st.sampled_from([b"HEAD", b"CONNECT", b"TRACE", b"get", b"G T", b"", b"GET\x00"]),
)
_SPACES = (st.just(b" "), st.sampled_from([b"  ", b"\t", b"", b"\r", b" \x0b"]))
_VERSIONS = (
    st.just(b"HTTP/1.1"),
    st.sampled_from([b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1.10", b"http/1.1", b"HTTP/1.1 ", b""]),
)
_LEADING = (st.just(b""), st.sampled_from([b"\r\n", b"\r\n\r\n", b"\n", b" ", b"\r"]))
_TARGETS = (
    st.lists(
        st.sampled_from(
            b"v1 executions a / %20 %2F %C2%B2 ? & = ~ . .. ; + : @ ! $ ' ( ) * #".split()
        ),
        max_size=6,
    ).map(lambda parts: b"/" + b"".join(parts)),
    st.one_of(
        st.lists(
            st.sampled_from(b'a / %2 %zz # ? " < > \\ ^ ` { | } \x7f \xff \x00 \x01'.split()),
            min_size=1,
            max_size=6,
        ).map(lambda parts: b"/" + b"".join(parts)),
        st.sampled_from([b"*", b"http://h/v1/health", b"//v1//health", b"", b"h:80", b"v1"]),
        st.sampled_from([4000, 4076, 4078, 4079, 4080, 4081, 4082, 4090, 8200]).map(
            lambda n: b"/" + b"x" * n
        ),
    ),
)
_NAMES = (
    st.sampled_from(
        b"Host Content-Type Connection X-Trace X_Trace Authorization Accept X-Dup x-dup"
        b" User-Agent Keep-Alive Script-Name".split()
    ),
    st.one_of(
        st.sampled_from(
            b"Content-Length content-length Transfer-Encoding Expect Upgrade TE Trailer"
            b" HTTP2-Settings Host Content-Type Connection".split()
        ),
        st.sampled_from([b"", b"Bad Name", b"X\xff", b"X\x00", b"Host ", b" X", b"X:Y", b"(X)"]),
        st.from_regex(rb"\A[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}\Z"),
        st.binary(min_size=1, max_size=6),
    ),
)
_VALUES = (
    st.sampled_from(
        _flat(
            [b"", b"t", b"127.0.0.1:7233", b"application/json", b"keep-alive", b"close", b"a b"],
            [b"Bearer s", b"*/*", b"a\tb", b" padded \t", b"\xe9t\xe9", b"a,b", b'a"b'],
        )
    ),
    st.one_of(
        st.sampled_from(
            _flat(
                [b"Keep-Alive", b"upgrade", b"close, keep-alive", b"keep-alive, close", b"chunked"],
                [b"gzip, chunked", b"chunked, identity", b"identity", b"100-continue", b"h2c"],
                [b"0", b"5", b"05", b"+5", b"-1", b"5 ", b" 5", b"5,5", b"0x5", b"\xb2", b"5\t"],
                [b"99999999999999999999", b"a\x00b", b"a\x7fb", b"a\x01b", b"a\rb", b"a\nb"],
                [b"a\r\n b", b"\x0b", b"\x0c"],
            )
        ),
        st.binary(max_size=12),
        st.sampled_from([4000, 8100, 8180, 8185, 8190, 8200, 9000]).map(lambda n: b"v" * n),
    ),
)
_SEPARATORS = (st.sampled_from([b": ", b":"]), st.sampled_from([b":\t", b" : ", b":  ", b""]))
_EOLS = (st.just(b"\r\n"), st.sampled_from([b"\n", b"\r", b"\r\n ", b"\r\n\t", b"\n\r"]))
_MANY = (st.just(0), st.sampled_from([98, 99, 100, 101, 150]))
_FRAMING = (
    st.sampled_from(["exact", "exact", "none"]),
    st.sampled_from(["shorter", "longer", "chunked", "twice", "chunked and length"]),
)


def _part(
    draw: st.DrawFn, choices: tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]], wild: bool
) -> Any:
    """The well-behaved choice; in a wild request, one time in fifteen the odd one."""
    clean, odd = choices
    return draw(odd if wild and draw(st.integers(0, 14)) == 0 else clean)


@st.composite
def _requests(draw: st.DrawFn) -> bytes:
    wild = draw(st.integers(0, 2)) == 0
    line = b"".join(
        _part(draw, choices, wild)
        for choices in (_LEADING, _METHODS, _SPACES, _TARGETS, _SPACES, _VERSIONS, _EOLS)
    )
    headers: list[bytes] = [
        b"".join(_part(draw, choices, wild) for choices in (_NAMES, _SEPARATORS, _VALUES, _EOLS))
        for _ in range(draw(st.integers(0, 5)))
    ]
    headers += [b"X-%d: v\r\n" % i for i in range(_part(draw, _MANY, wild))]
    end: bytes = _part(draw, _EOLS, wild)
    body = draw(st.binary(max_size=40))
    framing: list[bytes] = []
    length = _part(draw, _FRAMING, wild)
    if length in ("exact", "twice") and body:
        framing = [b"Content-Length: %d\r\n" % len(body)] * (2 if length == "twice" else 1)
    elif length == "shorter":
        framing = [b"Content-Length: %d\r\n" % max(0, len(body) - 3)]
    elif length == "longer":
        framing = [b"Content-Length: %d\r\n" % (len(body) + 3)]
    elif length.startswith("chunked"):
        framing = [b"Transfer-Encoding: chunked\r\n"]
        if length == "chunked and length":
            framing.append(b"Content-Length: %d\r\n" % len(body))
        body = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"
    for header in framing:
        # The framing headers anywhere among the others.
        headers.insert(draw(st.integers(0, len(headers))), header)
    return line + b"".join(headers) + end + body


@st.composite
def _streams(draw: st.DrawFn) -> list[bytes]:
    """Pipelined requests, cut into packets at random places."""
    data = b"".join(draw(st.lists(_requests(), min_size=1, max_size=4)))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=4))))
    bounds = [0, *[c for c in cuts if c < len(data)], len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(chunks=_streams())
def test_the_short_path_reads_a_stream_as_gunicorn_does(chunks: list[bytes]) -> None:
    for parser in ("fast", "python"):
        cfg = _config(parser)
        short, fell_back = _short_path(chunks, cfg)
        _assert_agree(short, _reference(chunks, cfg))
    served = sum(isinstance(outcome, Served) for outcome in short)
    event("handed to gunicorn" if fell_back else "served by the short path alone")
    event(f"{min(served, 3)}+ requests served")


# --- what the short path serves itself ----------------------------------------


def _plain() -> Iterator[bytes]:
    yield b"GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n"
    yield b"GET /v1/executions/a%20b?limit=5 HTTP/1.1\r\nHost: t\r\nAccept: */*\r\n\r\n"
    yield (
        b"POST /v1/workers/poll HTTP/1.1\r\nHost: 127.0.0.1:7233\r\nUser-Agent: x\r\n"
        b"Authorization: Bearer s\r\nContent-Type: application/json\r\n"
        b'Content-Length: 14\r\nX-A: 1\r\nX-A: 2\r\nX_A: 3\r\n\r\n{"wait_ms": 0}'
    )
    yield b"DELETE /v1/x HTTP/1.1\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize("request_bytes", list(_plain()))
def test_plain_requests_are_served_by_the_short_path(request_bytes: bytes) -> None:
    """The fuzz above proves nothing if the short path hands everything on."""
    cfg = _config("fast")
    for cut in (len(request_bytes), 7, len(request_bytes) - 1):
        chunks = [request_bytes[:cut], request_bytes[cut:]]
        stream = [c for c in chunks * 2 if c] if b"close" not in request_bytes else chunks
        short, fell_back = _short_path(stream, cfg)
        assert not fell_back
        assert short == _reference(stream, cfg)
        assert all(isinstance(outcome, Served) for outcome in short)


def test_heads_near_the_limits_go_to_gunicorn() -> None:
    cfg = _config("fast")
    long_line = b"GET /" + b"x" * 4090 + b" HTTP/1.1\r\n\r\n"
    many = b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 100 + b"\r\n"
    big = b"GET / HTTP/1.1\r\nX: " + b"y" * MAX_HEAD + b"\r\n\r\n"
    for request in (long_line, many, big):
        short, fell_back = _short_path([request], cfg)
        assert fell_back
        assert short == _reference([request], cfg)
