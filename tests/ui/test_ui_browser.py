"""The web UI (chapter 47) in a real browser: Debian's Chromium, headless,
driven by Playwright, against a real `orbit server` with an admin token, a
worker token, a client identity and a real Python worker (tests/ui/ui_worker.py).

What a person does: sign in, start a workflow and watch it progress without
reloading, run a query, send a signal through the typed form, cancel an
execution, and sign in as a client identity that sees only its workflow.
Every view is screenshot into build/ui-screenshots/ (conftest.SHOTS) and
checked with axe-core (no serious or critical violations). The execution
list with 10,000 executions must draw its first page within 300 ms.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import http.client
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")
pytest.importorskip("axe_playwright_python")

from axe_playwright_python.sync_playwright import Axe
from e2e_processes import ORBIT, Server, Stack, Worker, clean_env
from playwright.sync_api import Page, expect
from server_harness import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

HERE = Path(__file__).resolve().parent
EXPENSE = HERE.parents[0] / "e2e" / "projects" / "expense" / "expense.orbit"
ADMIN = "ui-admin-token"
WORKER_TOKEN = "ui-worker-token"
CLIENT = "ui-billing-token"
MANY = 10_000
FIRST_PAGE_MS = 300


@dataclass
class Ui:
    server: Server
    worker: Worker
    shots: Path

    @property
    def url(self) -> str:
        return f"{self.server.url}/ui/"

    def call(self, method: str, path: str, body: Any = None, token: str = ADMIN) -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        try:
            headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
            conn.request(method, path, None if body is None else json.dumps(body), headers)
            reply = conn.getresponse()
            raw = reply.read()
            assert reply.status < 300, (method, path, reply.status, raw)
            return json.loads(raw) if raw else None
        finally:
            conn.close()

    def start(self, execution_id: str, amount: float) -> None:
        claim = {"claim_id": execution_id, "employee": "ann", "manager": "bo", "amount": amount}
        body = {"workflow": "ExpenseClaim", "execution_id": execution_id, "input": claim}
        self.call("POST", "/v1/executions", body)

    def status(self, execution_id: str) -> str:
        return str(self.call("GET", f"/v1/executions/{execution_id}")["status"])

    def shot(self, page: Page, name: str) -> None:
        page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)

    def check_accessible(self, page: Page, name: str) -> None:
        results = Axe().run(page)
        serious = [
            v for v in results.response["violations"] if v.get("impact") in {"serious", "critical"}
        ]
        assert not serious, f"{name}: " + json.dumps(
            [(v["id"], v["help"], [n["target"] for n in v["nodes"]]) for v in serious], indent=1
        )


def _orbit(server: Server, *args: str) -> None:
    env = clean_env({"ORBIT_SERVER": server.url, "ORBIT_TOKEN": ADMIN})
    done = subprocess.run(
        [ORBIT, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory, shots: Path) -> Iterator[Ui]:
    root = tmp_path_factory.mktemp("ui")
    workers_file = root / "workers.toml"
    digest = hashlib.sha256(CLIENT.encode()).hexdigest()
    workers_file.write_text(
        f'[[client]]\nid = "billing"\ntoken_sha256 = "{digest}"\n'
        'workflows = ["ExpenseClaim"]\nactions = ["read", "query"]\n'
    )
    stack = Stack(root)
    try:
        server = stack.server(
            "--token", ADMIN, "--worker-token", WORKER_TOKEN, "--workers-file", str(workers_file)
        )
        _orbit(server, "deploy", str(EXPENSE))
        _orbit(server, "deploy", str(HERE / "tick.orbit"))
        _orbit(server, "deploy", str(HERE / "rounds.orbit"))
        worker = stack.python_worker(
            "ui-python", HERE / "ui_worker.py", server, env={"ORBIT_WORKER_TOKEN": WORKER_TOKEN}
        )
        yield Ui(server, worker, shots)
    finally:
        stack.close()


def sign_in(page: Page, ui: Ui, token: str = ADMIN) -> None:
    page.goto(ui.url)
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#nav")).to_be_visible()


def test_sign_in_refuses_a_bad_token_and_keeps_the_good_one_per_tab(ui: Ui, page: Page) -> None:
    page.goto(ui.url)
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    ui.shot(page, "sign-in")
    ui.check_accessible(page, "sign-in")
    page.get_by_label("Token").fill("not-a-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Token rejected")).to_be_visible()
    # A worker credential cannot sign in: the API refuses it on executions.
    page.get_by_label("Token").fill(WORKER_TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Not permitted")
    sign_in(page, ui)
    expect(page.locator("#who")).to_have_text("Admin token")
    # Kept in the tab's sessionStorage: a reload stays signed in, never in the URL.
    page.reload()
    expect(page.locator("#who")).to_have_text("Admin token")
    assert ADMIN not in page.url
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_an_execution_progresses_live_through_a_query_and_a_signal(ui: Ui, page: Page) -> None:
    ui.start("claim-live", 500.0)
    sign_in(page, ui)
    page.goto(f"{ui.url}#/executions/claim-live")
    expect(page.get_by_role("heading", name="Execution claim-live")).to_be_visible()
    steps = page.locator("#p-steps").locator("xpath=..")
    expect(steps.get_by_role("row", name="manager")).to_contain_text("WAITING")
    expect(steps.get_by_role("row", name="pay")).to_contain_text("not started")
    page.get_by_role("button", name="Run status").click()
    expect(page.locator("#p-actions").locator("xpath=..")).to_contain_text(
        '"waiting_for": "manager"'
    )
    ui.shot(page, "execution-waiting")
    ui.check_accessible(page, "execution detail")

    form = page.locator("form[data-signal=manager_review]")
    form.get_by_label("approved *").select_option("true")
    form.get_by_label("by *").fill("bo")
    form.get_by_role("button", name="Send manager_review").click()
    expect(form).to_contain_text("Signal accepted as history event")
    # No reload: the page's own polling shows the step and the execution finish.
    expect(steps.get_by_role("row", name="pay")).to_contain_text("SUCCEEDED", timeout=30_000)
    status = page.locator("#p-execution").locator("xpath=..")
    expect(status).to_contain_text("COMPLETED", timeout=30_000)
    expect(page.locator("#p-input-and-result").locator("xpath=..")).to_contain_text(
        '"payment_id": "pay-claim-live"'
    )
    expect(page.locator("[data-node=pay]")).to_have_class("node g-SUCCEEDED")
    expect(page.get_by_role("button", name="Cancel execution")).to_be_disabled()
    ui.shot(page, "execution-completed")


def test_a_refused_signal_shows_the_servers_message(ui: Ui, page: Page) -> None:
    ui.start("claim-bad", 500.0)
    sign_in(page, ui)
    page.goto(f"{ui.url}#/executions/claim-bad")
    form = page.locator("form[data-signal=manager_review]")
    form.get_by_label("by *").fill("bo")  # `approved` is required and left empty
    form.get_by_role("button", name="Send manager_review").click()
    expect(form.get_by_role("alert")).to_contain_text("SIGNAL_PAYLOAD_INVALID")
    assert ui.status("claim-bad") == "RUNNING"


def test_cancel_asks_for_confirmation_then_cancels(ui: Ui, page: Page) -> None:
    ui.start("claim-cancel", 500.0)
    sign_in(page, ui)
    page.goto(f"{ui.url}#/executions/claim-cancel")
    page.get_by_role("button", name="Cancel execution").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_label("Reason (optional)").fill("duplicate claim")
    ui.shot(page, "cancel-confirmation")
    dialog.get_by_role("button", name="Confirm cancel").click()
    status = page.locator("#p-execution").locator("xpath=..")
    expect(status).to_contain_text("CANCELLED", timeout=30_000)
    assert ui.status("claim-cancel") == "CANCELLED"
    history = page.locator("#p-history").locator("xpath=..")
    history.get_by_text("CancelRequested", exact=True).click()
    expect(history).to_contain_text("duplicate claim")


def test_every_view_draws_is_accessible_and_fits_a_phone(ui: Ui, page: Page) -> None:
    schedule = {
        "schedule_id": "nightly-claims",
        "workflow": "ExpenseClaim",
        "cron": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "input": {"claim_id": "n", "employee": "ann", "manager": "bo", "amount": 10.0},
        "paused": True,
    }
    ui.call("POST", "/v1/schedules", schedule)
    ui.start("claim-view", 50.0)  # below 100: no review, it completes at once
    ui.start("claim-view-waiting", 500.0)
    sign_in(page, ui)
    views = {
        "overview": ("#/", "Overview", "payments.pay"),
        "executions": ("#/executions", "Executions", "claim-view-waiting"),
        "executions-filtered": ("#/executions?status=RUNNING", "Executions", "claim-view-waiting"),
        "workflows": ("#/workflows", "Workflows", "ExpenseClaim"),
        "workflow": (
            "#/workflows/ExpenseClaim/1.0.0",
            "Workflow ExpenseClaim 1.0.0",
            "manager_review",
        ),
        "schedules": ("#/schedules", "Schedules", "nightly-claims"),
        "schedule": ("#/schedules/nightly-claims", "Schedule nightly-claims", "Europe/Berlin"),
        "workers": ("#/workers", "Workers", "ui-python"),
    }
    for name, (hash_, heading, text) in views.items():
        page.goto(ui.url + hash_)
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        expect(page.locator("main")).to_contain_text(text)
        ui.shot(page, name)
        ui.check_accessible(page, name)
    # The overview's Online count comes from /v1/workers.
    page.goto(ui.url + "#/")
    expect(page.locator("#p-workers").locator("xpath=..")).to_contain_text("Online1")

    # The list's filters live in the URL, so a filtered list can be bookmarked.
    page.goto(ui.url + "#/executions")
    page.get_by_label("Status").select_option("COMPLETED")
    expect(page).to_have_url(f"{ui.url}#/executions?status=COMPLETED")
    expect(page.locator("main")).to_contain_text("claim-view")
    expect(page.locator("main")).not_to_contain_text("claim-view-waiting")

    # New schedule: the server validates, and its error shows under the form.
    page.goto(ui.url + "#/schedules")
    page.get_by_role("button", name="New schedule").click()
    form = page.get_by_role("form", name="New schedule")
    form.get_by_label("Id *").fill("bad-hour")
    form.get_by_label("Workflow *").fill("ExpenseClaim")
    form.get_by_label("Cron expression").fill("0 25 * * *")
    form.get_by_role("button", name="Create schedule").click()
    expect(form.get_by_role("alert")).to_contain_text("INVALID_SCHEDULE")

    # Schedule actions: trigger now starts an execution and links it.
    page.goto(ui.url + "#/schedules/nightly-claims")
    page.get_by_role("button", name="Trigger now").click()
    expect(page.get_by_role("status")).to_contain_text("Started nightly-claims:manual:")

    # Pause, resume, delete (with its confirmation).
    page.get_by_role("button", name="Resume").click()
    expect(page.get_by_role("status")).to_contain_text("Resume done")
    expect(page.locator("main")).to_contain_text("active")
    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("status")).to_contain_text("Pause done")
    page.get_by_role("button", name="Delete schedule…").click()
    page.get_by_role("dialog").get_by_role("button", name="Confirm delete").click()
    expect(page).to_have_url(f"{ui.url}#/schedules")
    expect(page.locator("main")).to_contain_text("No schedules")

    # Keyboard: the skip link and the navigation are reachable with Tab.
    page.goto(ui.url + "#/")
    page.reload()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")  # the skip link moves focus to the view, not the route
    expect(page.locator("main")).to_be_focused()
    expect(page).to_have_url(f"{ui.url}#/")
    page.reload()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Overview")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Executions", exact=True)).to_be_visible()

    # Phone width: nothing wider than the screen but the scrolling tables.
    page.set_viewport_size({"width": 375, "height": 800})
    for name in ("overview", "executions", "workflow"):
        page.goto(ui.url + views[name][0])
        expect(page.locator("main")).to_contain_text(views[name][2])
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"{name} is {width}px wide on a 375px screen"
        ui.shot(page, f"phone-{name}")


def test_earlier_runs_are_shown_read_only_from_their_history(ui: Ui, page: Page) -> None:
    ui.call(
        "POST", "/v1/executions", {"workflow": "Rounds", "execution_id": "rounds-1", "input": {}}
    )
    wait_until(lambda: ui.status("rounds-1") == "COMPLETED", 30, "rounds-1 to complete")
    sign_in(page, ui)
    page.goto(f"{ui.url}#/executions/rounds-1")
    execution = page.locator("#p-execution").locator("xpath=..")
    expect(execution).to_contain_text("(run 3)")
    page.get_by_label("Run").select_option("1")
    expect(page).to_have_url(f"{ui.url}#/executions/rounds-1?run=1")
    expect(page.get_by_role("heading", name="Execution rounds-1 run 1")).to_be_visible()
    run = page.locator("#p-run").locator("xpath=..")
    expect(run).to_contain_text("Run 1 of 3")
    expect(run).to_contain_text("CONTINUED_AS_NEW")
    expect(page.locator("#p-input-and-next-input").locator("xpath=..")).to_contain_text(
        '"round": 2'
    )
    expect(page.locator("[data-node=continue_as_new]")).to_have_class("node can g-CONTINUED")
    expect(page.locator("[data-node=count]")).to_have_class("node g-SUCCEEDED")
    expect(page.locator("[data-edge=continue]")).to_have_count(1)
    expect(page.get_by_role("button", name="Cancel execution")).to_have_count(0)
    ui.shot(page, "execution-earlier-run")
    ui.check_accessible(page, "earlier run")


def test_a_client_identity_sees_only_what_it_may(ui: Ui, page: Page) -> None:
    ui.start("claim-client", 500.0)
    ui.call(
        "POST",
        "/v1/executions",
        {"workflow": "Tick", "execution_id": "tick-secret", "input": {"n": 1}},
    )
    sign_in(page, ui, CLIENT)
    expect(page.locator("#who")).to_have_text("Client billing (restricted)")
    expect(page.locator("#p-workers").locator("xpath=..")).to_contain_text("Not permitted")
    page.goto(ui.url + "#/executions")
    expect(page.locator("main")).to_contain_text("claim-client")
    expect(page.locator("main")).not_to_contain_text("tick-secret")
    page.goto(ui.url + "#/workflows")
    expect(page.locator("main")).to_contain_text("ExpenseClaim")
    expect(page.locator("main")).not_to_contain_text("Tick")
    page.goto(ui.url + "#/workers")
    expect(page.locator("main")).to_contain_text("Not permitted")
    page.goto(ui.url + "#/executions/tick-secret")
    expect(page.get_by_role("alert")).to_contain_text("Not permitted")
    # Queries are granted, cancelling is not: the API's refusal is shown.
    page.goto(ui.url + "#/executions/claim-client")
    page.get_by_role("button", name="Run status").click()
    actions = page.locator("#p-actions").locator("xpath=..")
    expect(actions).to_contain_text('"waiting_for": "manager"')
    page.get_by_role("button", name="Cancel execution").click()
    page.get_by_role("dialog").get_by_role("button", name="Confirm cancel").click()
    expect(actions.get_by_role("alert")).to_contain_text("Not permitted")
    expect(actions.get_by_role("alert")).to_contain_text("billing")
    assert ui.status("claim-client") == "RUNNING"
    ui.shot(page, "client-identity")
    ui.check_accessible(page, "client identity")


def _start_many(ui: Ui, count: int) -> None:
    def batch(start: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", ui.server.port, timeout=60)
        headers = {"authorization": f"Bearer {ADMIN}", "content-type": "application/json"}
        try:
            for n in range(start, min(start + 500, count)):
                body = {"workflow": "Tick", "execution_id": f"tick-{n:05}", "input": {"n": n}}
                conn.request("POST", "/v1/executions", json.dumps(body), headers)
                reply = conn.getresponse()
                assert reply.status in {200, 201}, reply.read()
                reply.read()
        finally:
            conn.close()

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(batch, range(0, count, 500)))


def test_the_list_of_10000_executions_draws_its_first_page_in_300_ms(ui: Ui, page: Page) -> None:
    _start_many(ui, MANY)
    sign_in(page, ui)
    timings: list[int] = []
    fetches: list[int] = []  # of which the API's answer to the first page's request
    for _ in range(3):
        # From a light view whose requests are done, so that nothing else is
        # queued at the server while the list is timed.
        page.goto(ui.url + "#/workers")
        expect(page.locator("main")).to_contain_text("ui-python")
        page.evaluate("document.body.removeAttribute('data-list-render-ms')")
        page.goto(ui.url + "#/executions")
        expect(page.get_by_text("1000+ executions, newest first")).to_be_visible()
        wait_until(
            lambda: page.evaluate("document.body.dataset.listRenderMs"), 10, "the list's timing"
        )
        timings.append(int(page.evaluate("document.body.dataset.listRenderMs")))
        fetches.append(
            page.evaluate(
                "Math.round(performance.getEntriesByType('resource')"
                ".filter(e => e.name.includes('/v1/executions?limit=26')).pop().duration)"
            )
        )
        page.evaluate("performance.clearResourceTimings()")
    rows = page.locator("main tbody tr")
    expect(rows).to_have_count(25)
    ui.shot(page, "executions-10000")
    median = sorted(timings)[1]
    report = Path(os.environ.get("ORBIT_UI_TIMINGS", str(ui.shots / "list-timing.txt")))
    report.write_text(
        f"first page of {MANY} executions: {timings} ms (median {median} ms), "
        f"of which the API request {fetches} ms\n"
    )
    assert median < FIRST_PAGE_MS, timings


STANDBY = {
    "status": "ok",
    "api_version": "orbit-api/1",
    "runtime_version": "0.5.0",
    "ir_versions": ["orbit-ir/1", "orbit-ir/2"],
    "active_executions": 0,
    "worker_sessions": 0,
    "role": "standby",
    "node_id": "b",
    "term": 3,
    "leader": {"node_id": "a", "addr": "http://127.0.0.1:7301"},
}
SHARED = {
    **STANDBY,
    "role": "shared",
    "node_id": "node-1",
    "term": None,
    "leader": None,
    "owned_executions": 4,
    "tasks_claimed": 18,
    "nodes": [
        {
            "node_id": "node-1",
            "addr": "http://127.0.0.1:7401",
            "live": True,
            "heartbeat_age_ms": 2,
            "owned_executions": 4,
        },
        {
            "node_id": "node-2",
            "addr": "http://127.0.0.1:7402",
            "live": False,
            "heartbeat_age_ms": 9000,
            "owned_executions": 0,
        },
    ],
}


def _answer_with(document: dict[str, Any]) -> Any:
    body = json.dumps(document)
    return lambda route: route.fulfill(status=200, content_type="application/json", body=body)


def test_the_server_panel_shows_a_clusters_role_and_nodes(ui: Ui, page: Page) -> None:
    """Cluster servers add these fields to /v1/health (chapter 67); the
    browser is handed such documents in place of this single server's."""
    sign_in(page, ui)
    server = page.locator("#p-server").locator("xpath=..")
    for document, texts in (
        (STANDBY, ["standby", "Term3", "Leadera (http://127.0.0.1:7301)"]),
        (SHARED, ["shared", "Executions owned4", "Tasks claimed18", "node-2", "not live"]),
    ):
        page.route("**/v1/health", _answer_with(document))
        page.goto(ui.url + "#/")
        page.reload()
        for text in texts:
            expect(server).to_contain_text(text)
        ui.shot(page, f"overview-{document['role']}")
        page.unroute("**/v1/health")


def test_the_list_filters_by_search_fields_with_completion(ui: Ui, page: Page) -> None:
    """docs/language/visibility.md: the filter box completes field names and
    shows exactly the matches; a refused filter shows the server's message."""
    _orbit(ui.server, "deploy", str(HERE.parents[1] / "examples" / "visibility.orbit"))
    for eid, customer, amount in (
        ("vis-1", "c-1", 100.0),
        ("vis-2", "c-1", 600.0),
        ("vis-3", "c-2", 700.0),
    ):
        body = {
            "workflow": "Orders",
            "execution_id": eid,
            "input": {"customer": customer, "amount": amount},
        }
        ui.call("POST", "/v1/executions", body)
    sign_in(page, ui)
    page.goto(f"{ui.url}#/executions")
    box = page.get_by_label("Filter")
    box.fill("cu")
    options = page.locator("#f-where-fields option")
    expect(options).to_have_count(1)
    expect(options.first).to_have_attribute("value", "customer")
    box.fill('customer == "c-1" and am')
    expect(options.first).to_have_attribute("value", 'customer == "c-1" and amount')
    box.fill('customer == "c-1" and amount > 500')
    page.get_by_role("button", name="Search").click()
    table = page.locator("main table")
    expect(table).to_contain_text("vis-2")
    expect(table).not_to_contain_text("vis-1")
    expect(table).not_to_contain_text("vis-3")
    ui.shot(page, "executions-filtered")
    ui.check_accessible(page, "executions-filtered")
    page.get_by_label("Filter").fill("nosuch == 1")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#f-where-error")).to_contain_text("unknown field `nosuch`")


def test_pause_and_resume_from_the_execution_page(ui: Ui, page: Page) -> None:
    """docs/operating-executions.md: the page pauses with a reason, marks the
    execution paused (its page, the list, the history) and resumes it."""
    ui.start("claim-hold", 500.0)
    ui.start("claim-hold-not", 500.0)
    sign_in(page, ui)
    page.goto(f"{ui.url}#/executions/claim-hold")
    execution = page.locator("#p-execution").locator("xpath=..")
    expect(page.get_by_role("button", name="Resume")).to_be_disabled()
    page.get_by_label("Pause reason (optional)").fill("refund desk investigating")
    page.get_by_role("button", name="Pause").click()
    expect(execution.locator("[data-paused]")).to_have_text("paused")
    expect(execution).to_contain_text("refund desk investigating")
    expect(page.get_by_role("button", name="Pause")).to_be_disabled()
    doc = ui.call("GET", "/v1/executions/claim-hold")
    assert doc["paused"] is True and doc["pause_reason"] == "refund desk investigating"
    history = page.locator("#p-history").locator("xpath=..")
    expect(history).to_contain_text("paused by an operator: refund desk investigating")
    ui.shot(page, "execution-paused")
    ui.check_accessible(page, "execution paused")

    page.goto(f"{ui.url}#/executions?workflow=ExpenseClaim")
    row = page.locator("tr", has=page.get_by_role("link", name="claim-hold", exact=True))
    expect(row.locator("[data-paused]")).to_have_text("paused")
    other = page.locator("tr", has=page.get_by_role("link", name="claim-hold-not", exact=True))
    expect(other).to_be_visible()
    expect(other.locator("[data-paused]")).to_have_count(0)

    page.goto(f"{ui.url}#/executions/claim-hold")
    page.get_by_role("button", name="Resume").click()
    expect(execution.locator("[data-paused]")).to_have_count(0)
    expect(history).to_contain_text("resumed by an operator")
    assert "paused" not in ui.call("GET", "/v1/executions/claim-hold")
    assert ui.status("claim-hold") == "RUNNING"


def test_restart_and_fork_show_the_effect_preview_before_acting(ui: Ui, page: Page) -> None:
    """docs/restart-and-fork.md: the dry run's preview in a dialog, then the
    action, forced only when the operator confirms a preview that needs it."""
    ui.start("claim-again", 50.0)  # below 100: `pay` runs at once
    wait_until(lambda: ui.status("claim-again") == "COMPLETED", 30, "claim-again to complete")
    sign_in(page, ui)
    page.goto(f"{ui.url}#/executions/claim-again")
    page.get_by_label("From step").select_option("pay")
    page.get_by_role("button", name="Restart from step…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Restart claim-again from pay?")
    preview = dialog.get_by_role("row", name="pay")
    for text in ("payments.pay@1.0.0", "unknown", "new", "needs force"):
        expect(preview).to_contain_text(text)
    expect(dialog).to_contain_text("rules")  # kept
    ui.shot(page, "restart-preview")
    ui.check_accessible(page, "restart preview")
    # Declining changes nothing.
    dialog.get_by_role("button", name="Do nothing").click()
    expect(dialog).to_be_hidden()
    assert ui.call("GET", "/v1/executions/claim-again").get("run", 1) == 1

    page.get_by_role("button", name="Restart from step…").click()
    dialog.get_by_role("button", name="Restart anyway (force)").click()
    execution = page.locator("#p-execution").locator("xpath=..")
    expect(execution).to_contain_text("(run 2)", timeout=30_000)
    wait_until(lambda: ui.status("claim-again") == "COMPLETED", 30, "run 2 to complete")
    history = page.locator("#p-history").locator("xpath=..")
    expect(history).to_contain_text("rules: SUCCEEDED kept from run 1", timeout=30_000)
    page.goto(f"{ui.url}#/executions/claim-again?run=1")
    expect(page.locator("#p-history").locator("xpath=..")).to_contain_text(
        "restarted from step pay as run 2"
    )

    page.goto(f"{ui.url}#/executions/claim-again")
    page.get_by_label("From step").select_option("pay")
    page.get_by_label("Fork id (optional)").fill("claim-again-fork")
    page.get_by_role("button", name="Fork from step…").click()
    expect(dialog).to_contain_text("Fork claim-again from pay as claim-again-fork?")
    dialog.get_by_role("button", name="Fork anyway (force)").click()
    page.get_by_role("link", name="claim-again-fork").click()
    expect(page.get_by_role("heading", name="Execution claim-again-fork")).to_be_visible()
    wait_until(lambda: ui.status("claim-again-fork") == "COMPLETED", 30, "the fork to complete")
    expect(page.locator("#p-history").locator("xpath=..")).to_contain_text(
        "forked from claim-again run 2 at step pay"
    )


def test_a_refused_fork_shows_the_servers_reason(ui: Ui, page: Page) -> None:
    ui.start("claim-nofork", 50.0)
    wait_until(lambda: ui.status("claim-nofork") == "COMPLETED", 30, "claim-nofork to complete")
    sign_in(page, ui)
    page.goto(f"{ui.url}#/executions/claim-nofork")
    page.get_by_label("Fork version (optional)").fill("9.9.9")
    page.get_by_role("button", name="Fork from step…").click()
    expect(page.locator("#p-actions").locator("xpath=..").get_by_role("alert")).to_contain_text(
        "WORKFLOW_NOT_FOUND"
    )
    expect(page.get_by_role("dialog")).to_have_count(0)


def test_the_execution_page_says_what_a_held_back_start_waits_for(ui: Ui, page: Page) -> None:
    """docs/language/flow-control.md: `waiting` of the document, on the page."""
    _orbit(ui.server, "deploy", str(HERE.parents[1] / "examples" / "flow_control.orbit"))
    for n in (1, 2, 3):
        body = {
            "workflow": "PerCustomer",
            "execution_id": f"pc-{n}",
            "input": {"customer_id": "c-1"},
        }
        ui.call("POST", "/v1/executions", body)
    sign_in(page, ui)
    page.goto(f"{ui.url}#/executions/pc-3")
    execution = page.locator("#p-execution").locator("xpath=..")
    expect(execution.locator("[data-waiting]")).to_contain_text(
        "waiting for a concurrency slot: customer_id `c-1` 2/2"
    )
    page.goto(f"{ui.url}#/executions/pc-1")
    expect(page.locator("#p-execution").locator("xpath=..")).to_contain_text("Workflow")
    expect(page.locator("[data-waiting]")).to_have_count(0)
