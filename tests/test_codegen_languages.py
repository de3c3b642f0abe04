"""`orbit codegen` end to end: every language's output builds with its own
toolchain, a contract change breaks each build at the handler, and a worker
made from the old contract is refused by a real server (issue 43).

The toolchains are the machine's: mypy and ruff from this environment, tsc
from sdks/typescript/node_modules (`npm ci` there), go, cargo (serde from
crates.io; the target directory is CARGO_TARGET_DIR, as noxfile.py sets it),
javac with Jackson from Maven (the repository's .cache/m2, as the e2e tests
use). A language whose toolchain is missing is skipped, saying which.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from grpc_client import grpc_addr
from server_harness import ServerProcess

from orbit_server.grpc_proto import worker_pb2 as pb
from orbit_server.grpc_proto import worker_pb2_grpc as pb_grpc

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
EXAMPLE = REPO / "examples" / "contracts.orbit"
EVERY_TYPE = REPO / "orbit_cli" / "tests" / "codegen" / "every_type.orbit"
TSC = REPO / "sdks" / "typescript" / "node_modules" / ".bin" / "tsc"
MAVEN_REPO = REPO / ".cache" / "m2"
JACKSON = "2.23.0"
CARGO_TARGET = os.environ.get(
    "CARGO_TARGET_DIR", str(Path.home() / ".cache" / "orbit" / "cargo-target")
)
HASH = re.compile(r"sha256:[0-9a-f]{64}")
LANGS = ("python", "typescript", "go", "rust", "java")

pytestmark = pytest.mark.timeout(900)


def run(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int, str]:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=800,
        env={**os.environ, **(env or {})},
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def codegen(lang: str, out: Path, *files: Path, package: str = "gen") -> None:
    code, text = run(
        BIN / "orbit", "codegen", "--lang", lang, *files, "-o", out, "--package", package
    )
    assert code == 0, text


def _needs(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None and not Path(tool).exists()]
    if missing:
        pytest.skip(f"toolchain not installed: {', '.join(missing)}")


def _jackson() -> str:
    jars = sorted(MAVEN_REPO.glob("com/fasterxml/jackson/core/*/*/*.jar"))
    if len(jars) < 3:
        code, text = run(
            "mvn", "-q", "-B", f"-Dmaven.repo.local={MAVEN_REPO}", "dependency:get",
            f"-Dartifact=com.fasterxml.jackson.core:jackson-databind:{JACKSON}",
        )  # fmt: skip
        assert code == 0, text
        jars = sorted(MAVEN_REPO.glob("com/fasterxml/jackson/core/*/*/*.jar"))
    return os.pathsep.join(str(j) for j in jars)


# --- one builder per language: (generated dir, handler source) -> (code, output)

PY_HANDLER = """
from gen import OrdersValidateHandler, OrdersValidateInput, OrdersValidateOutput


def handle(input: OrdersValidateInput, ctx: object) -> OrdersValidateOutput:
    return OrdersValidateOutput(valid=input.amount > 0 and len(input.items) > 0)


HANDLER: OrdersValidateHandler = handle
"""

TS_HANDLER = """
import { type OrdersValidateHandler, ORDERS_VALIDATE } from "./gen.ts";

export const handle: OrdersValidateHandler = (input) => ({
  valid: input.amount > 0 && input.items.length > 0,
});
export const contract = ORDERS_VALIDATE;
"""

GO_HANDLER = """
package gen

import "context"

func handle(ctx context.Context, task *int, in OrdersValidateInput) (OrdersValidateOutput, error) {
	return OrdersValidateOutput{Valid: in.Amount > 0 && len(in.Items) > 0}, nil
}

var _ OrdersValidateHandler[*int] = handle
"""

RUST_MAIN = """
mod gen;
use gen::*;

fn handle(input: OrdersValidateInput, _ctx: &()) -> Result<OrdersValidateOutput, String> {
    Ok(OrdersValidateOutput { valid: input.amount > 0.0 && !input.items.is_empty() })
}

fn main() {
    let typed: OrdersValidateHandler<(), String> = handle;
    let input: OrdersValidateInput =
        serde_json::from_str(r#"{"order_id":"a","amount":1,"items":[]}"#).expect("input");
    println!("{:?} {}", typed(input, &()), <OrdersValidate as Task>::CONTRACT_HASH);
}
"""

CARGO_TOML = """
[package]
name = "orbit-codegen-check"
version = "0.1.0"
edition = "2021"

[dependencies]
serde = { version = "1", features = ["derive"] }
serde_json = "1"
"""

JAVA_HANDLER = """
package check;

import com.example.gen.Gen;

public final class Handler {
  private Handler() {}

  static Gen.OrdersValidateOutput handle(Gen.OrdersValidateInput input, Object ctx) {
    return new Gen.OrdersValidateOutput(input.amount() > 0 && !input.items().isEmpty());
  }

  public static final Gen.OrdersValidateHandler<Object> HANDLER = Handler::handle;
}
"""


def build_python(work: Path, files: tuple[Path, ...], handler: bool) -> tuple[int, str]:
    _needs(str(BIN / "mypy"), str(BIN / "ruff"))
    codegen("python", work, *files)
    if handler:
        (work / "handler.py").write_text(PY_HANDLER)
    code, text = run(BIN / "mypy", "--strict", "--no-incremental", ".", cwd=work)
    if code != 0:
        return code, text
    # Formatted as ruff format leaves it (ruff's defaults: a fresh config).
    (work / "ruff.toml").write_text("")
    code, text = run(BIN / "ruff", "format", "--check", "gen.py", cwd=work)
    if code != 0:
        return code, text
    return run(BIN / "ruff", "check", "gen.py", cwd=work)


def build_typescript(work: Path, files: tuple[Path, ...], handler: bool) -> tuple[int, str]:
    _needs(str(TSC))
    codegen("typescript", work, *files)
    if handler:
        (work / "handler.ts").write_text(TS_HANDLER)
    config = json.loads(
        re.sub(r"^\s*//.*$", "", (REPO / "sdks/typescript/tsconfig.json").read_text(), flags=re.M)
    )
    config["compilerOptions"].pop("types", None)
    config["include"] = ["*.ts"]
    (work / "tsconfig.json").write_text(json.dumps(config))
    (work / "package.json").write_text('{"type": "module"}')
    return run(TSC, "-p", ".", cwd=work)


def build_go(work: Path, files: tuple[Path, ...], handler: bool) -> tuple[int, str]:
    _needs("go")
    codegen("go", work, *files)
    (work / "go.mod").write_text("module example.com/gen\n\ngo 1.21\n")
    if handler:
        (work / "handler.go").write_text(GO_HANDLER)
    code, text = run("gofmt", "-l", "gen.go", cwd=work)
    if code != 0 or text.strip():
        return 1, "not gofmt-formatted: " + text
    return run("go", "vet", "./...", cwd=work, env={"GOFLAGS": "-mod=mod"})


def build_rust(work: Path, files: tuple[Path, ...], handler: bool) -> tuple[int, str]:
    _needs("cargo")
    codegen("rust", work / "src", *files)
    (work / "Cargo.toml").write_text(CARGO_TOML)
    main = RUST_MAIN if handler else "mod gen;\nfn main() {}\n"
    (work / "src" / "main.rs").write_text(main)
    env = {"CARGO_TARGET_DIR": CARGO_TARGET}
    return run("cargo", "clippy", "-q", "--", "-D", "warnings", cwd=work, env=env)


def build_java(work: Path, files: tuple[Path, ...], handler: bool) -> tuple[int, str]:
    _needs("javac", "mvn")
    codegen("java", work / "src", *files, package="com.example.gen")
    if handler:
        (work / "src" / "check").mkdir(parents=True, exist_ok=True)
        (work / "src" / "check" / "Handler.java").write_text(JAVA_HANDLER)
    sources = [str(p) for p in sorted((work / "src").rglob("*.java"))]
    return run("javac", "-Xlint:all", "-Werror", "-cp", _jackson(), "-d", work / "out", *sources)


BUILDERS: dict[str, Callable[[Path, tuple[Path, ...], bool], tuple[int, str]]] = {
    "python": build_python,
    "typescript": build_typescript,
    "go": build_go,
    "rust": build_rust,
    "java": build_java,
}


@pytest.mark.parametrize("lang", LANGS)
def test_every_language_builds_the_example_and_every_type(lang: str, tmp_path: Path) -> None:
    code, text = BUILDERS[lang](tmp_path, (EXAMPLE, EVERY_TYPE), True)
    assert code == 0, text
    names = ("gen.py", "gen.ts", "gen.go", "gen.rs", "Gen.java")
    generated = "".join(p.read_text() for p in tmp_path.rglob("*") if p.name in names)
    # Each contract's hash is in the code.
    code, listing = run(
        BIN / "orbit", "codegen", "--lang", lang, EXAMPLE, "-o", tmp_path / "x", "--json"
    )
    assert code == 0, listing
    hashes = [c["contract_hash"] for c in json.loads(listing)["contracts"]]
    assert len(hashes) == 7
    for found in hashes:
        assert HASH.fullmatch(found)
        assert found in generated


def _drifted(tmp_path: Path) -> Path:
    """examples/contracts.orbit with the type of one field of `orders.validate` changed."""
    text = EXAMPLE.read_text()
    changed = text.replace(
        "input { order_id: String, amount: Float, items: List<LineItem> }",
        "input { order_id: String, amount: String, items: List<LineItem> }",
    )
    assert changed != text
    path = tmp_path / "contracts.orbit"
    path.write_text(changed)
    return path


@pytest.mark.parametrize("lang", LANGS)
def test_a_changed_field_breaks_each_build_at_the_handler(lang: str, tmp_path: Path) -> None:
    before = tmp_path / "before"
    code, text = BUILDERS[lang](before, (EXAMPLE,), True)
    assert code == 0, text
    after = tmp_path / "after"
    code, text = BUILDERS[lang](after, (_drifted(tmp_path),), True)
    assert code != 0, text
    assert re.search(r"handler\.(py|ts|go)|main\.rs|Handler\.java", text), text


def test_orbit_codegen_check_finds_stale_code(tmp_path: Path) -> None:
    codegen("python", tmp_path, EXAMPLE)
    code, text = run(
        BIN / "orbit",
        "codegen",
        "--lang",
        "python",
        EXAMPLE,
        "-o",
        tmp_path,
        "--package",
        "gen",
        "--check",
    )
    assert code == 0, text
    code, text = run(
        BIN / "orbit", "codegen", "--lang", "python", _drifted(tmp_path), "-o", tmp_path,
        "--package", "gen", "--check",
    )  # fmt: skip
    assert code == 1, text
    assert "stale" in text


@pytest.mark.parametrize(
    ("lang", "folder"),
    [("python", "sdks/python/tests"), ("typescript", "sdks/typescript/test/fixtures")],
)
def test_the_sdk_test_fixtures_are_current(lang: str, folder: str) -> None:
    code, text = run(
        BIN / "orbit", "codegen", "--lang", lang, "orbit_cli/tests/codegen/greeting.orbit",
        "-o", folder, "--package", "greeting_contracts", "--check", cwd=REPO,
    )  # fmt: skip
    assert code == 0, text


WORKFLOW = """
import "contracts.orbit"

workflow Validate {
    version "1.0.0"
    input { order_id: String, amount: String }
    step check {
        worker "orders.validate"
        with { order_id: input.order_id, amount: input.amount, items: [] }
    }
    return { ok: true }
}
"""

OLD_WORKER = """
import sys
sys.path.insert(0, sys.argv[2])
import gen
from orbit_sdk import ApiError, Worker

worker = Worker(worker_id="old-typed", server=sys.argv[1], token="")
worker.register(gen.ORDERS_VALIDATE, lambda input, ctx: gen.OrdersValidateOutput(valid=True))
try:
    worker.run(install_signal_handlers=False)
except ApiError as exc:
    print("REFUSED", exc.status, exc.code, exc.message)
    sys.exit(3)
"""


def test_an_old_worker_is_refused_by_a_server_running_the_changed_contract(tmp_path: Path) -> None:
    old = tmp_path / "old"
    codegen("python", old, EXAMPLE)
    drifted = _drifted(tmp_path)
    (tmp_path / "validate.orbit").write_text(WORKFLOW)
    with ServerProcess(tmp_path / "orbit.db", "--grpc-addr", "127.0.0.1:0") as proc:
        code, text = run(
            BIN / "orbit", "deploy", tmp_path / "validate.orbit",
            env={"ORBIT_SERVER": f"http://{proc.addr}"},
        )  # fmt: skip
        assert code == 0, text
        assert drifted.exists()
        # (b) over HTTP, through the Python SDK: 409 CONTRACT_MISMATCH.
        script = tmp_path / "old_worker.py"
        script.write_text(OLD_WORKER)
        code, text = run(sys.executable, script, f"http://{proc.addr}", old)
        assert code == 3, text
        assert "REFUSED 409 CONTRACT_MISMATCH" in text
        assert (
            "`orders.validate@1.0.0`" in text
            and "input.amount: String deployed, Float in the worker's" in text
        )
        proc.wait_for_log("worker refused")
        # Over gRPC: FAILED_PRECONDITION, with the same message.
        sys.path.insert(0, str(old))
        try:
            gen = importlib.import_module("gen")  # the old generated module

            channel = grpc.insecure_channel(grpc_addr(proc))
            stub = pb_grpc.WorkerServiceStub(channel)
            entry = pb.TaskContract(
                task_name="orders.validate",
                contract_version="1.0.0",
                contract_hash=gen.ORDERS_VALIDATE.contract_hash,
                contract_json=gen.ORDERS_VALIDATE.contract,
            )
            request = pb.RegisterWorkerRequest(worker_id="g", runtime="python", contracts=[entry])
            with pytest.raises(grpc.RpcError) as refused:
                stub.RegisterWorker(request, timeout=30)
            assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
            assert "input.amount" in str(refused.value.details())
            # A worker generated from the deployed contract is accepted.
            new = tmp_path / "new"
            codegen("python", new, drifted, package="gen_new")
            sys.path.insert(0, str(new))
            gen_new = importlib.import_module("gen_new")

            accepted = pb.TaskContract(
                task_name="orders.validate",
                contract_version="1.0.0",
                contract_hash=gen_new.ORDERS_VALIDATE.contract_hash,
            )
            reply = stub.RegisterWorker(
                pb.RegisterWorkerRequest(worker_id="g2", runtime="python", contracts=[accepted]),
                timeout=30,
            )
            assert reply.accepted
            channel.close()
        finally:
            sys.path[:] = [p for p in sys.path if p not in (str(old), str(tmp_path / "new"))]
            sys.modules.pop("gen", None)
            sys.modules.pop("gen_new", None)


GO_DECODE_TEST = """
package gen

import "testing"

func TestDecodeNamesTheListIndex(t *testing.T) {
	cases := map[string]string{
		`{"order_id": "o", "amount": 1, "items": [{"sku": "a", "quantity": 1}, {"quantity": 2}]}`: "input.items[1].sku: missing required field",
		`{"order_id": "o", "amount": 1, "items": [{"sku": "a", "quantity": 1}, {"sku": "b", "quantity": "x"}]}`: "input.items[1].quantity: ",
		`{"order_id": "o", "amount": 1, "items": [7]}`: "input.items[0]: expected an object",
		`{"order_id": "o", "amount": 1, "items": {}}`: "input.items: ",
	}
	for input, want := range cases {
		_, err := Decode[OrdersValidateInput]([]byte(input))
		if err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
			t.Errorf("%s: got %v, want %q...", input, err, want)
		}
	}
	in, err := Decode[OrdersValidateInput]([]byte(`{"order_id": "o", "amount": 1, "items": [{"sku": "a", "quantity": 1}]}`))
	if err != nil || len(in.Items) != 1 || in.Items[0].Sku != "a" {
		t.Errorf("a good input: %+v %v", in, err)
	}
}
"""


def test_the_go_decoder_names_the_list_index_of_a_bad_item(tmp_path: Path) -> None:
    """`items[1].sku`, as the other languages' decoders say (issue 43)."""
    _needs("go")
    codegen("go", tmp_path, EXAMPLE)
    (tmp_path / "go.mod").write_text("module example.com/gen\n\ngo 1.21\n")
    (tmp_path / "decode_test.go").write_text(GO_DECODE_TEST)
    code, text = run("go", "test", "./...", cwd=tmp_path, env={"GOFLAGS": "-mod=mod"})
    assert code == 0, text
