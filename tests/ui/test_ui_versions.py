"""Versions in production in the web UI (issue 41): the workflow page shows
the census and drain status of every registered version, and the execution
page shows a live migration as the versions it moved between.

An execution of Approval 1.0.0 waits for `approve`; 2.0.0 is deployed; the
page of Approval shows 1.0.0 draining with the execution waiting in
`approval`; after `POST /v1/workflows/Approval/migrations` moves it, 1.0.0
is drained and the execution's history and summary read `1.0.0 → 2.0.0`.
Headless Chromium, as in test_ui_browser.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")

from e2e_processes import Server, Stack
from playwright.sync_api import Page, expect
from server_harness import Http, RawWorker, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ADMIN = "versions-admin-token"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "migration"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("versions")
    stack = Stack(root)
    try:
        server = stack.server("--token", ADMIN)
        cli = stack.cli(server)
        cli.ok("deploy", str(EXAMPLES / "approval-v1.orbit"), "--token", ADMIN)
        http = Http(f"127.0.0.1:{server.port}", ADMIN)
        reply = http.post(
            "/v1/executions",
            {"workflow": "Approval", "execution_id": "ap-1", "input": {"id": "ap-1"}},
        )
        assert reply.status == 201, reply
        worker = RawWorker(http, "w1", [("approvals.notify", "1.0.0")])
        assert worker.register().status == 200
        task = worker.task()
        assert worker.complete(task["token"], {}).status == 200

        def waiting() -> bool:
            units = http.get("/v1/executions/ap-1").body["units"]
            return bool(units.get("approval", {}).get("status") == "WAITING")

        wait_until(waiting, 30, "ap-1 waits for approve")
        cli.ok("deploy", str(EXAMPLES / "approval-v2.orbit"), "--token", ADMIN)
        http.close()
        yield server
    finally:
        stack.close()


def sign_in(page: Page, server: Server) -> None:
    page.goto(f"{server.url}/ui/")
    page.get_by_label("Token").fill(ADMIN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#nav")).to_be_visible()


def version_row(page: Page, version: str) -> Any:
    return (
        page.locator("#p-versions-in-production")
        .locator("xpath=..")
        .locator("tbody tr")
        .filter(has=page.get_by_role("link", name=version, exact=True))
    )


def test_census_drain_and_migration(server: Server, page: Page, shots: Path) -> None:
    sign_in(page, server)
    page.goto(f"{server.url}/ui/#/workflows/Approval/2.0.0")
    old = version_row(page, "1.0.0")
    expect(old.locator(".st")).to_have_text("draining")
    expect(old.locator("td").nth(2)).to_have_text("1")
    expect(old).to_contain_text("approval (signal): 1")
    expect(version_row(page, "2.0.0").locator(".st")).to_have_text("current")
    page.screenshot(path=str(shots / "workflow-versions-draining.png"), full_page=True)

    http = Http(f"127.0.0.1:{server.port}", ADMIN)
    moved = http.post("/v1/workflows/Approval/migrations", {"from": "1.0.0", "to": "2.0.0"})
    assert moved.status == 200 and moved.body["migrated"] == 1, moved
    http.close()

    page.reload()
    old = version_row(page, "1.0.0")
    expect(old.locator(".st")).to_have_text("drained")
    expect(old.locator("td").nth(2)).to_have_text("0")

    page.goto(f"{server.url}/ui/#/executions/ap-1")
    history = page.locator("#p-history").locator("xpath=..")
    migrated = history.locator("tbody tr").filter(has=page.get_by_text("WorkflowMigrated"))
    expect(migrated.locator(".migrated")).to_have_text("1.0.0 → 2.0.0")
    summary = page.locator("#p-execution").locator("xpath=..")
    expect(summary).to_contain_text("Approval 2.0.0")
    expect(summary).to_contain_text("1.0.0 → 2.0.0 at ")
    page.screenshot(path=str(shots / "execution-migrated.png"), full_page=True)
