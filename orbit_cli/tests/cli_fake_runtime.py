"""A stand-in for `orbit server` that the CLI tests talk to over real HTTP.

It answers the chapter-67 routes the client commands use, from the fixture
files in `fixtures/`: each execution fixture holds the successive states the
runtime reports (GET /v1/executions/{id} and /wait step through them, the
last one repeating), its history, and canned answers for signals, queries and
cancellation. Workflow registration and starting executions follow the
book's rules (created/up to date, DEFINITION_CONFLICT, WORKFLOW_NOT_FOUND,
attaching to an existing id). The same fixtures can be compared with what
the real server answers once it exists.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

FIXTURES = Path(__file__).parent / "fixtures"


def load_fixture(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return document


class FakeExecution:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.states: list[dict[str, Any]] = doc["states"]
        self.history: dict[str, Any] = doc["history"]
        self.runs: dict[str, Any] = doc.get("runs", {})
        self.run_not_found: str | None = doc.get("run_not_found")
        self.signals: list[dict[str, Any]] = doc.get("signals", [])
        self.queries: list[dict[str, Any]] = doc.get("queries", [])
        self.cancel: list[dict[str, Any]] = doc.get("cancel", [])
        self.polls = 0

    @property
    def id(self) -> str:
        return str(self.states[0]["id"])

    @property
    def latest(self) -> dict[str, Any]:
        return self.states[-1]

    def next_state(self) -> dict[str, Any]:
        state = self.states[min(self.polls, len(self.states) - 1)]
        self.polls += 1
        return state


def _error(status: int, code: str, message: str) -> tuple[int, Any]:
    return status, {"error": {"code": code, "message": message}}


class FakeRuntime:
    """Serves on 127.0.0.1 at a free port; use as a context manager."""

    def __init__(self, *, leader: str | None = None) -> None:
        # With `leader`, this fake plays a cluster standby that points at it.
        self.leader = leader
        self.executions: dict[str, FakeExecution] = {}
        self.workflows: dict[tuple[str, str], str] = {}
        self.starts: dict[str, str] = {}
        self.started: set[str] = set()
        self.workers: dict[str, Any] = {"workers": []}
        self.requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeRuntime:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- test set-up -------------------------------------------------------
    def add_execution(self, name: str) -> FakeExecution:
        execution = FakeExecution(load_fixture(f"executions/{name}.json"))
        self.executions[execution.id] = execution
        return execution

    def bind_start(self, workflow: str, name: str) -> None:
        """POST /v1/executions for `workflow` starts the fixture execution `name`."""
        self.starts[workflow] = name

    def register(self, name: str, version: str, definition_hash: str) -> None:
        self.workflows[(name, version)] = definition_hash

    # --- routes --------------------------------------------------------------
    def answer(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        if self.leader is not None and method != "GET":
            return 503, {
                "error": {
                    "code": "NOT_LEADER",
                    "message": f"this server is a standby; the leader is `a` at {self.leader}",
                    "leader_node": "a",
                    "leader_addr": self.leader,
                }
            }
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[:2] == ["v1", "workflows"] and method == "POST" and len(parts) == 2:
            return self._register(body)
        if parts[:2] == ["v1", "workers"] and method == "GET" and len(parts) == 2:
            return 200, self.workers
        if parts[:2] == ["v1", "executions"]:
            if len(parts) == 2:
                return self._list(query) if method == "GET" else self._start(body)
            execution = self.executions.get(parts[2])
            if execution is None:
                return _error(404, "NOT_FOUND", f"execution `{parts[2]}` not found")
            return self._execution(execution, method, parts[3:], query, body)
        return _error(
            404, "NOT_FOUND", "no such endpoint; the API is under /v1/ and the web UI under /ui/"
        )

    def _register(self, ir: Any) -> tuple[int, Any]:
        key = (ir["name"], ir["version"])
        digest = ir.get("definition_hash")
        answer = {"name": key[0], "version": key[1], "definition_hash": digest}
        known = self.workflows.get(key)
        if known is None:
            self.workflows[key] = digest
            return 201, {**answer, "created": True}
        if known == digest:
            return 200, {**answer, "created": False}
        return _error(
            409,
            "DEFINITION_CONFLICT",
            f"{key[0]}@{key[1]} is already registered with a different definition ({known}); "
            "workflow definitions are immutable, bump the version",
        )

    def _list(self, query: dict[str, str]) -> tuple[int, Any]:
        rows = [
            {
                k: e.latest[k]
                for k in ("workflow", "version", "status", "created_at_ms", "updated_at_ms")
            }
            | {"execution_id": e.id}
            for e in self.executions.values()
        ]
        if "status" in query:
            rows = [r for r in rows if r["status"] == query["status"].upper()]
        if "workflow" in query:
            rows = [r for r in rows if r["workflow"] == query["workflow"]]
        rows.sort(key=lambda r: r["created_at_ms"], reverse=True)
        limit = min(max(int(query.get("limit", "50")), 1), 1000)
        order = ("execution_id", "workflow", "version", "status", "created_at_ms", "updated_at_ms")
        return 200, {"executions": [{k: r[k] for k in order} for r in rows[:limit]]}

    def _start(self, body: Any) -> tuple[int, Any]:
        name, version = body["workflow"], body.get("version")
        versions = sorted(v for (n, v) in self.workflows if n == name)
        if not versions or (version is not None and version not in versions):
            shown = f"{name}@{version}" if version else name
            return _error(404, "WORKFLOW_NOT_FOUND", f"workflow {shown} is not registered")
        requested = body.get("execution_id")
        if requested in self.executions and (requested in self.started or name not in self.starts):
            return 200, {"execution_id": requested, "created": False}
        fixture = self.starts.get(name)
        if fixture is None:
            raise AssertionError(f"the test did not bind a fixture to starts of {name}")
        execution = self.add_execution(fixture)
        self.started.add(execution.id)
        return 201, {"execution_id": execution.id, "created": True}

    def _execution(
        self,
        execution: FakeExecution,
        method: str,
        rest: list[str],
        query: dict[str, str],
        body: Any,
    ) -> tuple[int, Any]:
        if not rest or rest == ["wait"]:
            return 200, execution.next_state()
        if rest == ["history"]:
            run = query.get("run")
            if run is None:
                return 200, execution.history
            if run in execution.runs:
                return 200, execution.runs[run]
            if execution.run_not_found:
                return _error(404, "RUN_NOT_FOUND", execution.run_not_found.format(run=run))
            return 200, {**execution.history, "run": int(run)}
        if rest == ["cancel"]:
            reply = execution.cancel.pop(0) if execution.cancel else None
            return (reply["status"], reply["body"]) if reply else (200, execution.latest)
        if len(rest) == 2 and rest[0] in ("signals", "queries"):
            rules = execution.signals if rest[0] == "signals" else execution.queries
            for rule in rules:
                if rule["name"] == rest[1] and rule.get("payload", body) == body:
                    return rule["status"], rule["body"]
            raise AssertionError(f"no fixture answer for {rest} with {body!r}")
        return _error(404, "NOT_FOUND", "no such endpoint")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                url = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                if raw and "application/json" not in (self.headers.get("content-type") or ""):
                    self._reply(415, None)
                    return
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    self._reply(400, "Failed to parse the request body as JSON")
                    return
                fake.requests.append(
                    {
                        "method": method,
                        "path": url.path,
                        "query": query,
                        "body": body,
                        "authorization": self.headers.get("authorization"),
                    }
                )
                status, answer = fake.answer(method, url.path, query, body)
                self._reply(status, answer)

            def _reply(self, status: int, answer: Any) -> None:
                if isinstance(answer, str) or answer is None:
                    data = (answer or "").encode()
                    kind = "text/plain; charset=utf-8"
                else:
                    data = json.dumps(answer).encode()
                    kind = "application/json"
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.send_header("x-orbit-api-version", "orbit-api/1")
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def log_message(self, *_: Any) -> None:
                pass

        return Handler
