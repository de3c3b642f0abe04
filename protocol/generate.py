"""Generates the Python code of worker.proto into orbit_server.

    python protocol/generate.py          # rewrite the committed files
    python protocol/generate.py --check  # exit 1 if they are not current

The generated modules are committed (orbit_server/src/orbit_server/grpc_proto/),
so installing orbit-server needs no protoc; orbit_server's tests run this
with --check, so a change to the .proto without regenerating fails the build.
grpcio-tools provides protoc; its version is pinned in noxfile.py because the
output names the versions it was made with.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protocol"
PROTO = "orbit/worker/v1/worker.proto"
TARGET = ROOT / "orbit_server" / "src" / "orbit_server" / "grpc_proto"
# protoc writes `from orbit.worker.v1 import worker_pb2`, an import of a
# top-level `orbit` package nobody installs: it becomes the module's place
# inside orbit_server.
_IMPORT = "from orbit.worker.v1 import worker_pb2 as"
_OURS = "from orbit_server.grpc_proto import worker_pb2 as"
FILES = ("worker_pb2.py", "worker_pb2.pyi", "worker_pb2_grpc.py")


def generate() -> dict[str, str]:
    """The generated files' text, by name."""
    from grpc_tools import protoc

    includes = str(resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory() as out:
        status = protoc.main(
            [
                "protoc",
                f"-I{PROTO_ROOT}",
                f"-I{includes}",
                f"--python_out={out}",
                f"--pyi_out={out}",
                f"--grpc_python_out={out}",
                # Warnings (unused imports and the like) fail the check too.
                "--fatal_warnings",
                str(PROTO_ROOT / PROTO),
            ]
        )
        if status != 0:
            raise SystemExit(f"protoc failed on {PROTO} (status {status})")
        made = Path(out) / Path(PROTO).parent
        texts = {name: (made / name).read_text(encoding="utf-8") for name in FILES}
    texts["worker_pb2_grpc.py"] = texts["worker_pb2_grpc.py"].replace(_IMPORT, _OURS)
    return texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; write nothing")
    args = parser.parse_args()
    texts = generate()
    stale = [
        name
        for name, text in texts.items()
        if not (TARGET / name).exists() or (TARGET / name).read_text(encoding="utf-8") != text
    ]
    if args.check:
        for name in stale:
            print(f"{TARGET / name} is not what {PROTO} generates", file=sys.stderr)
        if stale:
            print("run: python protocol/generate.py", file=sys.stderr)
        return 1 if stale else 0
    TARGET.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (TARGET / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
