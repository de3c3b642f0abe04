"""Issue 44's check, on a real `orbit server`: with examples/visibility.orbit
deployed and (c-1, 100.0), (c-1, 600.0), (c-2, 700.0) started, `orbit ps
--where 'customer == "c-1" and amount > 500'` lists exactly the second, so
does `GET /v1/executions?where=...`, and a filter on an undeclared field is
refused naming it (exit 2; 400 INVALID_FILTER). On SQLite, PostgreSQL, and
two servers in shared mode (started on one, found through the other)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from cli_real import REPO, Orbit
from server_harness import ServerProcess

pytestmark = pytest.mark.timeout(120)

EXAMPLE = REPO / "examples" / "visibility.orbit"
FILTER = 'customer == "c-1" and amount > 500'
SHARED = ["--cluster", "--cluster-mode", "shared", "--session-timeout", "2", "--node-timeout", "2"]


@pytest.fixture(params=["sqlite", "postgres", "shared"])
def servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            yield [stack.enter_context(ServerProcess(tmp_path / "orbit.db"))]
        elif request.param == "postgres":
            url = request.getfixturevalue("pg_url")
            yield [stack.enter_context(ServerProcess(url))]
        else:
            url = request.getfixturevalue("pg_url")
            env = {"ORBIT_CLUSTER_INTERVAL_MS": "200"}
            yield [
                stack.enter_context(ServerProcess(url, *SHARED, "--node-id", node, env=env))
                for node in ("a", "b")
            ]


def test_the_example_filter_over_cli_and_http(servers: list[ServerProcess]) -> None:
    first, last = servers[0], servers[-1]
    orbit = Orbit(f"http://{first.addr}")
    deployed = orbit("deploy", str(EXAMPLE))
    assert deployed.exit_code == 0, deployed.output
    api = first.http()
    for eid, customer, amount in (
        ("o-1", "c-1", 100.0),
        ("o-2", "c-1", 600.0),
        ("o-3", "c-2", 700.0),
    ):
        reply = api.post(
            "/v1/executions",
            {
                "workflow": "Orders",
                "input": {"customer": customer, "amount": amount},
                "execution_id": eid,
            },
        )
        assert reply.status == 201, reply

    # Read through the other server in shared mode: the values are in the database.
    reader = Orbit(f"http://{last.addr}")
    listed = reader("ps", "--where", FILTER)
    assert listed.exit_code == 0, listed.output
    rows = listed.output.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["o-2"]

    reply = last.http().get(f"/v1/executions?where={quote(FILTER)}")
    assert reply.status == 200, reply
    assert [e["execution_id"] for e in reply.body["executions"]] == ["o-2"]
    assert reply.body["next_cursor"] is None

    refused = reader("ps", "--where", "nosuch == 1")
    assert refused.exit_code == 2
    assert "unknown field `nosuch`" in refused.output
    reply = last.http().get(f"/v1/executions?where={quote('nosuch == 1')}")
    assert reply.status == 400
    assert reply.body["error"]["code"] == "INVALID_FILTER"
    assert "unknown field `nosuch`" in reply.body["error"]["message"]


def test_a_filter_that_does_not_parse_is_shown_where_it_breaks(
    servers: list[ServerProcess],
) -> None:
    orbit = Orbit(f"http://{servers[0].addr}")
    refused = orbit("ps", "--where", "customer = 1")
    assert refused.exit_code == 2
    assert refused.output == (
        "error: invalid filter at column 10: unexpected character `=` (equality is `==`)\n"
        "  customer = 1\n           ^\n"
    )
