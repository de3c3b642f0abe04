"""Batches selected by the typed filter (docs/operating-executions.md): `orbit
pause|restart|cancel --workflow W --where FILTER` and `POST /v1/batches` with
`filter.where` select what `orbit ps --where` lists, `--dry-run` shows that
selection, and a bad filter is refused as `ps --where` refuses it (exit 2;
400 INVALID_FILTER). On SQLite, PostgreSQL, and two servers in shared mode
(the batch created through one, read through the other)."""

from __future__ import annotations

import pytest
from cli_real import Orbit
from fixtures_orbit import ORDERS_EXAMPLE as EXAMPLE
from fixtures_orbit import ORDERS_FILTER as FILTER
from fixtures_orbit import start_orders
from server_harness import ServerProcess

pytestmark = pytest.mark.timeout(180)


def test_batches_select_with_the_typed_filter(orders_servers: list[ServerProcess]) -> None:
    first, last = orders_servers[0], orders_servers[-1]
    orbit = Orbit(f"http://{first.addr}")
    orbit.ok("deploy", str(EXAMPLE))
    api = first.http()
    start_orders(api)
    other = Orbit(f"http://{last.addr}")

    dry = other.ok("pause", "--workflow", "Orders", "--where", FILTER, "--dry-run")
    assert dry.stdout == f"would pause 1 execution (workflow Orders, where {FILTER})\n  o-2\n"
    assert all("paused" not in api.get(f"/v1/executions/{e}").body for e in ("o-1", "o-2", "o-3"))

    paused = orbit.ok("pause", "--workflow", "Orders", "--where", FILTER, "--reason", "audit")
    assert paused.stdout == "paused 1, skipped 0, failed 0\n"
    assert api.get("/v1/executions/o-2").body["pause_reason"] == "audit"
    assert "paused" not in api.get("/v1/executions/o-1").body
    assert "paused" not in api.get("/v1/executions/o-3").body
    listed = last.http().get("/v1/batches").body["batches"]
    assert listed[0]["filter"] == {"workflow": "Orders", "where": FILTER}
    assert listed[0]["state"] == "done" and listed[0]["total"] == 1

    # With --status too, and through HTTP.
    chosen = {"workflow": "Orders", "status": "RUNNING", "where": "amount > 500"}
    reply = last.http().post("/v1/batches", {"action": "resume", "filter": chosen, "dry_run": True})
    assert reply.status == 200, reply
    assert reply.body["executions"] == ["o-2", "o-3"] and reply.body["filter"] == chosen

    restart = other.ok(
        "restart", "--workflow", "Orders", "--from", "work", "--where", FILTER, "--dry-run"
    )
    assert restart.stdout.splitlines() == [
        f"would restart 1 execution (workflow Orders, where {FILTER})",
        "  o-2",
    ]

    cancelled = other.ok("cancel", "--workflow", "Orders", "--where", "amount > 500")
    assert cancelled.stdout == "cancelled 2, skipped 0, failed 0\n"
    statuses = {e: api.get(f"/v1/executions/{e}").body["status"] for e in ("o-1", "o-2", "o-3")}
    assert statuses == {"o-1": "RUNNING", "o-2": "CANCELLED", "o-3": "CANCELLED"}


def test_a_bad_filter_is_refused_as_ps_refuses_it(orders_servers: list[ServerProcess]) -> None:
    server = orders_servers[-1]
    orbit = Orbit(f"http://{server.addr}")
    orbit.ok("deploy", str(EXAMPLE))
    for action in ("pause", "resume", "cancel"):
        refused = orbit(action, "--workflow", "Orders", "--where", "nosuch == 1")
        assert refused.exit_code == 2, (action, refused.output)
        assert "unknown field `nosuch`" in refused.output
    refused = orbit("restart", "--workflow", "Orders", "--from", "work", "--where", "x ==")
    assert refused.exit_code == 2
    refused = orbit("pause", "--workflow", "Orders", "--where", "customer = 1", "--dry-run")
    assert refused.exit_code == 2
    assert refused.output == (
        "error: invalid filter at column 10: unexpected character `=` (equality is `==`)\n"
        "  customer = 1\n           ^\n"
    )
    api = server.http()
    for where in ("nosuch == 1", "customer = 1"):
        for dry_run in (True, False):
            reply = api.post(
                "/v1/batches",
                {
                    "action": "pause",
                    "filter": {"workflow": "Orders", "where": where},
                    "dry_run": dry_run,
                },
            )
            assert reply.status == 400, reply
            assert reply.body["error"]["code"] == "INVALID_FILTER"
    assert api.get("/v1/batches").body == {"batches": []}
    # --where goes with --workflow.
    usage = orbit("pause", "o-1", "--where", "amount > 1")
    assert usage.exit_code == 2
