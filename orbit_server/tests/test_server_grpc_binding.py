"""The gRPC binding's pure parts: values, the status table, the generated code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from google.protobuf import struct_pb2

from orbit_server.errors import STATUS
from orbit_server.grpc_server import status_of
from orbit_server.grpc_values import from_value, to_value

ROOT = Path(__file__).resolve().parents[2]


def _value(obj: object) -> struct_pb2.Value:
    holder = struct_pb2.Struct()
    holder.update({"v": obj})
    return holder.fields["v"]


def test_whole_numbers_within_2_53_become_integers() -> None:
    got = from_value(_value({"a": 3, "b": -(2**53), "c": 2.5, "d": [1.0, True, None]}), "x")
    assert got == {"a": 3, "b": -(2**53), "c": 2.5, "d": [1, True, None]}
    assert isinstance(got, dict) and isinstance(got["a"], int) and isinstance(got["b"], int)
    beyond = from_value(_value(2.0**53 * 2), "x")
    assert isinstance(beyond, float)


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_number_json_cannot_hold_is_refused(number: float) -> None:
    with pytest.raises(ValueError, match=r"^output: .* \(numbers must be finite\)"):
        from_value(_value({"n": [number]}), "output")


def test_an_unset_value_is_null_and_values_round_trip() -> None:
    assert from_value(struct_pb2.Value(), "x") is None
    doc = {"s": "é", "n": 7, "f": 0.5, "l": [], "o": {}, "z": None, "b": False}
    assert from_value(to_value(doc), "x") == doc
    assert to_value({}).WhichOneof("kind") == "struct_value"
    assert to_value([]).WhichOneof("kind") == "list_value"


def test_every_error_code_has_the_chapter_s_status() -> None:
    expected = {
        400: grpc.StatusCode.INVALID_ARGUMENT,
        401: grpc.StatusCode.UNAUTHENTICATED,
        403: grpc.StatusCode.PERMISSION_DENIED,
        404: grpc.StatusCode.NOT_FOUND,
        409: grpc.StatusCode.FAILED_PRECONDITION,
        413: grpc.StatusCode.RESOURCE_EXHAUSTED,
        429: grpc.StatusCode.RESOURCE_EXHAUSTED,
        503: grpc.StatusCode.UNAVAILABLE,
    }
    for code, http in STATUS.items():
        assert status_of(code) is expected.get(http, grpc.StatusCode.INTERNAL), code
    assert status_of("INTERNAL") is grpc.StatusCode.INTERNAL
    assert status_of("SIGNAL_PAYLOAD_INVALID") is grpc.StatusCode.INTERNAL


def test_the_committed_generated_code_is_what_the_proto_generates() -> None:
    """protoc checks worker.proto (warnings are errors) and the committed
    orbit_server/grpc_proto must be its current output."""
    pytest.importorskip("grpc_tools")
    result = subprocess.run(
        [sys.executable, str(ROOT / "protocol" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
