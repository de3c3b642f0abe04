"""Chapter 04's quick start with the real CLI and a real server: `orbit init`,
`orbit check`, `orbit workers list`, `orbit run` (Hello@1.0.0, then the book's
1.1.0 with a retry, a non-retryable failure and compensation), `orbit status`,
`orbit logs`, `orbit inspect` and `orbit ps`, each compared with the book's
transcript. The generated Python and TypeScript workers are stood in for by
raw-protocol workers with the same ids, runtimes and behaviour."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_real import Orbit, TaskFailure, TaskWorker, golden, one_error_line, same_run
from click.testing import Result
from e2e.e2e_transcripts import same
from server_harness import Http, ServerProcess

pytestmark = pytest.mark.timeout(120)

V110 = Path(__file__).resolve().parent / "e2e" / "projects" / "quickstart-1.1.0" / "hello.orbit"


def compose(task: dict[str, Any]) -> Any:
    name = task["input"]["name"]
    # The book's flaky name service: names starting with "Flaky" fail once.
    if name.startswith("Flaky") and task["attempt"] == 1:
        raise TaskFailure("NAME_SERVICE_BUSY", "try again shortly", retryable=True)
    return {"message": f"Hello, {name}"}


def decorate(task: dict[str, Any]) -> Any:
    return {"message": task["input"]["message"] + "!" * task["input"]["excitement"]}


def publish(task: dict[str, Any]) -> Any:
    digest = hashlib.sha256(task["idempotency_key"].encode()).hexdigest()
    return {"post_id": f"post-{digest[:8]}"}


def unpublish(task: dict[str, Any]) -> Any:
    return {"removed": True}


def notify(task: dict[str, Any]) -> Any:
    message = task["input"]["message"]
    if len(message) > 40:
        raise TaskFailure("MESSAGE_TOO_LONG", f"{len(message)} characters", retryable=False)
    return {"delivered": True}


V100_TASKS = (
    {"greeting.compose": compose},
    {"greeting.decorate": decorate},
)
V110_TASKS = (
    {"greeting.compose": compose, "greeting.publish": publish, "greeting.unpublish": unpublish},
    {"greeting.decorate": decorate, "greeting.notify": notify},
)


class QuickStart:
    """The chapter's session: one server, a project, and its two workers."""

    def __init__(self, server: ServerProcess, root: Path) -> None:
        self.server = server
        self.root = root
        self.project = root / "hello-orbit"
        self.orbit = Orbit(f"http://{server.addr}")
        self.workers: list[TaskWorker] = []
        self.results: dict[str, Result] = {}

    def start_workers(self, tasks: tuple[dict[str, Any], dict[str, Any]]) -> None:
        # Ctrl-C in both terminals, then start them again (section 8).
        self.stop_workers()
        python, typescript = tasks
        self.workers = [
            TaskWorker(self.server, "hello-python", "python", python).start(),
            TaskWorker(self.server, "hello-typescript", "typescript", typescript).start(),
        ]

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers = []

    def run(self, *args: str) -> Result:
        return self.orbit("run", str(self.project / "workflows/hello.orbit"), *args)


def started(result: Result) -> str:
    found = re.search(r"^started execution (\S+)$", result.stderr, re.MULTILINE)
    assert found, result.output
    return found[1]


@pytest.fixture(scope="module")
def qs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuickStart]:
    root = tmp_path_factory.mktemp("quickstart")
    with ServerProcess(root / "orbit.db") as server:
        quick = QuickStart(server, root)
        try:
            play(quick)
            yield quick
        finally:
            quick.stop_workers()


def play(quick: QuickStart) -> None:
    """The chapter's commands, in its order; the tests read their results."""
    with contextlib.chdir(quick.root):
        quick.results["init"] = quick.orbit("init", "hello-orbit")
        quick.results["init again"] = quick.orbit("init", "hello-orbit")
    with contextlib.chdir(quick.project):
        quick.results["check"] = quick.orbit("check", "workflows/hello.orbit")
    quick.start_workers(V100_TASKS)
    quick.results["workers"] = quick.orbit("workers", "list")
    quick.results["ada"] = quick.run("--input", '{"name": "Ada"}')
    quick.results["ps"] = quick.orbit("ps")
    # Section 8: the new workflow and workers.
    shutil.copy(V110, quick.project / "workflows/hello.orbit")
    quick.start_workers(V110_TASKS)
    quick.results["grace"] = quick.run("--input", '{"name": "Grace"}')
    quick.results["flaky"] = quick.run("--input", '{"name": "Flaky Grace", "excitement": 30}')


def test_init_and_check(qs: QuickStart) -> None:
    init = qs.results["init"]
    assert init.exit_code == 0, init.output
    same(init.output, golden("init"))
    assert "hello-orbit" in one_error_line(qs.results["init again"])
    check = qs.results["check"]
    assert check.exit_code == 0, check.output
    assert check.stdout == "ok Hello@1.0.0 (2 steps)\n"


def test_workers_list(qs: QuickStart) -> None:
    listing = qs.results["workers"]
    assert listing.exit_code == 0, listing.output
    same(listing.stdout, golden("workers_list"))


def test_run_status_logs_of_the_first_execution(qs: QuickStart) -> None:
    ada = qs.results["ada"]
    assert ada.exit_code == 0, ada.output
    same_run(ada.output, golden("run_hello"))
    assert json.loads(ada.stdout) == {"greeting": "Hello, Ada!!!"}
    execution = started(ada)
    same(qs.orbit.ok("status", execution).stdout, golden("status_hello"))
    same(qs.orbit.ok("logs", execution).stdout, golden("logs_hello"))


def test_inspect_is_the_api_document_redacted(qs: QuickStart) -> None:
    execution = started(qs.results["ada"])
    inspected = json.loads(qs.orbit.ok("inspect", execution).stdout)
    with contextlib.closing(Http(qs.server.addr)) as api:
        state = api.get(f"/v1/executions/{execution}").body
    compose = state["units"]["compose"]
    assert compose["tokens"]  # the API shows attempt tokens; inspect masks them
    assert inspected["units"]["compose"]["tokens"] == "***"
    compose["tokens"] = "***"
    state["units"]["decorate"]["tokens"] = "***"
    assert inspected == state
    assert list(inspected["units"]) == ["compose", "decorate"]
    assert inspected["units"]["compose"]["idempotency_key"] == f"{execution}/compose"


def test_ps_lists_the_execution(qs: QuickStart) -> None:
    listing = qs.results["ps"]
    assert listing.exit_code == 0, listing.output
    same(listing.stdout, golden("ps_hello"))
    assert started(qs.results["ada"]) in listing.stdout


def test_ps_filters_and_limit(qs: QuickStart) -> None:
    ada, grace, flaky = (started(qs.results[k]) for k in ("ada", "grace", "flaky"))

    def ids(*args: str) -> list[str]:
        rows = qs.orbit.ok("ps", *args).stdout.splitlines()
        assert rows[0].split() == ["EXECUTION", "WORKFLOW", "VERSION", "STATUS", "AGE"]
        return [row.split()[0] for row in rows[1:]]

    assert ids() == [flaky, grace, ada]  # newest first
    assert ids("--limit", "2") == [flaky, grace]
    assert ids("--status", "failed") == [flaky]
    assert ids("--status", "COMPLETED", "--workflow", "Hello") == [grace, ada]
    assert ids("--workflow", "Nope") == []


def test_the_happy_path_of_1_1_0_deploys_it(qs: QuickStart) -> None:
    grace = qs.results["grace"]
    assert grace.exit_code == 0, grace.output
    assert grace.stderr.startswith("deployed Hello@1.1.0 (sha256:")
    output = json.loads(grace.stdout)
    assert output["greeting"] == "Hello, Grace!!!"
    assert re.fullmatch(r"post-[0-9a-f]{8}", output["post_id"])


def test_a_failure_is_compensated_and_exits_1(qs: QuickStart) -> None:
    flaky = qs.results["flaky"]
    assert flaky.exit_code == 1
    assert flaky.stdout == ""
    # The retry waits 500 ms: the book's run happened not to see that wait, ours may.
    same_run(flaky.output, golden("run_hello_failure"))
    execution = started(flaky)
    same(qs.orbit.ok("status", execution).stdout, golden("status_hello_failure"))
    same(qs.orbit.ok("logs", execution).stdout, golden("logs_hello_failure"))


def test_changed_content_under_a_released_version_is_a_conflict(qs: QuickStart) -> None:
    # Section 8's aside: the 1.1.0 content kept under version 1.0.0.
    changed = qs.root / "conflict.orbit"
    source = V110.read_text(encoding="utf-8")
    changed.write_text(source.replace('version "1.1.0"', 'version "1.0.0"'), encoding="utf-8")
    result = qs.orbit("deploy", str(changed))
    assert result.exit_code == 1
    line = one_error_line(result)
    same(
        line,
        "error: DEFINITION_CONFLICT (409): Hello@1.0.0 is already registered with a different "
        "definition (sha256:505930b4d4668ff2f8cb95e04519d5292ef2fbf0630d575349aaf92c0e2b42be); "
        "workflow definitions are immutable, bump the version",
    )
    again = qs.orbit.ok("deploy", str(qs.project / "workflows/hello.orbit"))
    same(again.stderr, "up to date Hello@1.1.0 (sha256:c444589a24d2)")
