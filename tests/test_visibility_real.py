"""Issue 44's check, on a real `orbit server`: with examples/visibility.orbit
deployed and (c-1, 100.0), (c-1, 600.0), (c-2, 700.0) started, `orbit ps
--where 'customer == "c-1" and amount > 500'` lists exactly the second, so
does `GET /v1/executions?where=...`, and a filter on an undeclared field is
refused naming it (exit 2; 400 INVALID_FILTER). On SQLite, PostgreSQL, and
two servers in shared mode (started on one, found through the other)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from cli_real import Orbit
from fixtures_orbit import ORDERS_EXAMPLE as EXAMPLE
from fixtures_orbit import ORDERS_FILTER as FILTER
from fixtures_orbit import start_orders
from server_harness import ServerProcess

pytestmark = pytest.mark.timeout(120)


def test_the_example_filter_over_cli_and_http(orders_servers: list[ServerProcess]) -> None:
    first, last = orders_servers[0], orders_servers[-1]
    orbit = Orbit(f"http://{first.addr}")
    deployed = orbit("deploy", str(EXAMPLE))
    assert deployed.exit_code == 0, deployed.output
    start_orders(first.http())

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
    orders_servers: list[ServerProcess],
) -> None:
    orbit = Orbit(f"http://{orders_servers[0].addr}")
    refused = orbit("ps", "--where", "customer = 1")
    assert refused.exit_code == 2
    assert refused.output == (
        "error: invalid filter at column 10: unexpected character `=` (equality is `==`)\n"
        "  customer = 1\n           ^\n"
    )
