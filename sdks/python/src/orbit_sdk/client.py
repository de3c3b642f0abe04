"""Client for the runtime's HTTP API, used by workers and by applications."""

from __future__ import annotations

import json
import re
import ssl
from typing import Any
from urllib.parse import quote

from orbit_sdk import _env
from orbit_sdk._http import ConnectionFailure, Response, Transport
from orbit_sdk._json import RawJson
from orbit_sdk._json import decode as decode_json
from orbit_sdk._json import encode as encode_json
from orbit_sdk._version import USER_AGENT

# Calls that may be sent twice without harm when a kept-alive connection dies:
# reads, and the worker protocol, whose results the runtime reconciles by token.
_REPLAYABLE_PREFIXES = ("/v1/workers/", "/v1/tasks/")
_BAD_HEADER_VALUE = re.compile(r"\n(?![ \t])|\r(?![ \t\n])").search


class ApiError(Exception):
    """An error answer from the runtime, or a request that got no answer.

    status is 0 when the runtime could not be reached; code is then CONNECTION.
    Answers without ORBIT's JSON error body have the code HTTP_ERROR.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code} ({status}): {message}")
        self.status = status
        self.code = code
        self.message = message

    @property
    def is_connection_error(self) -> bool:
        return self.status == 0


class Client:
    """Sends JSON requests to an ORBIT runtime.

    Arguments left as None are read from ORBIT_SERVER, ORBIT_WORKER_TOKEN (then
    ORBIT_TOKEN), ORBIT_CA_CERT, ORBIT_CLIENT_CERT and ORBIT_CLIENT_KEY. A Client
    may be shared between threads; it keeps connections open between requests
    until close() (also called when used as a context manager).
    """

    def __init__(  # noqa: PLR0917 - the documented signature
        self,
        server: str | None = None,
        token: str | None = None,
        timeout: float = 70.0,
        ca_cert: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
    ) -> None:
        self.server = _env.resolve_server(server)
        self.timeout = timeout
        self._token = _env.resolve_token(token)
        ssl_context = None
        if self.server.startswith("https:"):
            ssl_context = _ssl_context(
                _env.resolve_path(ca_cert, "ORBIT_CA_CERT"),
                _env.resolve_path(client_cert, "ORBIT_CLIENT_CERT"),
                _env.resolve_path(client_key, "ORBIT_CLIENT_KEY"),
            )
        self._transport = Transport(self.server, ssl_context)
        # Made once; a token that cannot be sent fails each request, as before.
        self._header_error: ValueError | None = None
        try:
            self._headers = _header_lines(self._token, json_body=False)
            self._json_headers = _header_lines(self._token, json_body=True)
        except ValueError as exc:
            self._header_error = exc
            self._headers = self._json_headers = ""

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Sends a request; returns (status, parsed body or None when empty).

        Raises ApiError for a status of 400 or more and when there is no answer.
        """
        return self._call(method, path, body, self.timeout)

    def get(self, path: str) -> Any:
        return self._call("GET", path, None, self.timeout)[1]

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        return self._call("POST", path, body, self.timeout)

    def _post_waiting(self, path: str, body: Any) -> tuple[int, Any]:
        """A POST whose answer waits for work (a poll): _interrupt(waiting=True)
        ends it."""
        return self._call("POST", path, body, self.timeout, waiting=True)

    def start(
        self,
        workflow: str,
        input: Any = None,
        version: str | None = None,
        execution_id: str | None = None,
    ) -> str:
        """Starts an execution and returns its id.

        Starting an execution_id that already exists returns that execution.
        """
        body: dict[str, Any] = {"workflow": workflow}
        if input is not None:
            body["input"] = input
        if version is not None:
            body["version"] = version
        if execution_id is not None:
            body["execution_id"] = execution_id
        _, answer = self.post("/v1/executions", body)
        return str(answer["execution_id"])

    def wait(self, execution_id: str, timeout_ms: int = 30000) -> dict[str, Any]:
        """Long-polls until the execution is terminal or timeout_ms passes.

        Returns the execution's state either way; check its status.
        """
        path = f"/v1/executions/{_segment(execution_id)}/wait?timeout_ms={int(timeout_ms)}"
        # The socket must outlast the server-side wait.
        timeout = max(self.timeout, timeout_ms / 1000 + 15)
        state: dict[str, Any] = self._call("GET", path, None, timeout)[1]
        return state

    def signal(self, execution_id: str, name: str, payload: Any = None) -> int | None:
        """Sends a declared signal; returns the seq of its SignalReceived event.

        The seq is None only when a server of a shared cluster could not learn
        it in time; the signal is still recorded once.
        """
        path = f"/v1/executions/{_segment(execution_id)}/signals/{_segment(name)}"
        _, answer = self.post(path, {} if payload is None else payload)
        seq = answer.get("seq")
        return None if seq is None else int(seq)

    def query(self, execution_id: str, name: str) -> Any:
        """Evaluates a declared query against the execution's current state."""
        path = f"/v1/executions/{_segment(execution_id)}/queries/{_segment(name)}"
        return self.get(path)["value"]

    def close(self) -> None:
        """Closes the kept-alive connections that are not in use."""
        self._transport.close()

    def _interrupt(self, waiting: bool = False) -> None:
        """Ends the requests in progress with a connection error (the
        worker's open long polls, at shutdown), or only those waiting for work."""
        self._transport.interrupt(waiting)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(
        self, method: str, path: str, body: Any, timeout: float, waiting: bool = False
    ) -> tuple[int, Any]:
        if self._header_error is not None:
            raise self._header_error
        if body is None:
            data = None
            headers = self._headers
        else:
            data = body.data if isinstance(body, RawJson) else encode_json(body).encode()
            headers = self._json_headers
        replayable = method == "GET" or path.startswith(_REPLAYABLE_PREFIXES)
        try:
            response = self._transport.request(
                method=method,
                path=path,
                body=data,
                headers=headers,
                timeout=timeout,
                replayable=replayable,
                waiting=waiting,
            )
        except ConnectionFailure as exc:
            message = f"cannot reach ORBIT runtime at {self.server}: {exc}"
            raise ApiError(0, "CONNECTION", message) from None
        if response.status >= 400:
            raise _error_from(response)
        return response.status, _parse_body(response)


def _header_lines(token: str | None, json_body: bool) -> str:
    """The header lines every request of a client sends, made once."""
    fields = [("accept", "application/json"), ("user-agent", USER_AGENT)]
    if token:
        fields.append(("authorization", f"Bearer {token}"))
    if json_body:
        fields.append(("content-type", "application/json"))
    for _, value in fields:
        # A value that would end the header early is refused, as http.client did.
        if _BAD_HEADER_VALUE(value):
            raise ValueError(f"Invalid header value {value.encode('latin-1', 'replace')!r}")
    return "".join(f"{name}: {value}\r\n" for name, value in fields)


def _segment(value: str) -> str:
    return quote(value, safe="")


def _ssl_context(
    ca_cert: str | None, client_cert: str | None, client_key: str | None
) -> ssl.SSLContext:
    # With a CA file, create_default_context trusts that file only, not the
    # system store: a private CA is the only root a worker should accept then.
    context = ssl.create_default_context(cafile=ca_cert)
    if client_cert:
        context.load_cert_chain(client_cert, client_key)
    return context


def _parse_body(response: Response) -> Any:
    body = response.body
    if response.status == 204 or not body or body.isspace():
        return None
    try:
        return decode_json(body)
    except ValueError:
        raise ApiError(
            response.status, "HTTP_ERROR", "the runtime answered with a body that is not JSON"
        ) from None


def _error_from(response: Response) -> ApiError:
    text = response.body.decode("utf-8", errors="replace").strip()
    try:
        error = json.loads(text)["error"]
        return ApiError(response.status, str(error["code"]), str(error.get("message", "")))
    except (ValueError, KeyError, TypeError):
        return ApiError(response.status, "HTTP_ERROR", text or response.reason)
