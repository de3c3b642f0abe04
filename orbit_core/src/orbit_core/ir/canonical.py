"""Canonical JSON and the definition hash.

The hash is SHA-256 over the RFC 8785 (JCS) serialisation of the IR document
with `definition_hash` and `source_map` removed (RULINGS §11). Comments, doc
comments, source positions and tests never reach the IR body, so only
`source_map` needs removing here.
"""

from __future__ import annotations

import hashlib

import rfc8785

from orbit_core.ir.codec import to_json
from orbit_core.ir.definition import Definition
from orbit_core.jsontypes import JsonObject, JsonValue

UNHASHED = ("definition_hash", "source_map")


def canonical_bytes(value: JsonValue) -> bytes:
    return rfc8785.dumps(value)


def hash_document(document: JsonObject) -> str:
    body = {k: v for k, v in document.items() if k not in UNHASHED}
    return "sha256:" + hashlib.sha256(canonical_bytes(body)).hexdigest()


def definition_hash(defn: Definition) -> str:
    return hash_document(to_json(defn))
