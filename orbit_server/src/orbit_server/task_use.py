"""Which announced tasks no deployed workflow calls.

A worker that announces `greeting.compse@1.0.0`, or `greeting.compose@2.0.0`
while the workflows call `@1.0.0`, registers without complaint and then
never receives a task; the steps wait. The server notices at registration
(a `warn` line) and marks such contracts in `GET /v1/workers`
(`unused_contracts`), which `orbit workers list` and the web UI show.

The tasks the definitions call come from `deployed.DeployedContracts`
(shared with the contract hash handshake), so a registration costs a walk
over the catalog's summaries, not over the definitions themselves.
A catalog with no workflow at all warns about nothing: workers usually
start before the first deploy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NotRequired, TypedDict

import attrs

from orbit_core.engine.facade import EngineApi
from orbit_core.semver import semver_key
from orbit_server.deployed import DeployedContracts


class UnusedContract(TypedDict):
    """An entry of a worker's `unused_contracts` in `GET /v1/workers`."""

    task_name: str
    contract_version: str
    # The versions deployed workflows call instead, when some call the task.
    deployed_versions: NotRequired[list[str]]


@attrs.frozen(slots=True)
class Unused:
    task_name: str
    contract_version: str
    deployed_versions: tuple[str, ...]

    def text(self) -> str:
        """`t@2.0.0 (workflows call 1.0.0)`, or `t@1.0.0` when no workflow calls `t`."""
        called = f" (workflows call {', '.join(self.deployed_versions)})"
        return f"{self.task_name}@{self.contract_version}" + (
            called if self.deployed_versions else ""
        )

    def document(self) -> UnusedContract:
        doc: UnusedContract = {
            "task_name": self.task_name,
            "contract_version": self.contract_version,
        }
        if self.deployed_versions:
            doc["deployed_versions"] = list(self.deployed_versions)
        return doc


class TaskUse:
    """One per server: the task versions the deployed workflows call."""

    def __init__(self, deployed: DeployedContracts | None = None) -> None:
        self._deployed = deployed or DeployedContracts()

    def called(self, engine: EngineApi) -> dict[str, set[str]] | None:
        """Task name -> the versions some deployed workflow calls; None with no workflow."""
        pinned = self._deployed.read(engine)
        if pinned is None:
            return None
        called: dict[str, set[str]] = {}
        for name, version in pinned:
            called.setdefault(name, set()).add(version)
        return called

    def unused(self, engine: EngineApi, contracts: Iterable[Mapping[str, str]]) -> list[Unused]:
        called = self.called(engine)
        if called is None:
            return []
        return _unused(called, contracts)

    def mark(self, engine: EngineApi, workers: list[dict[str, object]]) -> None:
        """Adds `unused_contracts` to each worker document that announced such a task."""
        called = self.called(engine)
        if called is None:
            return
        for worker in workers:
            contracts = worker.get("contracts")
            if not isinstance(contracts, list):
                continue
            found = _unused(called, contracts)
            if found:
                worker["unused_contracts"] = [u.document() for u in found]


def _unused(called: dict[str, set[str]], contracts: Iterable[Mapping[str, str]]) -> list[Unused]:
    found = []
    for contract in contracts:
        name, version = contract["task_name"], contract["contract_version"]
        versions = called.get(name, set())
        if version not in versions:
            found.append(Unused(name, version, tuple(sorted(versions, key=semver_key))))
    return found
