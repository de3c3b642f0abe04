"""The ORBIT intermediate representation: what the compiler produces and the engine runs."""

from orbit_core.ir.canonical import (
    canonical_bytes,
    contract_document,
    contract_hash,
    definition_hash,
    hash_document,
)
from orbit_core.ir.codec import IRError, from_json, to_json
from orbit_core.ir.definition import (
    IR_V1,
    IR_V2,
    IR_VERSIONS,
    ChildContract,
    Compensation,
    ContinueAsNew,
    Definition,
    EventHandler,
    ForEach,
    Migration,
    MigrationMap,
    Query,
    Retry,
    SearchField,
    Signal,
    Step,
    TaskContract,
)
from orbit_core.ir.walk import needs_ir_v2

__all__ = [
    "IR_V1",
    "IR_V2",
    "IR_VERSIONS",
    "ChildContract",
    "Compensation",
    "ContinueAsNew",
    "Definition",
    "EventHandler",
    "ForEach",
    "IRError",
    "Migration",
    "MigrationMap",
    "Query",
    "Retry",
    "SearchField",
    "Signal",
    "Step",
    "TaskContract",
    "canonical_bytes",
    "contract_document",
    "contract_hash",
    "definition_hash",
    "from_json",
    "hash_document",
    "needs_ir_v2",
    "to_json",
]
