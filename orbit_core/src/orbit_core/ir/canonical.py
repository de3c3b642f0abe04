"""Canonical JSON and the definition hash.

The hash is SHA-256 over the RFC 8785 (JCS) serialisation of the IR document
with `definition_hash` and `source_map` removed (RULINGS §11). Comments, doc
comments, source positions and tests never reach the IR body, so only
`source_map` needs removing here.

The contract hash is the same digest over one task contract's document with
only its `name`, `version`, `input` and `output` (`contract_document`): what a
worker's generated types are made from (`orbit codegen`, docs/ir.md). Doc
comments and positions never reach those parts, so neither they nor
formatting change it; `compensated_by` is left out because workers never see
it (the runtime does not use it either).
"""

from __future__ import annotations

import hashlib

import rfc8785

from orbit_core.ir.codec import to_json, type_to_json
from orbit_core.ir.definition import Definition, TaskContract
from orbit_core.jsontypes import JsonObject, JsonValue

UNHASHED = ("definition_hash", "source_map")


def canonical_bytes(value: JsonValue) -> bytes:
    return rfc8785.dumps(value)


def hash_document(document: JsonObject) -> str:
    body = {k: v for k, v in document.items() if k not in UNHASHED}
    return "sha256:" + hashlib.sha256(canonical_bytes(body)).hexdigest()


def definition_hash(defn: Definition) -> str:
    return hash_document(to_json(defn))


def contract_document(contract: TaskContract) -> JsonObject:
    """The parts of a task contract its hash covers, in the IR's encoding."""
    return {
        "name": contract.name,
        "version": contract.version,
        "input": type_to_json(contract.input),
        "output": type_to_json(contract.output),
    }


def contract_hash(contract: TaskContract) -> str:
    """`sha256:` + 64 hex digits over the RFC 8785 form of `contract_document`."""
    return document_hash(contract_document(contract))


def document_hash(document: JsonValue) -> str:
    """`sha256:` + the hex SHA-256 of a JSON value's RFC 8785 form."""
    return "sha256:" + hashlib.sha256(canonical_bytes(document)).hexdigest()
