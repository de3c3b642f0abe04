"""The OpenAPI 3.1 description of the HTTP API, served at `GET /v1/openapi.json`.

The document is built here, in code, so repeated parts (the error envelope,
the plain-text refusals of the HTTP layer, the security of each access
level) are written once. `docs/openapi.json` is this document written out
by `python -m orbit_server.openapi docs/openapi.json`; tests keep the two
equal, check that the document lists exactly the app's routes and methods
and that each operation's `x-orbit-access` is what the server enforces,
and run schemathesis against a live server with it.

Response schemas list the fields a client may rely on and allow others:
chapter 67 lets responses gain fields within `orbit-api/1`.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

from orbit_server import __version__

PATH = "/v1/openapi.json"
JSON = "application/json"
TEXT = "text/plain"
MAX_INT = 2**63 - 1

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    return {
        "type": "object",
        "required": list(required),
        "properties": {**required, **(optional or {})},
    }


STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
BOOLEAN: Schema = {"type": "boolean"}
ANY: Schema = {}
NULLABLE_STRING: Schema = {"type": ["string", "null"]}
NULLABLE_INTEGER: Schema = {"type": ["integer", "null"]}

# What a server of a shared cluster adds to health and readiness (chapter 44).
SHARED_FIELDS: dict[str, Schema] = {
    "owned_executions": INTEGER,
    "tasks_claimed": INTEGER,
    "nodes": {
        "type": "array",
        "items": _object(
            {
                "node_id": STRING,
                "addr": NULLABLE_STRING,
                "live": BOOLEAN,
                "heartbeat_age_ms": INTEGER,
                "owned_executions": INTEGER,
            }
        ),
    },
}

# ORBIT's worker protocol extensions (docs/worker-protocol.md).
_EXTENSIONS: Schema = {"type": "array", "items": STRING}
_NEXT_POLL: Schema = {
    "$ref": "#/components/schemas/Poll",
    "description": "result-then-poll, when offered: the poll to make once the result is taken.",
}

SCHEMAS: dict[str, Schema] = {
    "Error": _object(
        {
            "error": {
                **_object({"code": STRING, "message": STRING}),
                "description": "`code` is stable, for programs; `message` is for people.",
            }
        }
    ),
    "Health": _object(
        {
            "status": {"const": "ok"},
            "api_version": STRING,
            "runtime_version": STRING,
            "ir_versions": {"type": "array", "items": STRING},
            "active_executions": INTEGER,
            "worker_sessions": INTEGER,
            "role": STRING,
            "node_id": NULLABLE_STRING,
            "term": NULLABLE_INTEGER,
            "leader": {"type": ["object", "null"]},
        },
        SHARED_FIELDS,
    ),
    "Ready": _object(
        {"role": STRING, "ready": BOOLEAN},
        {
            "node_id": NULLABLE_STRING,
            "term": NULLABLE_INTEGER,
            "leader": {"type": ["object", "null"]},
            **SHARED_FIELDS,
        },
    ),
    "IrDocument": {
        **_object({"ir_version": STRING, "name": STRING, "version": STRING}),
        "description": "A compiled definition as `orbit compile` writes it (chapter 29 and docs/ir.md).",
    },
    "WorkflowRegistered": _object(
        {"name": STRING, "version": STRING, "definition_hash": STRING, "created": BOOLEAN},
        # Only from a server started with --dev, when it replaced the version's definition.
        {"replaced": BOOLEAN},
    ),
    "VersionCensus": _object(
        {
            "workflow": STRING,
            "versions": {
                "type": "array",
                "items": _object(
                    {
                        "version": STRING,
                        "definition_hash": STRING,
                        "live": INTEGER,
                        "paused": INTEGER,
                        "waiting": {
                            "type": "array",
                            "items": _object({"step": STRING, "kind": STRING, "count": INTEGER}),
                        },
                        "tasks": {"type": "array", "items": STRING},
                        "drain": {"enum": ["current", "draining", "drained"]},
                        "last_live_at_ms": NULLABLE_INTEGER,
                    }
                ),
            },
        }
    ),
    "MigrationPlan": _object(
        {
            "workflow": STRING,
            "from_version": STRING,
            "to_version": STRING,
            "migration_hash": STRING,
            "executions": {
                "type": "array",
                "items": _object(
                    {"execution_id": STRING, "version": STRING, "verdict": STRING},
                    {"reason": STRING},
                ),
            },
        }
    ),
    "MigrationRequest": _object(
        {"from": STRING, "to": STRING},
        {
            "limit": {**INTEGER, "minimum": 1, "maximum": 1000},
            "dry_run": BOOLEAN,
            "status": STRING,
            "where": STRING,
        },
    ),
    "MigrationRun": _object(
        {
            "workflow": STRING,
            "from_version": STRING,
            "to_version": STRING,
            "migration_hash": STRING,
            "dry_run": BOOLEAN,
            "migrated": INTEGER,
            "remaining": INTEGER,
            "executions": {
                "type": "array",
                "items": _object(
                    {"execution_id": STRING, "verdict": STRING, "migrated": BOOLEAN},
                    {"reason": STRING},
                ),
            },
        }
    ),
    "WorkflowList": _object(
        {
            "workflows": {
                "type": "array",
                "items": _object(
                    {
                        "name": STRING,
                        "version": STRING,
                        "description": NULLABLE_STRING,
                        "definition_hash": STRING,
                        "steps": {"type": "array", "items": STRING},
                        "tasks": {"type": "array", "items": STRING},
                    }
                ),
            }
        }
    ),
    "StartExecution": _object(
        {"workflow": STRING},
        {
            "version": {**STRING, "description": "Default: the highest registered version."},
            "input": {"description": "The workflow input; null or absent means {}."},
            "execution_id": {**STRING, "description": "Default: a random UUID."},
            "retention": {
                **STRING,
                "description": (
                    "How long the execution stays in the database once finished, e.g. `30d`, "
                    "instead of its workflow's or the server's. Read only by a server with "
                    "--retention (docs/retention.md)."
                ),
            },
            "idempotency_key": {
                **STRING,
                "description": "Start at most once per key within the server's "
                "--idempotency-retention: the same key, workflow and input answer with the "
                "execution the first start made (created: false); another workflow, input or "
                "execution id is refused with 409 IDEMPOTENCY_KEY_REUSED.",
            },
        },
    ),
    "ExecutionStarted": _object({"execution_id": STRING, "created": BOOLEAN}),
    "ExecutionList": _object(
        {
            "executions": {
                "type": "array",
                "items": _object(
                    {
                        "execution_id": STRING,
                        "workflow": STRING,
                        "version": STRING,
                        "status": STRING,
                        "created_at_ms": INTEGER,
                        "updated_at_ms": INTEGER,
                    },
                    {"paused": BOOLEAN, "paused_at_ms": INTEGER, "pause_reason": STRING},
                ),
            }
        },
        # With `where` or `cursor` (docs/language/visibility.md).
        {"next_cursor": {"type": ["string", "null"]}},
    ),
    "Execution": _object(
        {
            "id": STRING,
            "workflow": STRING,
            "version": STRING,
            "definition_hash": STRING,
            "status": {
                "enum": [
                    "RUNNING",
                    "COMPENSATING",
                    "COMPLETED",
                    "FAILED",
                    "CANCELLED",
                    "TIMED_OUT",
                    "CONTINUED_AS_NEW",
                ]
            },
            "created_at_ms": INTEGER,
            "updated_at_ms": INTEGER,
            "units": {"type": "object", "additionalProperties": {"type": "object"}},
            "last_seq": INTEGER,
        },
        {
            "input": ANY,
            "run": INTEGER,
            "parent": {"type": "object"},
            "finished_at_ms": INTEGER,
            "abort": {"type": "object"},
            "compensation_order": {"type": "array", "items": STRING},
            "signals": {"type": "array", "items": {"type": "object"}},
            "compensation": {"enum": ["none", "completed", "failed"]},
            "output": ANY,
            "error": {"type": "object"},
            "paused": BOOLEAN,
            "paused_at_ms": INTEGER,
            "pause_reason": STRING,
        },
    ),
    "History": _object(
        {
            "execution_id": STRING,
            "events": {
                "type": "array",
                "items": _object({"seq": INTEGER, "timestamp_ms": INTEGER, "type": STRING}),
            },
        },
        {"run": INTEGER},
    ),
    "Cancel": _object({}, {"reason": STRING}),
    # Restart and fork (issue 38, docs/restart-and-fork.md).
    "Restart": _object({"from": STRING}, {"dry_run": BOOLEAN, "force": BOOLEAN, "reason": STRING}),
    "Fork": _object(
        {"from": STRING},
        {"execution_id": STRING, "version": STRING, "dry_run": BOOLEAN, "force": BOOLEAN},
    ),
    "ActionAnswer": _object(
        {
            "action": {"type": "string", "enum": ["restart", "fork"]},
            "execution_id": STRING,
            "source": STRING,
            "run": INTEGER,
            "workflow": STRING,
            "version": STRING,
            "step": STRING,
            "dry_run": BOOLEAN,
            "started": BOOLEAN,
            "kept": {"type": "array", "items": STRING},
            "rerun": {"type": "array", "items": STRING},
            "effects": {
                "type": "array",
                "items": _object(
                    {
                        "step": STRING,
                        "task": STRING,
                        "effect": {
                            "type": "string",
                            "enum": ["idempotent", "compensable", "once", "pure", "unknown"],
                        },
                        "idempotency_key": {"type": "string", "enum": ["same", "new"]},
                        "ran_before": BOOLEAN,
                        "needs_force": BOOLEAN,
                    }
                ),
            },
        }
    ),
    "Pause": _object({}, {"reason": STRING}),
    "SignalAccepted": _object(
        {"execution_id": STRING, "signal": STRING, "accepted": BOOLEAN, "seq": NULLABLE_INTEGER}
    ),
    "QueryResult": _object({"execution_id": STRING, "query": STRING, "value": ANY}),
    "WorkerList": _object(
        {
            "workers": {
                "type": "array",
                "items": _object(
                    {
                        "worker_id": STRING,
                        "runtime": STRING,
                        "sdk": NULLABLE_STRING,
                        "contracts": {"type": "array", "items": _ref("Contract")},
                        "last_seen_ms": INTEGER,
                        "registered_at_ms": INTEGER,
                        "online": BOOLEAN,
                        "sessions": INTEGER,
                        "inflight": INTEGER,
                    },
                    {
                        # Only when some announced task is called by no deployed workflow.
                        "unused_contracts": {
                            "type": "array",
                            "items": _object(
                                {"task_name": STRING, "contract_version": STRING},
                                {"deployed_versions": {"type": "array", "items": STRING}},
                            ),
                        }
                    },
                ),
            }
        }
    ),
    "Contract": _object(
        {"task_name": STRING, "contract_version": STRING},
        # Typed workers (docs/workers/typed-workers.md): the hash of the
        # contract their code was generated from, and optionally its document.
        {"contract_hash": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}, "contract": ANY},
    ),
    "Register": _object(
        {
            "worker_id": STRING,
            "runtime": STRING,
            "contracts": {"type": "array", "items": _ref("Contract")},
        },
        {"sdk": STRING, "extensions": _EXTENSIONS},
    ),
    "Registered": _object(
        {
            "accepted": BOOLEAN,
            "worker_session_id": STRING,
            "heartbeat_interval_ms": INTEGER,
            "session_timeout_ms": INTEGER,
            "warnings": {"type": "array", "items": STRING},
        },
        {
            "extensions": {
                **_EXTENSIONS,
                "description": "Those asked for that the server offers; only when asked.",
            }
        },
    ),
    "Session": _object({"worker_session_id": STRING}),
    "Heartbeat": _object({"accepted": BOOLEAN, "cancel": {"type": "array", "items": STRING}}),
    "Poll": _object(
        {"worker_session_id": STRING},
        {
            "wait_ms": {
                **INTEGER,
                "minimum": 0,
                "maximum": 60_000,
                "description": "Default 20000; larger values are capped at 60000.",
            }
        },
    ),
    "Task": _object(
        {
            "token": STRING,
            "execution_id": STRING,
            "workflow": STRING,
            "workflow_version": STRING,
            "step_id": STRING,
            "task_name": STRING,
            "contract_version": STRING,
            "input": ANY,
            "idempotency_key": STRING,
            "attempt": INTEGER,
            "redelivery": BOOLEAN,
        },
        {"deadline_ms": INTEGER, "timeout_ms": INTEGER},
    ),
    "ScheduleSettings": {
        **_object(
            {},
            {
                "schedule_id": {
                    **STRING,
                    "description": "Letters, digits, -, _ and .; at most 100.",
                },
                "workflow": STRING,
                "version": NULLABLE_STRING,
                "input": {"type": ["object", "null"]},
                "cron": NULLABLE_STRING,
                "interval": NULLABLE_STRING,
                "timezone": NULLABLE_STRING,
                "overlap": {
                    "type": ["string", "null"],
                    "enum": ["skip", "allow", "cancel_previous", None],
                },
                "catchup": {"type": ["string", "null"], "enum": ["skip_missed", "run_once", None]},
                "start_at": NULLABLE_STRING,
                "end_at": NULLABLE_STRING,
                "jitter": NULLABLE_STRING,
                "description": NULLABLE_STRING,
                "paused": BOOLEAN,
            },
        ),
        "description": (
            "POST needs schedule_id, workflow and one of cron or interval; PATCH "
            "changes the fields given (null removes one). Unknown fields are refused."
        ),
    },
    "Schedule": _object(
        {
            "schedule_id": STRING,
            "workflow": STRING,
            "input": ANY,
            "overlap": STRING,
            "catchup": STRING,
            "paused": BOOLEAN,
            "next_fire_at": NULLABLE_STRING,
            "next_fire_times": {"type": "array", "items": STRING},
            "last_fire_at": NULLABLE_STRING,
            "last_execution_id": NULLABLE_STRING,
            "fired": INTEGER,
            "skipped": INTEGER,
            "last_error": NULLABLE_STRING,
            "created_at": STRING,
            "updated_at": STRING,
        },
        {
            "version": STRING,
            "cron": STRING,
            "interval": STRING,
            "timezone": STRING,
            "start_at": STRING,
            "end_at": STRING,
            "jitter": STRING,
            "description": STRING,
        },
    ),
    "ScheduleList": _object({"schedules": {"type": "array", "items": _ref("Schedule")}}),
    "ScheduleDeleted": _object({"schedule_id": STRING, "deleted": BOOLEAN}),
    "ScheduleTriggered": _object(
        {"schedule_id": STRING, "started": BOOLEAN}, {"execution_id": STRING, "skipped": STRING}
    ),
    "Accepted": _object({"accepted": BOOLEAN}),
    "TaskAnswer": _object(
        {"accepted": BOOLEAN},
        {
            "reason": STRING,
            "task": {
                "anyOf": [_ref("Task"), {"type": "null"}],
                "description": "result-then-poll: the next task; null when none came in wait_ms.",
            },
            "poll_error": {
                **_object({"code": STRING, "message": STRING}),
                "description": "result-then-poll: why the poll could not be made.",
            },
        },
    ),
    "Complete": _object({"token": STRING}, {"output": ANY, "poll": _NEXT_POLL}),
    "Fail": _object(
        {"token": STRING, "error_code": STRING},
        {"error_message": STRING, "retryable": BOOLEAN, "details": ANY, "poll": _NEXT_POLL},
    ),
}

# Statuses the HTTP layer answers in plain text (chapter 67, "Errors").
PLAIN = {
    400: "The body is not valid JSON, or a query parameter is not a non-negative integer.",
    413: "The body is larger than --max-body.",
    415: "A body was sent without content-type: application/json.",
    422: "A required field is missing, or a field has the wrong type.",
}
JSON_ERRORS = {
    400: "A field's value is refused (the code says which).",
    401: "No credential, or one that matches nothing.",
    403: "The credential may not call this route.",
    404: "The named object does not exist (the code says which).",
    409: "A conflict with what exists (the code says which).",
    413: "The value is larger than --max-payload-bytes (PAYLOAD_TOO_LARGE).",
    422: "The value does not match its declaration (the code says which).",
    429: (
        "--max-active-executions executions are running (RESOURCE_EXHAUSTED), or a start "
        "finds its workflow's rate limit with on_exceed: drop reached (RATE_LIMITED)."
    ),
    500: "The database operation failed (STORAGE_ERROR); nothing was changed.",
}


def _error(status: int, *, plain: bool = False, envelope: bool = True) -> dict[str, Any]:
    content: dict[str, Any] = {}
    if envelope:
        content[JSON] = {"schema": _ref("Error")}
    if plain:
        content[TEXT] = {"schema": STRING}
    texts = ([JSON_ERRORS[status]] if envelope else []) + ([PLAIN[status]] if plain else [])
    return {"description": " Or: ".join(texts), "content": content}


def _ok(schema: str | Schema, description: str = "OK") -> dict[str, Any]:
    return {
        "description": description,
        "content": {JSON: {"schema": _ref(schema) if isinstance(schema, str) else schema}},
    }


def _operation(
    summary: str,
    access: str,
    responses: dict[int, dict[str, Any]],
    *,
    tag: str,
    body: str | Schema | None = None,
    body_required: bool = True,
    json_errors: tuple[int, ...] = (),
    params: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One operation. Every non-open route may answer 401/403, every route
    that touches the store 500, and every route with a body the HTTP
    layer's plain-text refusals."""
    merged: dict[int, dict[str, Any]] = dict(responses)
    plain = {413, 415, 400, 422} if body else set()
    if params and any(p["schema"].get("type") == "integer" for p in params):
        plain.add(400)
    errors = set(json_errors) | ({401, 403} if access != "open" else set())
    if access != "open":
        errors.add(500)
    for status in sorted(errors | plain):
        merged[status] = _error(status, plain=status in plain, envelope=status in errors)
    operation: dict[str, Any] = {
        "summary": summary,
        "tags": [tag],
        "x-orbit-access": access,
        "security": SECURITY[access],
        "responses": {str(status): merged[status] for status in sorted(merged)},
    }
    if params:
        operation["parameters"] = params
    if body:
        operation["requestBody"] = {
            "required": body_required,
            "content": {JSON: {"schema": _ref(body) if isinstance(body, str) else body}},
        }
    return operation


SECURITY: dict[str, list[dict[str, list[str]]]] = {
    "open": [],
    "worker": [{"admin": []}, {"worker": []}],
    "admin": [{"admin": []}],
}


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {**STRING, "minLength": 1},
    }


def _query_int(name: str, description: str, maximum: int = MAX_INT) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {**INTEGER, "minimum": 0, "maximum": maximum},
    }


def _query_string(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": STRING,
    }


EXECUTION_ID = _path_param("execution_id", "The execution id.")
SCHEDULE_ID = _path_param("schedule_id", "The schedule id.")


def _paths() -> dict[str, dict[str, Any]]:
    ex = "executions"
    archive = "archive"
    sched = "schedules"
    worker = "worker protocol"
    task_answer = _ok("TaskAnswer", "Whether the result was taken; `reason` says why not.")
    return {
        "/": {
            "get": _operation(
                "Redirects a browser to the web UI; 404 for other clients.",
                "open",
                {
                    302: {"description": "To /ui/, when Accept contains text/html."},
                    404: {
                        "description": "Not a browser.",
                        "content": {JSON: {"schema": _ref("Error")}},
                    },
                },
                tag="web UI",
            )
        },
        "/ui/": {
            "get": _operation(
                "The web UI.",
                "open",
                {200: {"description": "HTML", "content": {"text/html": {"schema": STRING}}}},
                tag="web UI",
            ),
            "head": _operation(
                "The web UI's headers, without the page.",
                "open",
                {200: {"description": "The headers GET would send"}},
                tag="web UI",
            ),
        },
        "/ui/{asset}": {
            "get": _operation(
                "A file of the web UI: app.js or app.css.",
                "open",
                {
                    200: {
                        "description": "The file",
                        "content": {
                            "text/javascript": {"schema": STRING},
                            "text/css": {"schema": STRING},
                        },
                    },
                    404: {
                        "description": "No such file.",
                        "content": {JSON: {"schema": _ref("Error")}},
                    },
                },
                tag="web UI",
                params=[_path_param("asset", "The file's name.")],
            ),
            "head": _operation(
                "A UI file's headers, without the file.",
                "open",
                {
                    200: {"description": "The headers GET would send"},
                    404: {"description": "No such file."},
                },
                tag="web UI",
                params=[_path_param("asset", "The file's name.")],
            ),
        },
        "/v1/health": {
            "get": _operation(
                "Liveness, versions and role.", "open", {200: _ok("Health")}, tag="health"
            )
        },
        "/v1/ready": {
            "get": _operation(
                "Readiness: 200 while the store can write (in a standby cluster, only on the leader; "
                "in a shared cluster, on every server that heartbeats).",
                "open",
                {
                    200: _ok("Ready"),
                    503: _ok("Ready", "The store cannot write, or a cluster standby."),
                },
                tag="health",
            )
        },
        "/v1/metrics": {
            "get": _operation(
                "Prometheus metrics (text exposition 0.0.4).",
                "admin",
                {200: {"description": "Metrics", "content": {TEXT: {"schema": STRING}}}},
                tag="health",
            )
        },
        PATH: {
            "get": _operation(
                "This document.", "admin", {200: _ok({"type": "object"})}, tag="health"
            )
        },
        "/v1/workflows": {
            "post": _operation(
                "Register a compiled definition.",
                "admin",
                {
                    200: _ok("WorkflowRegistered", "The same definition was registered before."),
                    201: _ok("WorkflowRegistered", "Registered."),
                },
                tag="workflows",
                body="IrDocument",
                json_errors=(400, 409),
            ),
            "get": _operation(
                "Every registered definition.", "admin", {200: _ok("WorkflowList")}, tag="workflows"
            ),
        },
        "/v1/workflows/{name}": {
            "get": _operation(
                "The IR of the highest version of a workflow.",
                "admin",
                {200: _ok("IrDocument")},
                tag="workflows",
                json_errors=(404,),
                params=[_path_param("name", "The workflow name.")],
            )
        },
        "/v1/workflows/{name}/{version}": {
            "get": _operation(
                "The IR of one version of a workflow.",
                "admin",
                {200: _ok("IrDocument")},
                tag="workflows",
                json_errors=(404,),
                params=[
                    _path_param("name", "The workflow name."),
                    _path_param("version", "The version."),
                ],
            )
        },
        "/v1/workflows/{name}/versions": {
            "get": _operation(
                "Per registered version: live executions, where they wait, drain status.",
                "admin",
                {200: _ok("VersionCensus")},
                tag="workflows",
                json_errors=(404,),
                params=[_path_param("name", "The workflow name.")],
            )
        },
        "/v1/workflows/{name}/migrations": {
            "get": _operation(
                "Plan a live migration: what moving each live execution would do.",
                "admin",
                {200: _ok("MigrationPlan")},
                tag="workflows",
                json_errors=(400, 404),
                params=[
                    _path_param("name", "The workflow name."),
                    _query_string("from", "The version the executions run."),
                    _query_string("to", "The version to move them to."),
                    _query_string("status", "Only executions in this status."),
                    _query_string(
                        "where",
                        "Only executions passing this filter (as ?where= of /v1/executions).",
                    ),
                ],
            ),
            "post": _operation(
                "Move live executions at a safe point to another version.",
                "admin",
                {200: _ok("MigrationRun")},
                tag="workflows",
                body="MigrationRequest",
                json_errors=(400, 404),
                params=[_path_param("name", "The workflow name.")],
            ),
        },
        "/v1/executions": {
            "post": _operation(
                "Start an execution.",
                "admin",
                {
                    200: _ok("ExecutionStarted", "The id exists for the same definition."),
                    201: _ok("ExecutionStarted", "Started."),
                },
                tag=ex,
                body="StartExecution",
                json_errors=(400, 404, 409, 413, 429),
            ),
            "get": _operation(
                "Executions, newest first.",
                "admin",
                {200: _ok("ExecutionList")},
                tag=ex,
                json_errors=(400,),
                params=[
                    _query_string("status", "Only this status (any case)."),
                    _query_string("workflow", "Only this workflow."),
                    _query_int("limit", "At most this many rows (default 50, 1 to 1000)."),
                    _query_string(
                        "where",
                        "A typed filter over built-in and declared search fields, e.g. "
                        '`customer == "c-1" and amount > 500` (INVALID_FILTER when it does not '
                        "parse or fit the fields); the answer then carries `next_cursor`.",
                    ),
                    _query_string("cursor", "The `next_cursor` of the previous page."),
                ],
            ),
        },
        "/v1/executions/{execution_id}": {
            "get": _operation(
                "The current state of an execution.",
                "admin",
                {200: _ok("Execution")},
                tag=ex,
                json_errors=(404,),
                params=[EXECUTION_ID],
            )
        },
        "/v1/executions/{execution_id}/history": {
            "get": _operation(
                "The event history of a run (the latest by default).",
                "admin",
                {200: _ok("History")},
                tag=ex,
                json_errors=(404,),
                params=[EXECUTION_ID, _query_int("run", "The run number.")],
            )
        },
        # Present only on a server started with --retention (docs/retention.md).
        "/v1/archive/executions": {
            "get": _operation(
                "Archived executions, newest first (only with --retention).",
                "admin",
                {200: _ok("ExecutionList")},
                tag=archive,
                json_errors=(400,),
                params=[
                    _query_string("status", "Only this status (any case)."),
                    _query_string("workflow", "Only this workflow."),
                    _query_int("limit", "At most this many rows (default 50, 1 to 1000)."),
                    _query_string(
                        "where",
                        "A typed filter as on GET /v1/executions, over the search values "
                        "the archive kept (INVALID_FILTER when it does not parse or fit the "
                        "fields); the answer then carries `next_cursor`.",
                    ),
                    _query_string("cursor", "The `next_cursor` of the previous page."),
                ],
            )
        },
        "/v1/archive/executions/{execution_id}": {
            "get": _operation(
                "The final state of an archived execution (only with --retention).",
                "admin",
                {200: _ok("Execution")},
                tag=archive,
                json_errors=(404,),
                params=[EXECUTION_ID],
            )
        },
        "/v1/archive/executions/{execution_id}/history": {
            "get": _operation(
                "The event history of a run of an archived execution (the latest by default; "
                "only with --retention).",
                "admin",
                {200: _ok("History")},
                tag=archive,
                json_errors=(404,),
                params=[EXECUTION_ID, _query_int("run", "The run number.")],
            )
        },
        "/v1/executions/{execution_id}/wait": {
            "get": _operation(
                "Wait until the execution is terminal or the timeout passes.",
                "admin",
                {200: _ok("Execution")},
                tag=ex,
                json_errors=(404,),
                params=[
                    EXECUTION_ID,
                    _query_int("timeout_ms", "Longest wait (default 30000).", 300_000),
                ],
            )
        },
        "/v1/executions/{execution_id}/cancel": {
            "post": _operation(
                "Request cancellation.",
                "admin",
                {200: _ok("Execution")},
                tag=ex,
                body="Cancel",
                body_required=False,
                json_errors=(404, 409),
                params=[EXECUTION_ID],
            )
        },
        "/v1/executions/{execution_id}/restart": {
            "post": _operation(
                "Start a new run from a step, keeping the outcomes of the steps that do not"
                " depend on it; with dry_run, only its effect preview (200).",
                "admin",
                {200: _ok("ActionAnswer"), 201: _ok("ActionAnswer", "Restarted")},
                tag=ex,
                body="Restart",
                json_errors=(400, 404, 409),
                params=[EXECUTION_ID],
            )
        },
        "/v1/executions/{execution_id}/fork": {
            "post": _operation(
                "Start a new execution with this one's outcomes before a step, optionally on"
                " another version; with dry_run, only its effect preview (200).",
                "admin",
                {200: _ok("ActionAnswer"), 201: _ok("ActionAnswer", "Forked")},
                tag=ex,
                body="Fork",
                json_errors=(400, 404, 409),
                params=[EXECUTION_ID],
            )
        },
        "/v1/executions/{execution_id}/pause": {
            "post": _operation(
                "Pause a running execution (beyond the book): nothing new is dispatched.",
                "admin",
                {200: _ok("Execution")},
                tag=ex,
                body="Pause",
                body_required=False,
                json_errors=(404, 409),
                params=[EXECUTION_ID],
            )
        },
        "/v1/executions/{execution_id}/resume": {
            "post": _operation(
                "Resume a paused execution (beyond the book).",
                "admin",
                {200: _ok("Execution")},
                tag=ex,
                json_errors=(404, 409),
                params=[EXECUTION_ID],
            )
        },
        "/v1/executions/{execution_id}/signals/{name}": {
            "post": _operation(
                "Send a typed signal; the body is its payload (default {}).",
                "admin",
                {200: _ok("SignalAccepted")},
                tag=ex,
                body={"type": "object", "description": "The signal's payload."},
                body_required=False,
                json_errors=(404, 409, 413, 422),
                params=[EXECUTION_ID, _path_param("name", "The signal name.")],
            )
        },
        "/v1/executions/{execution_id}/queries/{name}": {
            "get": _operation(
                "Evaluate a declared query.",
                "admin",
                {200: _ok("QueryResult")},
                tag=ex,
                json_errors=(404, 422),
                params=[EXECUTION_ID, _path_param("name", "The query name.")],
            )
        },
        "/v1/schedules": {
            "post": _operation(
                "Create a schedule.",
                "admin",
                {201: _ok("Schedule", "Created.")},
                tag=sched,
                body="ScheduleSettings",
                json_errors=(400, 404, 409),
            ),
            "get": _operation(
                "Every schedule, by id.", "admin", {200: _ok("ScheduleList")}, tag=sched
            ),
        },
        "/v1/schedules/{schedule_id}": {
            "get": _operation(
                "One schedule, with its next fire times.",
                "admin",
                {200: _ok("Schedule")},
                tag=sched,
                json_errors=(404,),
                params=[SCHEDULE_ID],
            ),
            "patch": _operation(
                "Change a schedule.",
                "admin",
                {200: _ok("Schedule")},
                tag=sched,
                body="ScheduleSettings",
                json_errors=(400, 404),
                params=[SCHEDULE_ID],
            ),
            "delete": _operation(
                "Delete a schedule (its executions are not touched).",
                "admin",
                {200: _ok("ScheduleDeleted")},
                tag=sched,
                json_errors=(404,),
                params=[SCHEDULE_ID],
            ),
        },
        **{
            f"/v1/schedules/{{schedule_id}}/{action}": {
                "post": _operation(
                    summary,
                    "admin",
                    {200: _ok("Schedule")},
                    tag=sched,
                    json_errors=(404,),
                    params=[SCHEDULE_ID],
                )
            }
            for action, summary in [
                ("pause", "Pause a schedule."),
                ("resume", "Resume a schedule from now."),
            ]
        },
        "/v1/schedules/{schedule_id}/trigger": {
            "post": _operation(
                "Start an execution of the schedule now.",
                "admin",
                {200: _ok("ScheduleTriggered")},
                tag=sched,
                json_errors=(400, 404, 409, 413, 429),
                params=[SCHEDULE_ID],
            )
        },
        "/v1/workers": {
            "get": _operation(
                "Every worker that registered.", "admin", {200: _ok("WorkerList")}, tag=worker
            )
        },
        "/v1/workers/register": {
            "post": _operation(
                "Open a worker session.",
                "worker",
                {200: _ok("Registered")},
                tag=worker,
                body="Register",
                json_errors=(400, 409),
            )
        },
        "/v1/workers/heartbeat": {
            "post": _operation(
                "Keep a session alive; learn which tasks to stop.",
                "worker",
                {200: _ok("Heartbeat")},
                tag=worker,
                body="Session",
                json_errors=(404,),
            )
        },
        "/v1/workers/poll": {
            "post": _operation(
                "Wait for a task.",
                "worker",
                {200: _ok("Task"), 204: {"description": "No task arrived within wait_ms."}},
                tag=worker,
                body="Poll",
                json_errors=(404,),
            )
        },
        "/v1/workers/unregister": {
            "post": _operation(
                "Close a session; the tasks it holds are redelivered.",
                "worker",
                {200: _ok("Accepted")},
                tag=worker,
                body="Session",
                json_errors=(404,),
            )
        },
        "/v1/tasks/complete": {
            "post": _operation(
                "Report a task's result.",
                "worker",
                {200: task_answer},
                tag=worker,
                body="Complete",
                json_errors=(400, 413),
            )
        },
        "/v1/tasks/fail": {
            "post": _operation(
                "Report a failed attempt.",
                "worker",
                {200: task_answer},
                tag=worker,
                body="Fail",
                json_errors=(400,),
            )
        },
    }


@functools.cache
def document() -> dict[str, Any]:
    """The OpenAPI document (built once; treat it as read-only)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ORBIT HTTP API",
            "version": __version__,
            "summary": "The administrative API and the worker protocol's HTTP/JSON binding.",
            "description": (
                "Versioned by path (/v1, `orbit-api/1`); responses may gain fields. Errors "
                'of ORBIT use the JSON envelope `{"error": {"code", "message"}}`; '
                "refusals of the HTTP layer are plain text. Routes marked `x-orbit-access: "
                "open` never need a credential; when the server has a --token, `admin` "
                "routes need it and `worker` routes take it or the worker token."
            ),
        },
        "servers": [{"url": "http://127.0.0.1:7233"}],
        "paths": _paths(),
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "admin": {"type": "http", "scheme": "bearer", "description": "--token"},
                "worker": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "--worker-token or a per-worker identity",
                },
            },
        },
    }


def dumps() -> str:
    """The document as the text of docs/openapi.json."""
    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"


class OpenApi:
    """GET /v1/openapi.json."""

    def __init__(self) -> None:
        self._data = dumps().encode()

    def on_get(self, req: Any, resp: Any) -> None:
        resp.content_type = JSON
        resp.data = self._data


if __name__ == "__main__":  # python -m orbit_server.openapi docs/openapi.json
    Path(sys.argv[1]).write_text(dumps())
