"""The HTTP adapter (chapter 28, the guide of chapter 62) against HTTP servers
started in this test process on the loopback interface: the contract, the
body encoding, the status and error table with its retryable column, the
timeout and the body limit, idempotency headers; chapter 15's retry timeline
on a simulated clock with the real adapter, and through a real
`orbit server --enable-http-adapter` process."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cli_real import Orbit, same_run
from server_harness import ServerProcess

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.jsontypes import JsonValue
from orbit_core.testing import SimulatedClock, simulated_engine
from orbit_lang.compiler import compile_source
from orbit_server.http_adapter import MAX_RESPONSE_BYTES, HttpAdapter, request_timeout_s

pytestmark = pytest.mark.timeout(60)

Route = Callable[[BaseHTTPRequestHandler, bytes], None]


class LocalServer:
    """An HTTP server on 127.0.0.1 in this process; `routes` maps a path to a
    function that answers; every request is recorded in `seen`."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.seen: list[dict[str, Any]] = []
        self.release = threading.Event()  # frees the handlers that hang
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                owner.seen.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    }
                )
                owner.routes[self.path.split("?")[0]](self, body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def reply(status: int, body: bytes = b"", headers: list[tuple[str, str]] | None = None) -> Route:
    def answer(handler: BaseHTTPRequestHandler, _body: bytes) -> None:
        handler.send_response(status)
        for name, value in headers or []:
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)

    return answer


def json_reply(status: int, value: Any) -> Route:
    return reply(status, json.dumps(value).encode(), [("Content-Type", "application/json")])


@pytest.fixture
def server() -> Iterator[LocalServer]:
    local = LocalServer()
    try:
        yield local
    finally:
        local.close()


@pytest.fixture
def adapter() -> Iterator[HttpAdapter]:
    built = HttpAdapter()
    try:
        yield built
    finally:
        built.close()


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port bound but not listening: connecting is refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def run(adapter: HttpAdapter, value: JsonValue, timeout_ms: int | None = 5000) -> Any:
    """`adapter.run` as the engine calls it; returns what `done` got."""
    got: list[tuple[JsonValue, ev.ErrorJson | None]] = []
    finished = threading.Event()

    def done(output: JsonValue, error: ev.ErrorJson | None) -> None:
        got.append((output, error))
        finished.set()

    adapter.run("orbit.http.request", value, timeout_ms, done)
    assert finished.wait(10)
    assert len(got) == 1
    return got[0]


# ---- the contract


def test_supports_only_its_task(adapter: HttpAdapter) -> None:
    assert adapter.supports("orbit.http.request")
    assert not adapter.supports("orbit.http.other")


def test_get_returns_status_lowercased_headers_and_json_body(
    server: LocalServer, adapter: HttpAdapter
) -> None:
    server.routes["/health"] = reply(
        200,
        b'{"status": "ok", "n": [1, 2]}',
        [("Content-Type", "application/json"), ("X-Dup", "one"), ("X-Dup", "two")],
    )
    output, error = run(adapter, {"url": server.url + "/health", "headers": {"Accept": "x/y"}})
    assert error is None
    assert output["status"] == 200
    assert output["body"] == {"status": "ok", "n": [1, 2]}
    assert output["headers"]["content-type"] == "application/json"
    assert output["headers"]["x-dup"] == "two"  # the last value wins
    assert all(name == name.lower() for name in output["headers"])
    assert server.seen[0]["method"] == "GET"
    assert server.seen[0]["headers"]["accept"] == "x/y"


def test_a_body_that_is_not_json_is_its_text_and_an_empty_one_is_empty(
    server: LocalServer, adapter: HttpAdapter
) -> None:
    server.routes["/text"] = reply(200, b"hello, world", [("Content-Type", "text/plain")])
    server.routes["/empty"] = reply(204)
    assert run(adapter, {"url": server.url + "/text"})[0]["body"] == "hello, world"
    assert run(adapter, {"url": server.url + "/empty"})[0]["body"] == ""
    # JSON the engine would refuse (deeper than 128 levels) stays text.
    deep = b"[" * 200 + b"]" * 200
    server.routes["/deep"] = reply(200, deep, [("Content-Type", "application/json")])
    assert run(adapter, {"url": server.url + "/deep"})[0]["body"] == deep.decode()


@pytest.mark.parametrize("method", ["post", "PUT", "Patch"])
def test_a_record_body_is_sent_as_json(
    server: LocalServer, adapter: HttpAdapter, method: str
) -> None:
    server.routes["/in"] = json_reply(201, {"id": "r-1"})
    body: JsonValue = {"event": "order.completed", "order_id": "A-1"}
    output, error = run(adapter, {"method": method, "url": server.url + "/in", "body": body})
    assert error is None
    assert output["status"] == 201 and output["body"] == {"id": "r-1"}
    seen = server.seen[0]
    assert seen["method"] == method.upper()
    assert json.loads(seen["body"]) == body
    assert seen["headers"]["content-type"] == "application/json"


def test_a_string_body_is_sent_as_is_with_the_callers_content_type(
    server: LocalServer, adapter: HttpAdapter
) -> None:
    server.routes["/in"] = reply(200)
    run(
        adapter,
        {
            "method": "POST",
            "url": server.url + "/in",
            "headers": {"content-type": "text/csv"},
            "body": "a,b\n1,2",
        },
    )
    assert server.seen[0]["body"] == b"a,b\n1,2"
    assert server.seen[0]["headers"]["content-type"] == "text/csv"


def test_a_null_body_is_empty_and_get_ignores_the_body(
    server: LocalServer, adapter: HttpAdapter
) -> None:
    server.routes["/in"] = reply(200)
    run(adapter, {"method": "POST", "url": server.url + "/in", "body": None})
    run(adapter, {"method": "DELETE", "url": server.url + "/in", "body": {"x": 1}})
    run(adapter, {"url": server.url + "/in", "body": "ignored"})
    assert [s["body"] for s in server.seen] == [b"", b"", b""]
    assert [s["method"] for s in server.seen] == ["POST", "DELETE", "GET"]


def test_head_and_options(server: LocalServer, adapter: HttpAdapter) -> None:
    server.routes["/x"] = reply(200, b"", [("Allow", "GET")])
    assert run(adapter, {"method": "head", "url": server.url + "/x"})[0]["body"] == ""
    output, _ = run(adapter, {"method": "OPTIONS", "url": server.url + "/x"})
    assert output["headers"]["allow"] == "GET"


# ---- statuses and errors: the chapter's table


@pytest.mark.parametrize("status", [200, 201, 204, 302, 400, 404, 418, 499])
def test_1xx_to_4xx_but_429_succeed_with_the_response(
    server: LocalServer, adapter: HttpAdapter, status: int
) -> None:
    # A redirect is not followed: the workflow sees the 3xx.
    server.routes["/s"] = reply(status, b"", [("Location", server.url + "/elsewhere")])
    output, error = run(adapter, {"url": server.url + "/s"})
    assert error is None
    assert output["status"] == status
    assert len(server.seen) == 1


@pytest.mark.parametrize("status", [429, 500, 502, 503, 599])
def test_429_and_5xx_fail_retryably_with_status_and_body_in_details(
    server: LocalServer, adapter: HttpAdapter, status: int
) -> None:
    server.routes["/s"] = json_reply(status, {"why": "busy"})
    output, error = run(adapter, {"url": server.url + "/s"})
    assert output is None
    assert error == {
        "code": "HTTP_ERROR",
        "message": f"server responded {status}",
        "retryable": True,
        "details": {"status": status, "body": {"why": "busy"}},
    }


def test_a_refused_connection_fails_retryably(adapter: HttpAdapter) -> None:
    with refusing_port() as port:
        _, error = run(adapter, {"url": f"http://127.0.0.1:{port}/"})
    assert error == {
        "code": "HTTP_ERROR",
        "message": "request failed: io: Connection refused (os error 111)",
        "retryable": True,
    }


def test_a_dns_failure_fails_retryably(adapter: HttpAdapter) -> None:
    # .invalid never resolves (RFC 6761); the resolver may still answer
    # quickly from the machine's configuration.
    _, error = run(adapter, {"url": "http://orbit-test.invalid/"})
    assert error["code"] == "HTTP_ERROR" and error["retryable"] is True
    assert error["message"].startswith("request failed: ")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"url": "ftp://example.com/x"}, "only http:// and https:// URLs are allowed"),
        ({"url": "file:///etc/passwd"}, "only http:// and https:// URLs are allowed"),
        ({"url": "example.com"}, "only http:// and https:// URLs are allowed"),
        ({"method": "TRACE", "url": "http://127.0.0.1/"}, "unsupported method TRACE"),
        ({"method": "connect", "url": "http://127.0.0.1/"}, "unsupported method CONNECT"),
        ({"url": "http://"}, "invalid url: no host"),
        ({"url": "https:///path"}, "invalid url: no host"),
        ({"url": "http://127.0.0.1:99999/"}, "invalid url: port 99999 is out of range"),
        ({"method": "GET"}, "missing url"),
        ({"url": None}, "missing url"),
        ({"url": ""}, "missing url"),
    ],
)
def test_invalid_requests_fail_without_retry(
    adapter: HttpAdapter, value: JsonValue, message: str
) -> None:
    output, error = run(adapter, value)
    assert output is None
    assert error == {"code": "HTTP_ERROR", "message": message, "retryable": False}


def test_a_header_that_cannot_be_sent_fails_without_retry(
    server: LocalServer, adapter: HttpAdapter
) -> None:
    server.routes["/x"] = reply(200)
    bad: list[JsonValue] = [{"x-a": "line\r\nbreak"}, {"x-a": "caf\u00e9"}, {"bad name": "v"}]
    for headers in bad:
        _, error = run(adapter, {"url": server.url + "/x", "headers": headers})
        assert error["code"] == "HTTP_ERROR" and error["retryable"] is False, headers
    assert server.seen == []


def test_no_cookie_is_kept_between_requests(server: LocalServer, adapter: HttpAdapter) -> None:
    server.routes["/set"] = reply(200, b"", [("Set-Cookie", "session=secret; Path=/")])
    server.routes["/next"] = reply(200)
    run(adapter, {"url": server.url + "/set"})
    run(adapter, {"url": server.url + "/next"})
    assert "cookie" not in server.seen[1]["headers"]


# ---- timeouts and limits


def test_a_request_slower_than_the_timeout_fails_retryably(
    server: LocalServer, adapter: HttpAdapter
) -> None:
    def hang(handler: BaseHTTPRequestHandler, _body: bytes) -> None:
        server.release.wait(30)

    server.routes["/hang"] = hang
    _, error = run(adapter, {"url": server.url + "/hang"}, timeout_ms=200)
    assert error == {
        "code": "HTTP_ERROR",
        "message": "request failed: timed out after 200ms",
        "retryable": True,
    }


def test_the_timeout_covers_reading_the_body(server: LocalServer, adapter: HttpAdapter) -> None:
    """The whole request, not each read: a body that stalls after its first
    bytes still ends at the deadline."""

    def stall(handler: BaseHTTPRequestHandler, _body: bytes) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        handler.wfile.write(b"x" * 10)
        handler.wfile.flush()
        server.release.wait(30)

    server.routes["/stall"] = stall
    _, error = run(adapter, {"url": server.url + "/stall"}, timeout_ms=300)
    assert error is not None and error["message"] == "request failed: timed out after 300ms"


def test_without_a_step_timeout_the_request_has_30_seconds() -> None:
    assert request_timeout_s(None) == 30.0
    assert request_timeout_s(10_000) == 10.0


def test_at_most_8_mib_of_the_body_is_read(server: LocalServer, adapter: HttpAdapter) -> None:
    assert MAX_RESPONSE_BYTES == 8 * 1024 * 1024
    big = b"a" * (MAX_RESPONSE_BYTES + 1024 * 1024)
    server.routes["/big"] = reply(200, big, [("Content-Type", "text/plain")])
    output, error = run(adapter, {"url": server.url + "/big"})
    assert error is None
    assert len(output["body"]) == MAX_RESPONSE_BYTES


# ---- the engine with the real adapter, on a simulated clock

CHAPTER_15 = """
workflow Broken {
    version "1.0.0"
    input { url: String }
    step broken {
        worker "orbit.http.request"
        with { url: input.url }
        retry { attempts: 3, backoff: exponential, initial_delay: 100ms }
    }
    return { status: broken.status }
}
"""

# Chapter 62's webhook with its idempotency header.
WEBHOOK = """
workflow NotifyWebhook {
    version "1.1.0"
    input {
        order_id: String
        webhook_url: String
        api_key: String
    }
    output { accepted: Bool, status: Int }

    step post_event {
        worker "orbit.http.request"
        with {
            method: "POST"
            url: input.webhook_url
            headers: {
                authorization: "Bearer " + input.api_key
                "idempotency-key": "order-created-" + input.order_id
            }
            body: { event: "order.created", order_id: input.order_id }
        }
        timeout 10s
        retry { attempts: 3, backoff: exponential, initial_delay: 1s }
    }

    return {
        accepted: post_event.status == 201
        status: post_event.status
    }
}
"""


def _definition(source: str) -> Any:
    result = compile_source(source)
    assert result.ok, result.diagnostics
    return result.definitions[-1]


def _line(event: ev.Event) -> str:
    """An event as `orbit logs` prints its step events, without time and seq."""
    parts = [type(event).TYPE]
    for name in ("step", "attempt", "worker_id", "delay_ms"):
        value = getattr(event, name, None)
        if value is not None:
            parts.append(f"{name}={value}")
    error = getattr(event, "error", None)
    if error is not None:
        parts.append(f"error={error['code']} {error['message']}")
    return " ".join(parts)


def _book_lines(text: str) -> list[str]:
    return [" ".join(line.split()[3:]) for line in text.strip().splitlines()]


def _settle(engine: Engine, execution_id: str) -> None:
    """Waits (on real time, briefly) until no attempt is with the adapter."""
    finished = threading.Event()
    for _ in range(2000):
        units = engine.get(execution_id)["units"].values()
        if all(u.get("status") != "DISPATCHED" for u in units):
            return
        finished.wait(0.005)
    raise AssertionError("the adapter did not report")


def _retry_until_done(engine: Engine, clock: SimulatedClock, execution_id: str) -> None:
    for _ in range(20):
        _settle(engine, execution_id)
        if engine.get(execution_id)["status"] != "RUNNING":
            return
        due = engine.next_due_ms()
        assert due is not None
        clock.advance_to(due)
    raise AssertionError("the execution did not finish")


BOOK_15 = """
+   106ms   #9  StepScheduled             step=broken attempt=1
+   201ms  #10  StepDispatched            step=broken attempt=1 worker_id=orbit-runtime
+   203ms  #11  StepAttemptFailed         step=broken attempt=1 error=HTTP_ERROR request failed: io: Connection refused (os error 111)
+   205ms  #12  RetryScheduled            step=broken delay_ms=100
+   401ms  #13  StepScheduled             step=broken attempt=2
+   403ms  #14  StepDispatched            step=broken attempt=2 worker_id=orbit-runtime
+   406ms  #15  StepAttemptFailed         step=broken attempt=2 error=HTTP_ERROR request failed: io: Connection refused (os error 111)
+   407ms  #16  RetryScheduled            step=broken delay_ms=200
+   701ms  #17  StepScheduled             step=broken attempt=3
+   702ms  #18  StepDispatched            step=broken attempt=3 worker_id=orbit-runtime
+   704ms  #19  StepAttemptFailed         step=broken attempt=3 error=HTTP_ERROR request failed: io: Connection refused (os error 111)
+   705ms  #20  StepFailed                step=broken error=HTTP_ERROR request failed: io: Connection refused (os error 111) (gave up after 3 attempts)
"""


def test_chapter_15_retry_timeline_on_a_simulated_clock(adapter: HttpAdapter) -> None:
    clock = SimulatedClock()
    engine = simulated_engine(clock=clock, builtins=adapter)
    try:
        engine.deploy(_definition(CHAPTER_15))
        with refusing_port() as port:
            engine.start("Broken", input={"url": f"http://127.0.0.1:{port}/"}, execution_id="b-1")
            _retry_until_done(engine, clock, "b-1")
        events = engine.events("b-1")
        steps = [_line(e) for e in events if getattr(e, "step", None) == "broken"]
        assert steps == _book_lines(BOOK_15)
        # The delays of the book: each retry waits 100 ms, then 200 ms, of simulated time.
        scheduled = [e.timestamp_ms for e in events if isinstance(e, ev.StepScheduled)]
        assert [b - a for a, b in itertools.pairwise(scheduled)] == [100, 200]
        doc = engine.get("b-1")
        assert doc["status"] == "FAILED"
        assert doc["error"]["code"] == "HTTP_ERROR"
    finally:
        engine.close()


def test_chapter_62_webhook_retries_503_with_the_same_idempotency_key(
    server: LocalServer, adapter: HttpAdapter
) -> None:
    answers = iter([json_reply(503, {"try": "later"}), reply(503), json_reply(201, {"id": 7})])

    def answer(handler: BaseHTTPRequestHandler, body: bytes) -> None:
        next(answers)(handler, body)

    server.routes["/orders"] = answer
    clock = SimulatedClock()
    engine = simulated_engine(clock=clock, builtins=adapter)
    try:
        engine.deploy(_definition(WEBHOOK))
        value: JsonValue = {
            "order_id": "A-1",
            "webhook_url": server.url + "/orders",
            "api_key": "k-123",
        }
        engine.start("NotifyWebhook", input=value, execution_id="wh-4")
        _retry_until_done(engine, clock, "wh-4")
        doc = engine.get("wh-4")
        assert doc["status"] == "COMPLETED", doc
        assert doc["output"] == {"accepted": True, "status": 201}
        failed = [e for e in engine.events("wh-4") if isinstance(e, ev.StepAttemptFailed)]
        assert [e.error["message"] for e in failed] == ["server responded 503"] * 2
        assert failed[0].error.get("details") == {"status": 503, "body": {"try": "later"}}
        delays = [e.delay_ms for e in engine.events("wh-4") if isinstance(e, ev.RetryScheduled)]
        assert delays == [1000, 2000]
    finally:
        engine.close()
    keys = [seen["headers"]["idempotency-key"] for seen in server.seen]
    assert keys == ["order-created-A-1"] * 3
    assert {seen["headers"]["authorization"] for seen in server.seen} == {"Bearer k-123"}
    assert json.loads(server.seen[0]["body"]) == {"event": "order.created", "order_id": "A-1"}


def test_the_adapter_never_sends_an_idempotency_key_of_its_own(
    server: LocalServer, adapter: HttpAdapter
) -> None:
    server.routes["/x"] = reply(200)
    run(adapter, {"method": "POST", "url": server.url + "/x", "body": {"a": 1}})
    assert not any("idempotency" in name for name in server.seen[0]["headers"])


# ---- a real `orbit server --enable-http-adapter`

_LOG_LINE = re.compile(r"^\+\s+\S+\s+#\d+\s+(.*)$")


def test_real_server_runs_the_chapter_15_timeline_and_chapter_62_ping(
    tmp_path: Path, server: LocalServer
) -> None:
    server.routes["/v1/health"] = json_reply(200, {"status": "ok"})
    broken = tmp_path / "broken.orbit"
    broken.write_text(CHAPTER_15, encoding="utf-8")
    ping = Path(__file__).resolve().parents[1] / "examples" / "http_ping.orbit"
    with ServerProcess(tmp_path / "orbit.db", "--enable-http-adapter") as proc:
        assert any("http_adapter=true" in line for line in proc.lines)
        orbit = Orbit(f"http://{proc.addr}")
        ok = orbit(
            "run",
            str(ping),
            "--id",
            "ping-1",
            "--input",
            json.dumps({"url": server.url + "/v1/health"}),
        )
        assert ok.exit_code == 0, ok.output
        assert '"healthy": true' in ok.output
        assert server.seen[0]["headers"]["accept"] == "application/json"
        same_run(
            ok.output,
            """
            deployed HttpPing@1.0.0 (sha256:0c0d025d4d99)
            started execution ping-1
              ✓ probe                          succeeded 4ms

            COMPLETED ping-1  HttpPing@1.0.0
              elapsed: 9ms
            {
              "status": 200,
              "healthy": true
            }
            """,
        )
        with refusing_port() as port:
            value = json.dumps({"url": f"http://127.0.0.1:{port}/"})
            down = orbit("run", str(ping), "--id", "ping-down", "--input", value)
        assert down.exit_code != 0
        same_run(
            down.output[down.output.index("  ✗") :],
            """
              ✗ probe                          failed request failed: io: Connection refused (os error 111) (gave up after 3 attempts)

            FAILED ping-down  HttpPing@1.0.0
              elapsed: 888ms
              compensation: none
              error: HTTP_ERROR step `probe` failed: request failed: io: Connection refused (os error 111) (gave up after 3 attempts)
            """,
        )
        with refusing_port() as port:
            value = json.dumps({"url": f"http://127.0.0.1:{port}/"})
            failed = orbit("run", str(broken), "--id", "broken-1", "--input", value)
        assert failed.exit_code != 0
        assert (
            "error: HTTP_ERROR step `broken` failed: request failed: io: Connection refused "
            "(os error 111) (gave up after 3 attempts)"
        ) in failed.output
        logs = orbit("logs", "broken-1")
        assert logs.exit_code == 0, logs.output
        lines = [
            " ".join(m[1].split())
            for m in map(_LOG_LINE.match, logs.output.splitlines())
            if m and "step=broken" in m[1]
        ]
        assert lines == _book_lines(BOOK_15)


# ---- the option


def test_the_server_option_turns_the_adapter_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from orbit_cli.main import cli
    from orbit_server import runner

    configs: list[Any] = []

    def serve(config: Any) -> int:
        configs.append(config)
        return 0

    monkeypatch.setattr(runner, "serve", serve)
    runner_ = CliRunner(env=dict.fromkeys(("ORBIT_DB", "ORBIT_ADDR", "ORBIT_TOKEN")))
    for args, expected in (([], False), (["--enable-http-adapter"], True)):
        result = runner_.invoke(cli, ["server", *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert configs.pop().http_adapter is expected
    help_text = runner_.invoke(cli, ["server", "--help"]).output
    assert "--enable-http-adapter" in help_text
    assert "adapter are not available" not in " ".join(help_text.split())


def test_the_engine_gets_the_adapter_only_with_the_option(tmp_path: Path) -> None:
    from orbit_server.config import ServerConfig
    from orbit_server.runner import build_engine

    for enabled in (False, True):
        config = ServerConfig(db=str(tmp_path / f"{enabled}.db"), http_adapter=enabled)
        engine = build_engine(config)
        try:
            assert isinstance(engine.builtins, HttpAdapter) is enabled
        finally:
            engine.close()


def test_text_bodies_follow_the_charset_and_always_store(
    server: LocalServer, adapter: HttpAdapter
) -> None:
    server.routes["/latin"] = reply(
        200, "café".encode("latin-1"), [("Content-Type", "text/plain; charset=iso-8859-1")]
    )
    server.routes["/bogus"] = reply(
        200, b"caf\xe9", [("Content-Type", "text/plain; charset=no-such")]
    )
    server.routes["/huge"] = reply(
        200, b"[123456789012345678901234567890]", [("Content-Type", "application/json")]
    )
    assert run(adapter, {"url": server.url + "/latin"})[0]["body"] == "café"
    assert run(adapter, {"url": server.url + "/bogus"})[0]["body"] == "caf\ufffd"
    # An integer beyond 64 bits is read as a Float, as JSON parsers commonly do.
    assert run(adapter, {"url": server.url + "/huge"})[0]["body"] == [1.2345678901234568e29]


SLOW = """
workflow Slow {
    version "1.0.0"
    input { url: String }
    step call {
        worker "orbit.http.request"
        with { url: input.url }
        timeout 300ms
        retry { attempts: 2, backoff: fixed, initial_delay: 10ms }
    }
    return { status: call.status }
}
"""


def test_a_slow_request_fails_with_http_error_or_timeout_and_is_retried(
    server: LocalServer, adapter: HttpAdapter
) -> None:
    """Real time: the engine's step deadline and the adapter's watchdog race;
    whichever is recorded first fails the attempt, and both are retryable."""

    def hang(handler: BaseHTTPRequestHandler, _body: bytes) -> None:
        server.release.wait(30)

    server.routes["/slow"] = hang
    engine = Engine(builtins=adapter)
    try:
        engine.deploy(_definition(SLOW))
        engine.start("Slow", input={"url": server.url + "/slow"}, execution_id="slow-1")
        doc = engine.wait("slow-1", timeout_ms=20_000)
        assert doc["status"] == "FAILED", doc
        failed = [e for e in engine.events("slow-1") if isinstance(e, ev.StepAttemptFailed)]
        assert len(failed) == 2
        for event in failed:
            assert event.error["code"] in ("HTTP_ERROR", "TIMEOUT")
            if event.error["code"] == "HTTP_ERROR":
                assert event.error["message"] == "request failed: timed out after 300ms"
    finally:
        engine.close()
