"""Chapter 04, the quick start, run for real: `orbit init`, `orbit check`, a
server, the generated Python and TypeScript workers and the CLI, first with
Hello@1.0.0 and then with the book's 1.1.0 (retry, non-retryable failure,
compensation). Every transcript the chapter prints is compared once masked."""

from __future__ import annotations

import json
import re
import shutil
import signal
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pgkit
import pytest
from e2e_processes import TS_SDK, Cli, Server, Stack, Worker, started_execution, stop_all
from e2e_transcripts import mask, same

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

V110 = Path(__file__).resolve().parent / "projects" / "quickstart-1.1.0"


@dataclass
class QuickStart:
    root: Path
    project: Path
    server: Server
    cli: Cli
    init: CompletedProcess[str]
    check: CompletedProcess[str]
    workers: dict[str, Worker] = field(default_factory=dict)
    runs: dict[str, CompletedProcess[str]] = field(default_factory=dict)

    def start_workers(self, stack: Stack) -> None:
        # Ctrl-C in both terminals, then start them again.
        stop_all(self.workers.values(), signal.SIGINT)
        self.workers = {
            "python": stack.python_worker(
                "hello-python", self.project / "workers/python/worker.py", self.server
            ),
            "typescript": stack.typescript_worker(
                "hello-typescript", self.project / "workers/typescript/worker.ts", self.server
            ),
        }

    def run(self, key: str, *args: str) -> CompletedProcess[str]:
        if key not in self.runs:
            self.runs[key] = self.cli("run", "workflows/hello.orbit", *args)
        return self.runs[key]


@pytest.fixture(scope="module")
def qs(module_stack: Stack) -> QuickStart:
    root = module_stack.root
    server = module_stack.server(db=root / "orbit.db")
    cli = module_stack.cli(server, root)
    init = cli("init", "hello-orbit")
    project = root / "hello-orbit"
    check = cli("check", "workflows/hello.orbit", cwd=project)
    cli.cwd = project
    quick = QuickStart(root, project, server, cli, init, check)
    quick.start_workers(module_stack)
    return quick


@pytest.fixture(scope="module")
def ada(qs: QuickStart) -> CompletedProcess[str]:
    return qs.run("ada", "--input", '{"name": "Ada"}')


@pytest.fixture(scope="module")
def v110(qs: QuickStart, ada: CompletedProcess[str], module_stack: Stack) -> QuickStart:
    """The project after section 8: new workflow and workers, restarted."""
    shutil.copy(V110 / "hello.orbit", qs.project / "workflows/hello.orbit")
    shutil.copy(V110 / "worker.py", qs.project / "workers/python/worker.py")
    shutil.copy(V110 / "worker.ts", qs.project / "workers/typescript/worker.ts")
    qs.start_workers(module_stack)
    return qs


def test_init_creates_the_project(qs: QuickStart) -> None:
    assert qs.init.returncode == 0
    same(
        qs.init.stdout + qs.init.stderr,
        """\
          created hello-orbit/workers/typescript/package.json
          created hello-orbit/workers/python/requirements.txt
          created hello-orbit/.gitignore
          created hello-orbit/workflows/hello.orbit
          created hello-orbit/workers/python/worker.py
          created hello-orbit/workers/typescript/worker.ts
          created hello-orbit/README.md

        Next: cd hello-orbit && orbit check workflows/hello.orbit
        """,
    )
    refused = qs.cli("init", "hello-orbit", cwd=qs.root)
    assert refused.returncode != 0


def test_check_accepts_the_generated_workflow(qs: QuickStart) -> None:
    assert qs.check.returncode == 0
    assert qs.check.stdout.strip() == "ok Hello@1.0.0 (2 steps)"


def test_generated_dependencies_are_met_by_the_repository_sdks(qs: QuickStart) -> None:
    requirement = (qs.project / "workers/python/requirements.txt").read_text().strip()
    assert requirement == "orbit-lang-sdk>=0.1,<0.2"
    assert metadata.version("orbit-lang-sdk").startswith("0.1.")
    package = json.loads((qs.project / "workers/typescript/package.json").read_text())
    assert package["dependencies"]["orbit-lang"] == "^0.1.0"
    assert json.loads((TS_SDK / "package.json").read_text())["version"].startswith("0.1.")


def test_server_and_workers_start_as_the_book_shows(qs: QuickStart) -> None:
    server_log = qs.server.log()
    backend = "postgres" if pgkit.on_postgres() else "sqlite"
    assert re.search(rf'INFO orbit: starting ORBIT runtime db=\S+ backend="{backend}"', server_log)
    assert re.search(
        rf"ORBIT runtime listening addr=127\.0\.0\.1:{qs.server.port} tls=false ui=true",
        server_log,
    )
    python_line = qs.workers["python"].wait_for_log("registered")[0]
    same(python_line, "2026-11-15 09:34:37,324 INFO orbit worker hello-python registered (1 tasks)")
    typescript_line = qs.workers["typescript"].wait_for_log("registered")[0]
    assert typescript_line == "[orbit] worker hello-typescript registered (1 tasks)"


def test_workers_list(qs: QuickStart) -> None:
    listing = qs.cli.ok("workers", "list")
    same(
        listing.stdout,
        """\
        WORKER                       RUNTIME      STATE    INFLIGHT  TASKS
        hello-python                 python       online   0  greeting.compose@1.0.0
        hello-typescript             typescript   online   0  greeting.decorate@1.0.0
        """,
    )


def test_run_hello_ada(ada: CompletedProcess[str]) -> None:
    assert ada.returncode == 0, ada.stderr
    same(
        ada.stderr,
        """\
        deployed Hello@1.0.0 (sha256:505930b4d466)
        started execution 99e811dd-7448-41cc-ac28-bc58d50200d2
          ✓ compose                        succeeded 122ms
          ✓ decorate                       succeeded 140ms

        COMPLETED 99e811dd-7448-41cc-ac28-bc58d50200d2  Hello@1.0.0
          elapsed: 269ms
        """,
    )
    assert json.loads(ada.stdout) == {"greeting": "Hello, Ada!!!"}


def test_running_the_same_file_again_is_up_to_date(qs: QuickStart, ada: Any) -> None:
    again = qs.run("ada-again", "--input", '{"name": "Ada"}')
    assert again.returncode == 0
    assert mask(again.stderr).splitlines()[0] == "up to date Hello@1.0.0 (sha256:<hash>)"


def test_status(qs: QuickStart, ada: CompletedProcess[str]) -> None:
    status = qs.cli.ok("status", started_execution(ada))
    same(
        status.stdout,
        """\
        COMPLETED 99e811dd-7448-41cc-ac28-bc58d50200d2  Hello@1.0.0
          elapsed: 269ms

          STEP                         STATUS       ATTEMPT     TIME  DETAIL
          compose                      SUCCEEDED          1    122ms  worker hello-python
          decorate                     SUCCEEDED          1    140ms  worker hello-typescript

          output: {"greeting":"Hello, Ada!!!"}
        """,
    )


def test_logs(qs: QuickStart, ada: CompletedProcess[str]) -> None:
    logs = qs.cli.ok("logs", started_execution(ada))
    same(
        logs.stdout,
        """\
        +     0ms   #1  WorkflowCreated
        +     0ms   #2  WorkflowStarted
        +     2ms   #3  StepScheduled             step=compose attempt=1
        +     3ms   #4  StepDispatched            step=compose attempt=1 worker_id=hello-python
        +   125ms   #5  StepSucceeded             step=compose attempt=1
        +   127ms   #6  StepScheduled             step=decorate attempt=1
        +   128ms   #7  StepDispatched            step=decorate attempt=1 worker_id=hello-typescript
        +   268ms   #8  StepSucceeded             step=decorate attempt=1
        +   269ms   #9  WorkflowCompleted
        """,
    )


def test_inspect(qs: QuickStart, ada: CompletedProcess[str]) -> None:
    ident = started_execution(ada)
    state = json.loads(qs.cli.ok("inspect", ident).stdout)
    # The book abridges the state: every key it shows is there, with its value.
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", state["definition_hash"])
    assert {k: state[k] for k in ("id", "workflow", "version", "input", "status")} == {
        "id": ident,
        "workflow": "Hello",
        "version": "1.0.0",
        "input": {"name": "Ada", "excitement": 3},
        "status": "COMPLETED",
    }
    compose = state["units"]["compose"]
    assert {k: compose[k] for k in ("status", "attempt", "input", "idempotency_key")} == {
        "status": "SUCCEEDED",
        "attempt": 1,
        "input": {"name": "Ada"},
        "idempotency_key": f"{ident}/compose",
    }
    assert {k: compose[k] for k in ("output", "redelivery", "worker_id", "tokens")} == {
        "output": {"message": "Hello, Ada"},
        "redelivery": False,
        "worker_id": "hello-python",
        "tokens": "***",
    }
    assert state["units"]["decorate"]["worker_id"] == "hello-typescript"
    assert state["output"] == {"greeting": "Hello, Ada!!!"}
    assert state["last_seq"] == 9


def test_ps(qs: QuickStart, ada: CompletedProcess[str]) -> None:
    listing = qs.cli.ok("ps", "--workflow", "Hello", "--limit", "1")
    same(
        listing.stdout,
        """\
        EXECUTION                              WORKFLOW                 VERSION    STATUS        AGE
        99e811dd-7448-41cc-ac28-bc58d50200d2   Hello                    1.0.0      COMPLETED     314ms
        """,
    )


# ---- section 8: a failure path


def test_changed_content_under_the_same_version_is_refused(
    qs: QuickStart, ada: CompletedProcess[str], tmp_path: Path
) -> None:
    same_version = (V110 / "hello.orbit").read_text().replace('"1.1.0"', '"1.0.0"')
    (tmp_path / "hello.orbit").write_text(same_version)
    refused = qs.cli("deploy", str(tmp_path / "hello.orbit"))
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "error: DEFINITION_CONFLICT (409): Hello@1.0.0 is already registered with a different"
        f" definition ({qs.server.execution(started_execution(ada))['definition_hash']});"
        " workflow definitions are immutable, bump the version"
    )


def test_v110_checks_and_the_workers_register_the_new_tasks(v110: QuickStart) -> None:
    assert v110.cli.ok("check", "workflows/hello.orbit").stdout.strip() == (
        "ok Hello@1.1.0 (4 steps)"
    )
    assert "registered (3 tasks)" in v110.workers["python"].log()
    assert "registered (2 tasks)" in v110.workers["typescript"].log()


def test_v110_happy_path(v110: QuickStart) -> None:
    grace = v110.run("grace", "--input", '{"name": "Grace"}')
    assert grace.returncode == 0, grace.stderr
    same(
        grace.stderr,
        """\
        deployed Hello@1.1.0 (sha256:c444589a24d2)
        started execution c9bade94-bc35-4741-80a9-3a39780623d7
          ✓ compose                        succeeded 8ms
          ✓ decorate                       succeeded 7ms
          ✓ publish                        succeeded 10ms
          ✓ notify                         succeeded 6ms

        COMPLETED c9bade94-bc35-4741-80a9-3a39780623d7  Hello@1.1.0
          elapsed: 45ms
        """,
    )
    output = json.loads(grace.stdout)
    assert output["greeting"] == "Hello, Grace!!!"
    assert re.fullmatch(r"post-[0-9a-f]{8}", output["post_id"])


@pytest.fixture(scope="module")
def flaky(v110: QuickStart) -> CompletedProcess[str]:
    v110.run("grace", "--input", '{"name": "Grace"}')
    return v110.run("flaky", "--input", '{"name": "Flaky Grace", "excitement": 30}')


def test_v110_failure_path(flaky: CompletedProcess[str]) -> None:
    assert flaky.returncode == 1
    assert flaky.stdout == ""
    # `orbit run` looks at the execution every 500 ms, and compose waits
    # 500 ms for its retry: the book's run missed that wait, ours may see it.
    retry = "  ↻ compose                        retry_wait try again shortly"
    lines = flaky.stderr.splitlines()
    assert lines.count(retry) <= 1
    same(
        "\n".join(line for line in lines if line != retry),
        """\
        up to date Hello@1.1.0 (sha256:c444589a24d2)
        started execution d599b57e-eee0-412e-b679-df8276005035
          ✓ compose                        succeeded 6ms
          ✓ decorate                       succeeded 4ms
          ✓ publish                        succeeded 4ms
          ✗ notify                         failed 48 characters
          ✓ compensate:publish             succeeded 6ms

        FAILED d599b57e-eee0-412e-b679-df8276005035  Hello@1.1.0
          elapsed: 549ms
          compensation: completed
          error: MESSAGE_TOO_LONG step `notify` failed: 48 characters
        """,
    )


def test_v110_failure_status(v110: QuickStart, flaky: CompletedProcess[str]) -> None:
    status = v110.cli("status", started_execution(flaky))
    same(
        status.stdout,
        """\
        FAILED d599b57e-eee0-412e-b679-df8276005035  Hello@1.1.0
          elapsed: 549ms
          compensation: completed
          error: MESSAGE_TOO_LONG step `notify` failed: 48 characters

          STEP                         STATUS       ATTEMPT     TIME  DETAIL
          compose                      SUCCEEDED          2      6ms  worker hello-python
          decorate                     SUCCEEDED          1      4ms  worker hello-typescript
          publish                      SUCCEEDED          1      4ms  worker hello-python
          notify                       FAILED             1      5ms  48 characters
          compensate:publish           SUCCEEDED          1      6ms  worker hello-python
        """,
    )


def test_v110_failure_logs(v110: QuickStart, flaky: CompletedProcess[str]) -> None:
    logs = v110.cli.ok("logs", started_execution(flaky))
    same(
        logs.stdout,
        """\
        +     0ms   #1  WorkflowCreated
        +     0ms   #2  WorkflowStarted
        +     2ms   #3  StepScheduled             step=compose attempt=1
        +     3ms   #4  StepDispatched            step=compose attempt=1 worker_id=hello-python
        +     7ms   #5  StepAttemptFailed         step=compose attempt=1 error=NAME_SERVICE_BUSY try again shortly
        +     8ms   #6  RetryScheduled            step=compose delay_ms=500
        +   508ms   #7  StepScheduled             step=compose attempt=2
        +   511ms   #8  StepDispatched            step=compose attempt=2 worker_id=hello-python
        +   517ms   #9  StepSucceeded             step=compose attempt=2
        +   518ms  #10  StepScheduled             step=decorate attempt=1
        +   519ms  #11  StepDispatched            step=decorate attempt=1 worker_id=hello-typescript
        +   523ms  #12  StepSucceeded             step=decorate attempt=1
        +   524ms  #13  StepScheduled             step=publish attempt=1
        +   526ms  #14  StepDispatched            step=publish attempt=1 worker_id=hello-python
        +   530ms  #15  StepSucceeded             step=publish attempt=1
        +   531ms  #16  StepScheduled             step=notify attempt=1
        +   535ms  #17  StepDispatched            step=notify attempt=1 worker_id=hello-typescript
        +   539ms  #18  StepAttemptFailed         step=notify attempt=1 error=MESSAGE_TOO_LONG 48 characters
        +   540ms  #19  StepFailed                step=notify error=MESSAGE_TOO_LONG 48 characters
        +   540ms  #20  CompensationStarted       reason=step `notify` failed: 48 characters
        +   540ms  #21  StepScheduled             step=compensate:publish attempt=1
        +   542ms  #22  StepDispatched            step=compensate:publish attempt=1 worker_id=hello-python
        +   548ms  #23  StepSucceeded             step=compensate:publish attempt=1
        +   549ms  #24  CompensationCompleted
        +   549ms  #25  WorkflowFailed            error=MESSAGE_TOO_LONG step `notify` failed: 48 characters
        """,
    )


def test_v110_failure_history(v110: QuickStart, flaky: CompletedProcess[str]) -> None:
    ident = started_execution(flaky)
    events = v110.server.events(ident)
    assert [e["seq"] for e in events] == list(range(1, 26))
    assert [(e["type"], e.get("step"), e.get("attempt")) for e in events] == [
        ("WorkflowCreated", None, None),
        ("WorkflowStarted", None, None),
        ("StepScheduled", "compose", 1),
        ("StepDispatched", "compose", 1),
        ("StepAttemptFailed", "compose", 1),
        ("RetryScheduled", "compose", None),
        ("StepScheduled", "compose", 2),
        ("StepDispatched", "compose", 2),
        ("StepSucceeded", "compose", 2),
        ("StepScheduled", "decorate", 1),
        ("StepDispatched", "decorate", 1),
        ("StepSucceeded", "decorate", 1),
        ("StepScheduled", "publish", 1),
        ("StepDispatched", "publish", 1),
        ("StepSucceeded", "publish", 1),
        ("StepScheduled", "notify", 1),
        ("StepDispatched", "notify", 1),
        ("StepAttemptFailed", "notify", 1),
        ("StepFailed", "notify", None),
        ("CompensationStarted", None, None),
        ("StepScheduled", "compensate:publish", 1),
        ("StepDispatched", "compensate:publish", 1),
        ("StepSucceeded", "compensate:publish", 1),
        ("CompensationCompleted", None, None),
        ("WorkflowFailed", None, None),
    ]
    by_seq = {e["seq"]: e for e in events}
    assert by_seq[1]["input"] == {"name": "Flaky Grace", "excitement": 30}
    assert by_seq[5]["error"]["code"] == "NAME_SERVICE_BUSY"
    assert by_seq[5]["error"]["message"] == "try again shortly"
    assert by_seq[5]["error"]["retryable"] is True
    assert by_seq[6]["delay_ms"] == 500
    assert by_seq[7]["idempotency_key"] == by_seq[3]["idempotency_key"] == f"{ident}/compose"
    assert by_seq[8]["worker_id"] == by_seq[14]["worker_id"] == "hello-python"
    assert by_seq[11]["worker_id"] == by_seq[17]["worker_id"] == "hello-typescript"
    post_id = by_seq[15]["output"]["post_id"]
    assert by_seq[16]["input"] == {"post_id": post_id, "message": "Hello, Flaky Grace" + "!" * 30}
    failed = by_seq[18]["error"]
    assert (failed["code"], failed["message"], failed["retryable"]) == (
        "MESSAGE_TOO_LONG",
        "48 characters",
        False,
    )
    assert by_seq[19]["error"]["code"] == "MESSAGE_TOO_LONG"
    assert by_seq[20]["reason"] == "step `notify` failed: 48 characters"
    assert by_seq[21]["input"] == {"post_id": post_id}
    assert by_seq[21]["idempotency_key"] == f"{ident}/compensate:publish"
    assert by_seq[23]["output"] == {"removed": True}
    assert by_seq[25]["error"]["code"] == "MESSAGE_TOO_LONG"
    assert by_seq[25]["error"]["message"] == "step `notify` failed: 48 characters"
    assert by_seq[25]["compensation"] == "completed"


def test_v110_python_worker_output(v110: QuickStart, flaky: CompletedProcess[str]) -> None:
    ident = started_execution(flaky)
    lines = [line for line in v110.workers["python"].log().splitlines() if ident in line]
    same(
        "\n".join(lines),
        """\
        INFO orbit executing {"execution_id": "d599b57e-...", "step": "compose", "attempt": 1, "task": "greeting.compose", "redelivery": false}
        INFO orbit task failed {"execution_id": "d599b57e-...", "step": "compose", "attempt": 1, "code": "NAME_SERVICE_BUSY"}
        INFO orbit executing {"execution_id": "d599b57e-...", "step": "compose", "attempt": 2, "task": "greeting.compose", "redelivery": false}
        INFO orbit composing a greeting for Flaky Grace {"execution_id": "d599b57e-...", "step": "compose", "attempt": 2}
        INFO orbit executing {"execution_id": "d599b57e-...", "step": "publish", "attempt": 1, "task": "greeting.publish", "redelivery": false}
        INFO orbit published post-2ce4c9b2 {"execution_id": "d599b57e-...", "step": "publish", "attempt": 1}
        INFO orbit executing {"execution_id": "d599b57e-...", "step": "compensate:publish", "attempt": 1, "task": "greeting.unpublish", "redelivery": false}
        INFO orbit removed post-2ce4c9b2 {"execution_id": "d599b57e-...", "step": "compensate:publish", "attempt": 1}
        """,
    )
    published = re.findall(r"published (post-\w+)", "\n".join(lines))
    removed = re.findall(r"removed (post-\w+)", "\n".join(lines))
    assert published == removed and len(published) == 1
