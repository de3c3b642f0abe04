"""The HTTP adapter: the built-in task `orbit.http.request`, run by the runtime.

`HttpAdapter` implements orbit_core's `BuiltinTasks` port. The engine decides
and records everything durable (`StepDispatched` with worker
`orbit-runtime` before the request is sent, then the result); it calls `run`
on a thread of its own, and the adapter makes the request there with one
shared httpx client and reports through `done`, exactly once. Only the server
builds one, and only with `--enable-http-adapter`; without it the engine fails
every attempt with ADAPTER_DISABLED.

What the task does (docs/http-adapter.md):

- input: `method` (GET, HEAD, OPTIONS, DELETE, POST, PUT, PATCH, any case),
  `url` (http:// or https:// only), `headers` (strings), `body` (sent for
  POST, PUT and PATCH only: null is an empty body, a string goes as is, any
  other value as JSON with `content-type: application/json` unless a
  content type was given);
- output: `{status, headers, body}`, header names lowercased (the last of a
  repeated header wins), the body parsed as JSON when that gives a value the
  engine accepts (`orbit_core.limits`), else its text ("" when empty);
- 429 and 5xx fail the attempt with a retryable HTTP_ERROR `server responded
  N` whose details hold the status and body; a transport failure is a
  retryable `request failed: ...`; a bad request (scheme, method, missing
  url, a URL without a host or with a bad port, a header httpx cannot send)
  is a non-retryable HTTP_ERROR. Anything
  else raised while handling the task is a non-retryable HTTP_ERROR too, so
  a workflow's input can never take down the engine's thread;
- limits: the whole request, connecting and reading the body included, has
  the step's timeout, or 30 s without one (a watchdog timer reports the
  timeout at the deadline even if the socket is still blocked; httpx's own
  per-phase timeouts, set to the same value, then end the abandoned call). At
  most 8 MiB of the (decoded) body is read; the rest is dropped.

Choices beyond the contract, each for the runtime host's safety: redirects
are not followed (a 3xx is a response the workflow sees), no cookie is ever
kept between requests (executions must not share state through the shared
client), and proxies and CA bundles come from the environment as httpx reads
them (HTTP(S)_PROXY, NO_PROXY, SSL_CERT_FILE); certificates are verified.
The adapter never adds the step's idempotency key: a workflow passes one as
a header. The time of a request is real time (it is network I/O); event
times stay the engine's clock's.
"""

from __future__ import annotations

import http.cookiejar
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Final

import httpx
import orjson

from orbit_core import events as ev
from orbit_core.jsontypes import JsonValue
from orbit_core.limits import JsonShapeError, check_json

TASK: Final = "orbit.http.request"
METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "DELETE", "POST", "PUT", "PATCH"})
WITH_BODY: Final = frozenset({"POST", "PUT", "PATCH"})
DEFAULT_TIMEOUT_MS: Final = 30_000
MAX_RESPONSE_BYTES: Final = 8 * 1024 * 1024
USER_AGENT: Final = "orbit-runtime"

Done = Callable[[JsonValue, "ev.ErrorJson | None"], None]


class _Refused(Exception):
    """A request that must not be sent: a non-retryable HTTP_ERROR."""


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    def set_ok(self, cookie: http.cookiejar.Cookie, request: object) -> bool:
        return False

    def return_ok(self, cookie: http.cookiejar.Cookie, request: object) -> bool:
        return False


class HttpAdapter:
    """`BuiltinTasks` for `orbit.http.request` over one httpx client."""

    def __init__(
        self,
        *,
        transport: httpx.BaseTransport | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.max_response_bytes = max_response_bytes
        self._client = httpx.Client(
            transport=transport,
            follow_redirects=False,
            cookies=http.cookiejar.CookieJar(policy=_NoCookies()),
            headers={"user-agent": USER_AGENT},
            # Each request gets its own timeouts (`_send`); the pool is not
            # bounded, as every request already has a thread of its own.
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
        )

    def supports(self, task_name: str) -> bool:
        return task_name == TASK

    def close(self) -> None:
        self._client.close()

    def run(self, task_name: str, input: JsonValue, timeout_ms: int | None, done: Done) -> None:
        once = _Once(done)
        timeout_s = request_timeout_s(timeout_ms)
        watchdog = threading.Timer(timeout_s, lambda: once(None, _timed_out(timeout_s)))
        watchdog.daemon = True
        watchdog.start()
        try:
            output, error = self.request(input, timeout_s, once.is_done)
        except Exception as exc:  # a last resort: report, never kill the thread
            output, error = None, ev.make_error("HTTP_ERROR", f"internal error: {exc}", False)
        finally:
            watchdog.cancel()
        once(output, error)

    def request(
        self,
        input: JsonValue,
        timeout_s: float,
        abandoned: Callable[[], bool] = lambda: False,
    ) -> tuple[JsonValue, ev.ErrorJson | None]:
        """Sends the request `input` describes; returns (output, error)."""
        try:
            request = self._build(input, timeout_s)
        except _Refused as exc:
            return None, ev.make_error("HTTP_ERROR", str(exc), False)
        try:
            response = self._client.send(request, stream=True)
            try:
                raw = self._read(response, timeout_s, abandoned)
            finally:
                response.close()
        except httpx.TimeoutException:
            return None, _timed_out(timeout_s)
        except httpx.LocalProtocolError as exc:  # e.g. a header with a line break
            return None, ev.make_error("HTTP_ERROR", f"invalid request: {exc}", False)
        except httpx.TransportError as exc:
            return None, ev.make_error("HTTP_ERROR", f"request failed: {_describe(exc)}", True)
        except _Refused as exc:
            return None, ev.make_error("HTTP_ERROR", str(exc), False)
        body = _body(raw, response.charset_encoding)
        status = response.status_code
        if status == 429 or status >= 500:
            details: JsonValue = {"status": status, "body": body}
            return None, ev.make_error("HTTP_ERROR", f"server responded {status}", True, details)
        headers: dict[str, JsonValue] = {}
        for name, value in response.headers.multi_items():
            headers[name.lower()] = value
        return {"status": status, "headers": headers, "body": body}, None

    def _build(self, input: JsonValue, timeout_s: float) -> httpx.Request:
        if not isinstance(input, dict):
            raise _Refused("missing url")
        method = _method(input.get("method"))
        url = _url(input.get("url"))
        headers = _headers(input.get("headers"))
        content: bytes | None = None
        if method in WITH_BODY:
            body = input.get("body")
            if isinstance(body, str):
                content = body.encode()
            elif body is not None:
                content = orjson.dumps(body)
                if not any(name.lower() == "content-type" for name in headers):
                    headers = {**headers, "content-type": "application/json"}
        try:
            request = self._client.build_request(
                method,
                url,
                headers=headers,
                content=content,
                timeout=httpx.Timeout(timeout_s),
            )
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise _Refused(f"invalid url: {exc}") from None
        except (ValueError, TypeError) as exc:  # a header httpx cannot encode
            raise _Refused(f"invalid request: {exc}") from None
        # Refused here, as no retry can mend them (httpx would only notice
        # while sending, as a transport error).
        if not request.url.host:
            raise _Refused("invalid url: no host")
        port = request.url.port
        if port is not None and not 0 < port < 65536:
            raise _Refused(f"invalid url: port {port} is out of range")
        return request

    def _read(
        self, response: httpx.Response, timeout_s: float, abandoned: Callable[[], bool]
    ) -> bytes:
        """At most `max_response_bytes` of the decoded body; stops early once
        the watchdog has reported a timeout (a slowly dripping body)."""
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            if abandoned():
                raise httpx.ReadTimeout("deadline passed")
            room = self.max_response_bytes - size
            chunks.append(chunk[:room])
            size += min(len(chunk), room)
            if size >= self.max_response_bytes:
                break
        return b"".join(chunks)


def _method(method: JsonValue) -> str:
    if method is None:
        return "GET"
    if not isinstance(method, str) or method.upper() not in METHODS:
        shown = method if isinstance(method, str) else orjson.dumps(method).decode()
        raise _Refused(f"unsupported method {shown.upper()}")
    return method.upper()


def _url(url: JsonValue) -> str:
    if url is None or url == "":
        raise _Refused("missing url")
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        raise _Refused("only http:// and https:// URLs are allowed")
    return url


def _headers(headers: JsonValue) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, dict):
        raise _Refused("headers must be a map of strings")
    for name, value in headers.items():
        if not isinstance(value, str):
            raise _Refused(f"header `{name}` must be a string")
    return {name: str(value) for name, value in headers.items()}


def request_timeout_s(timeout_ms: int | None) -> float:
    """The whole request's time limit: the step's timeout, else 30 s."""
    return (timeout_ms if timeout_ms is not None else DEFAULT_TIMEOUT_MS) / 1000


class _Once:
    """`done`, called only the first time (by the request or the watchdog)."""

    def __init__(self, done: Done) -> None:
        self._done = done
        self._lock = threading.Lock()
        self._called = False

    def is_done(self) -> bool:
        return self._called

    def __call__(self, output: JsonValue, error: ev.ErrorJson | None) -> None:
        with self._lock:
            if self._called:
                return
            self._called = True
        self._done(output, error)


def _timed_out(timeout_s: float) -> ev.ErrorJson:
    return ev.make_error(
        "HTTP_ERROR", f"request failed: timed out after {round(timeout_s * 1000)}ms", True
    )


def _body(raw: bytes, charset: str | None) -> JsonValue:
    """The body as JSON when it parses to a value the engine accepts, else as text."""
    if not raw:
        return ""
    try:
        value: JsonValue = orjson.loads(raw)
        check_json(value)
        return value
    except (ValueError, JsonShapeError):  # orjson's errors are ValueErrors
        pass
    try:
        text = raw.decode(charset or "utf-8", errors="replace")
        check_json(text)  # a few codecs can yield lone surrogates
        return text
    except (LookupError, JsonShapeError):  # an unknown charset, or that
        return raw.decode("utf-8", errors="replace")


def _describe(exc: BaseException) -> str:
    """A transport failure in a few words, the OS error first when there is
    one (`io: Connection refused (os error 111)`)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return f"tls: {seen.reason or seen}"
        if isinstance(seen, OSError) and seen.errno is not None:
            kind = "dns" if isinstance(seen, socket.gaierror) else "io"
            return f"{kind}: {seen.strerror} (os error {seen.errno})"
        seen = seen.__cause__ or seen.__context__
    return str(exc) or type(exc).__name__
