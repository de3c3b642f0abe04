"""Every way a runtime command can fail prints one `error:` line and exits non-zero."""

from __future__ import annotations

import socket
from pathlib import Path

import cli_ir
import pytest
from cli_fake_runtime import FakeRuntime
from conftest import Orbit


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unknown_execution(orbit: Orbit) -> None:
    for command in (["status"], ["logs"], ["inspect"], ["cancel"], ["query", "x"]):
        result = orbit(*command[:1], "nope", *command[1:])
        assert result.exit_code == 1
        assert result.stderr == "error: NOT_FOUND (404): execution `nope` not found\n"
        assert result.stdout == ""


def test_unreachable_runtime() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    result = Orbit(url)("status", "order-1002")
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: cannot reach the ORBIT runtime at {url}: io: Connection refused (os error 111)\n"
        "  hint: start it with `orbit server` or set --server / ORBIT_SERVER\n"
    )


def test_tls_to_a_plain_http_server(fake: FakeRuntime) -> None:
    url = fake.url.replace("http://", "https://")
    result = Orbit(url)("ps")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot reach the ORBIT runtime at {url}: io: ")
    assert len(result.stderr.splitlines()) == 1


def test_bad_json_input(orbit: Orbit, tmp_path: Path) -> None:
    result = orbit("run", "Hello", "--input", "{name: 1}")
    assert result.exit_code == 1
    assert (
        result.stderr
        == "error: --input is not valid JSON: key must be a string at line 1 column 2\n"
    )
    bad = tmp_path / "input.json"
    bad.write_text('{"name": "Ada"} x')
    result = orbit("run", "Hello", "--input-file", str(bad))
    assert (
        result.stderr
        == "error: --input-file is not valid JSON: trailing characters at line 1 column 17\n"
    )


def test_input_wins_over_input_file(fake: FakeRuntime, orbit: Orbit, tmp_path: Path) -> None:
    fake.register("Hello", "1.0.0", "sha256:1")
    fake.bind_start("Hello", "99e811dd-7448-41cc-ac28-bc58d50200d2")
    file = tmp_path / "input.json"
    file.write_text('{"name": "File"}')
    result = orbit("run", "Hello", "--input-file", str(file), "-i", '{"name": "Flag"}', "--no-wait")
    assert result.exit_code == 0
    assert fake.requests[-1]["body"]["input"] == {"name": "Flag"}
    orbit("run", "Hello", "--input-file", str(file), "--no-wait")
    assert fake.requests[-1]["body"]["input"] == {"name": "File"}


def test_unknown_workflow(orbit: Orbit) -> None:
    result = orbit("run", "Nope", "--version", "9.9.9")
    assert result.exit_code == 1
    assert (
        result.stderr == "error: WORKFLOW_NOT_FOUND (404): workflow Nope@9.9.9 is not registered\n"
    )


def test_definition_conflict(fake: FakeRuntime, orbit: Orbit, tmp_path: Path) -> None:
    registered = "sha256:505930b4d4668ff2f8cb95e04519d5292ef2fbf0630d575349aaf92c0e2b42be"
    fake.register("Hello", "1.0.0", registered)
    ir = cli_ir.write(tmp_path / "hello.json", cli_ir.hello())
    result = orbit("deploy", str(ir))
    assert result.exit_code == 1
    assert result.stderr == (
        "error: DEFINITION_CONFLICT (409): Hello@1.0.0 is already registered with a different "
        f"definition ({registered}); workflow definitions are immutable, bump the version\n"
    )
    # `run` deploys first and stops there.
    assert orbit("run", str(ir)).exit_code == 1
    assert not any(r["path"] == "/v1/executions" for r in fake.requests)


def test_a_tampered_ir_file_is_refused_before_any_request(
    fake: FakeRuntime, orbit: Orbit, tmp_path: Path
) -> None:
    ir = cli_ir.write(tmp_path / "hello.json", cli_ir.hello())
    ir.write_text(ir.read_text().replace('"description": "Compose', '"description": "Edited'))
    result = orbit("deploy", str(ir))
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {ir}: definition_hash does not match the IR content (was the file modified?)\n"
    )
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert orbit("deploy", str(broken)).stderr.startswith(f"error: {broken}: not valid JSON: ")
    assert fake.requests == []


def test_plain_text_refusals_of_the_http_layer(orbit: Orbit) -> None:
    # Like the real HTTP layer, the fake answers a body without a JSON type with a bare 415.
    import httpx

    from orbit_cli.client import ApiError, decode

    response = httpx.post(f"{orbit.server}/v1/executions", content=b"{}")
    with pytest.raises(ApiError) as raised:
        decode(response)
    assert raised.value.format_message() == "HTTP_ERROR (415): Unsupported Media Type"


def test_not_leader_is_followed_once(fake: FakeRuntime, tmp_path: Path) -> None:
    ir = cli_ir.write(tmp_path / "hello.json", cli_ir.hello())
    with FakeRuntime(leader=fake.url) as standby:
        result = Orbit(standby.url)("deploy", str(ir))
        assert result.exit_code == 0, result.output
        assert result.stderr.startswith("deployed Hello@1.0.0 (sha256:")
        assert [r["method"] for r in standby.requests] == ["POST"]
    assert [r["path"] for r in fake.requests] == ["/v1/workflows"]


def test_a_standby_pointing_at_another_standby_is_not_chased(tmp_path: Path) -> None:
    ir = cli_ir.write(tmp_path / "hello.json", cli_ir.hello())
    with (
        FakeRuntime(leader="http://127.0.0.1:1") as second,
        FakeRuntime(leader=second.url) as first,
    ):
        result = Orbit(first.url)("deploy", str(ir))
    assert result.exit_code == 1
    assert result.stderr.startswith("error: NOT_LEADER (503): this server is a standby")
    assert len(second.requests) == 1


def test_token_is_sent_as_a_bearer_header(fake: FakeRuntime, orbit: Orbit) -> None:
    fake.add_execution("order-1002")
    orbit("status", "order-1002", "--token", "s3cret")
    orbit("status", "order-1002", env={"ORBIT_TOKEN": "from-env"})
    orbit("status", "order-1002", "--token", "")
    assert [r["authorization"] for r in fake.requests] == ["Bearer s3cret", "Bearer from-env", None]


def test_usage_errors_exit_2(orbit: Orbit, tmp_path: Path) -> None:
    assert orbit("status").exit_code == 2
    assert orbit("ps", "--bogus").exit_code == 2
    assert orbit("ps", "--status", "sleeping").exit_code == 2
    assert orbit("logs", "x", "--run", "0").exit_code == 2
    assert orbit("status", "x", "--ca-cert", str(tmp_path / "missing.pem")).exit_code == 2
    pem = tmp_path / "client.pem"
    pem.write_text("not a certificate")
    result = orbit("status", "x", "--client-cert", str(pem))
    assert result.exit_code == 2
    assert "--client-cert requires --client-key" in result.stderr
    assert orbit("status", "x", "--ca-cert", str(pem)).exit_code == 2


def test_a_missing_file_is_not_taken_for_a_workflow_name(fake: FakeRuntime, orbit: Orbit) -> None:
    result = orbit("run", "workflows/helo.orbit")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: cannot read workflows/helo.orbit: No such file or directory (os error 2)\n"
    )
    assert orbit("inspect", "helo.orbit").exit_code == 1
    assert fake.requests == []


def test_colour_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from orbit_cli import output

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert output.colour_enabled(Terminal())
    assert not output.colour_enabled(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not output.colour_enabled(Terminal())


def test_a_filter_on_the_archive_that_does_not_parse_is_a_usage_error(orbit: Orbit) -> None:
    # The archive is filtered like the index (tests/test_server_retention.py);
    # a typo is shown under the filter before any request, as for the index.
    result = orbit("ps", "--archived", "--where", 'customer == "c-1" and')
    assert result.exit_code == 2
    assert "invalid filter" in result.stderr
