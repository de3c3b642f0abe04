"""What the deploy and compat safety nets ask the census (issue 41).

Both read `GET /v1/workflows/{name}/versions`, the document `orbit versions`
prints. A workflow the runtime does not know has no live executions, so it
is drained by definition; any other refusal of the runtime is reported as
usual.
"""

from __future__ import annotations

from typing import Any

from orbit_cli.client import ApiError, RuntimeClient, path


def census(client: RuntimeClient, workflow: str) -> list[dict[str, Any]]:
    """The census rows of `workflow`, oldest version first; none when the
    runtime does not know the workflow."""
    try:
        doc = client.get(path("v1", "workflows", workflow, "versions"))
    except ApiError as exc:
        if exc.code == "WORKFLOW_NOT_FOUND":
            return []
        raise
    rows: list[dict[str, Any]] = doc.get("versions", [])
    return rows


def live_of(rows: list[dict[str, Any]], version: str) -> int:
    """How many executions of `version` are live (0 when it is not registered)."""
    return sum(int(row.get("live", 0)) for row in rows if row.get("version") == version)
