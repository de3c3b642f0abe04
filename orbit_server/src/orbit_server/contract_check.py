"""The worker handshake: a registration that presents a contract hash is
checked against the contracts deployed workflows pin (docs/workers/typed-workers.md).

A worker made from generated code sends, per `task_name@contract_version`,
the hash of the contract it was generated from (`contract_hash`) and may
send the contract document itself (`contract`). The registration is refused
with CONTRACT_MISMATCH (409; FAILED_PRECONDITION over gRPC) when deployed
workflows use that task at that version and none of them pins a contract
with that hash; with the document, the message names the first field that
differs. A contract no deployed workflow uses has nothing to compare with
and is accepted, as is an entry without a hash (chapter 68 unchanged).

Deployed contracts are read on each checked registration (registrations
are rare) through `deployed.DeployedContracts`, which `task_use` shares.
"""

from __future__ import annotations

import re

import attrs

from orbit_core.engine.facade import EngineApi
from orbit_core.errors import ConflictError, InvalidError
from orbit_core.ir import TaskContract, contract_document, contract_hash
from orbit_core.ir.contractdiff import first_difference
from orbit_core.jsontypes import JsonValue
from orbit_server.deployed import DeployedContracts

HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


@attrs.frozen
class Presented:
    """A contract a worker announced with the hash it was generated from."""

    task_name: str
    contract_version: str
    contract_hash: str
    contract: JsonValue = None


def presented(entry: dict[str, object], where: str) -> Presented | None:
    """The hash part of one `contracts` entry, or None without `contract_hash`."""
    value = entry.get("contract_hash")
    if value is None:
        return None
    if not isinstance(value, str) or not HASH.match(value):
        raise InvalidError(
            f"{where}.contract_hash: expected `sha256:` followed by 64 lowercase hex digits",
            "INVALID_REQUEST",
        )
    document = entry.get("contract")
    return Presented(
        str(entry["task_name"]),
        str(entry["contract_version"]),
        value,
        document if isinstance(document, dict) else None,
    )


class ContractCheck:
    def __init__(self, engine: EngineApi, deployed: DeployedContracts) -> None:
        self._engine = engine
        self._deployed = deployed

    def check(self, entries: list[Presented]) -> None:
        """Raises CONTRACT_MISMATCH for the first entry that differs."""
        if not entries:
            return
        deployed = self._deployed.read(self._engine) or {}
        for entry in entries:
            pinned = deployed.get((entry.task_name, entry.contract_version))
            if not pinned:
                continue  # no deployed workflow uses it: nothing to compare
            hashes = {contract_hash(c): c for c in pinned}
            if entry.contract_hash in hashes:
                continue
            raise _mismatch(entry, pinned[-1])


def _mismatch(entry: Presented, deployed: TaskContract) -> ConflictError:
    task = f"{entry.task_name}@{entry.contract_version}"
    if entry.contract is not None:
        difference = first_difference(contract_document(deployed), entry.contract)
        where = f"first difference: {difference}" if difference else "its fields are the same"
    else:
        where = "the worker sent no contract document to name the field"
    return ConflictError(
        f"contract mismatch for task `{task}`: the worker was generated from "
        f"{entry.contract_hash}, deployed workflows use {contract_hash(deployed)}; {where}",
        "CONTRACT_MISMATCH",
    )
