"""The web UI says why a step waits, in `orbit status`'s words, and never
shows an earlier attempt's worker as the worker of a step that waits; its
workers view marks announced tasks that no deployed workflow calls.

One execution of `Why` holds a step of each kind of wait: a task no worker
serves, a task whose first attempt failed and waits an hour to retry, a
timer and a signal. Headless Chromium, as in test_ui_browser.py."""

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

ADMIN = "why-admin-token"
WHY = """\
task "greeting.compose" {
    version "1.0.0"
    input { name: String }
    output { message: String }
}

task "t.flaky" {
    version "1.0.0"
    input { n: Int }
    output { n: Int }
}

workflow Why {
    version "1.0.0"
    signal go { ok: Bool }
    step nobody {
        worker "greeting.compose"
        with { name: "Ada" }
    }
    step flaky {
        worker "t.flaky"
        with { n: 1 }
        retry { attempts: 3, backoff: fixed, initial_delay: 1h }
    }
    step nap { sleep 1h }
    step hold { await go timeout 1d }
    return { ok: hold.ok }
}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("why")
    stack = Stack(root)
    try:
        server = stack.server("--token", ADMIN)
        source = root / "why.orbit"
        source.write_text(WHY, encoding="utf-8")
        cli = stack.cli(server)
        cli.ok("deploy", str(source), "--token", ADMIN)
        http = Http(f"127.0.0.1:{server.port}", ADMIN)
        flaky = RawWorker(http, "flaky-1", [("t.flaky", "1.0.0")])
        assert flaky.register().status == 200
        # A worker that announces a misspelt task as well.
        typo = RawWorker(http, "typo-1", [("greeting.compse", "1.0.0")])
        assert typo.register().status == 200
        reply = http.post("/v1/executions", {"workflow": "Why", "execution_id": "why-1"})
        assert reply.status == 201, reply
        task = flaky.task()
        failed = flaky.fail(task["token"], "BUSY", error_message="try later", retryable=True)
        assert failed.status == 200, failed

        def retrying() -> bool:
            state = http.get("/v1/executions/why-1").body
            return bool(state["units"].get("flaky", {}).get("status") == "RETRY_WAIT")

        wait_until(retrying, 30, "flaky waits to retry")
        http.close()
        yield server
    finally:
        stack.close()


def sign_in(page: Page, server: Server) -> None:
    page.goto(f"{server.url}/ui/")
    page.get_by_label("Token").fill(ADMIN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#nav")).to_be_visible()


def row(page: Page, unit: str) -> Any:
    return (
        page.locator("#p-steps")
        .locator("xpath=..")
        .locator("tbody tr")
        .filter(has=page.locator(f"td:first-child:text-is('{unit}')"))
    )


def test_each_waiting_step_says_what_it_waits_for(server: Server, page: Page, shots: Path) -> None:
    sign_in(page, server)
    page.goto(f"{server.url}/ui/#/executions/why-1")
    nobody = row(page, "nobody")
    expect(nobody.locator(".why")).to_have_text("no worker is polling for greeting.compose@1.0.0")
    expect(row(page, "nap").locator(".why")).to_contain_text("timer fires ")
    expect(row(page, "hold").locator(".why")).to_contain_text("waiting for signal go, times out ")
    flaky = row(page, "flaky")
    expect(flaky.locator(".why")).to_contain_text("waiting to retry, due ")
    # The worker column (the fifth) is empty: flaky-1 ran the failed attempt, not this wait.
    expect(flaky.locator("td").nth(4)).to_have_text("")
    expect(flaky).to_contain_text("earlier attempt on worker flaky-1")
    expect(flaky).to_contain_text("BUSY: try later")
    page.screenshot(path=str(shots / "execution-why.png"), full_page=True)


def test_the_workers_view_marks_unused_tasks(server: Server, page: Page, shots: Path) -> None:
    sign_in(page, server)
    page.goto(f"{server.url}/ui/#/workers")
    typo = page.locator("tbody tr").filter(has=page.locator("td:first-child:text-is('typo-1')"))
    expect(typo.locator(".unused")).to_have_text("unused")
    flaky = page.locator("tbody tr").filter(has=page.locator("td:first-child:text-is('flaky-1')"))
    expect(flaky).to_be_visible()
    expect(flaky.locator(".unused")).to_have_count(0)
    expect(page.get_by_role("note")).to_contain_text("called by no deployed workflow")
    page.screenshot(path=str(shots / "workers-unused.png"), full_page=True)
