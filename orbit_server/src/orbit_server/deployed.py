"""The task contracts that deployed workflows pin, for the checks made at a
worker's registration (`contract_check`: the contract hash handshake;
`task_use`: tasks no workflow calls) and for `GET /v1/workers`.

One owner per server (`WorkerCalls`), shared by both checks. Each read lists
the catalog's summaries; a definition's contracts are taken from it once per
definition hash (definitions are immutable) and kept, up to a bound.
"""

from __future__ import annotations

from orbit_core.engine.facade import EngineApi
from orbit_core.errors import OrbitError
from orbit_core.ir import TaskContract

# (task name, contract version) -> the contracts deployed definitions pin for it
Pinned = dict[tuple[str, str], list[TaskContract]]

_KEPT = 4096


class DeployedContracts:
    def __init__(self) -> None:
        self._by_hash: dict[str, Pinned] = {}

    def read(self, engine: EngineApi) -> Pinned | None:
        """What the deployed workflows pin; None when no workflow is deployed."""
        rows = engine.list_workflows()["workflows"]
        if not rows:
            return None
        found: Pinned = {}
        for row in rows:
            pinned = self._by_hash.get(row["definition_hash"])
            if pinned is None:
                try:
                    definition = engine.definition(row["name"], row["version"])
                except OrbitError:
                    continue  # gone since the listing
                pinned = {}
                for contract in definition.contracts.values():
                    if isinstance(contract, TaskContract):
                        pinned.setdefault((contract.name, contract.version), []).append(contract)
                if len(self._by_hash) >= _KEPT:
                    self._by_hash.clear()
                self._by_hash[row["definition_hash"]] = pinned
            for pair, listed in pinned.items():
                found.setdefault(pair, []).extend(listed)
        return found
