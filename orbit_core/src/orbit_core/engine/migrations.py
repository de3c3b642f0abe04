"""The engine's side of versions in production: the census of the live
executions it holds, the migration plan and the migration of one execution
(orbit_core/migration.py holds the rules).

Every unfinished execution is in memory, so the census and the plan read
memory only (in a group, as every read of memory does) and never a history;
the store is read once per census, for when each version was last live.

Moving an execution is one command: the `ExecutionMigrated` event is
appended, the execution's record is rebuilt as recovery would build it from
its history (the plan found by its new definition hash, its tokens held
under the renamed units) and decided, so whatever the target adds and is
ready runs in the same group. Nothing else is written: a failed group is
undone like any other, and the execution stays on its old definition.
"""

from __future__ import annotations

from collections.abc import Callable

from orbit_core import migration as mig
from orbit_core.engine.catalog import Catalog
from orbit_core.engine.commands import Tx
from orbit_core.engine.executions import Executions
from orbit_core.errors import InvalidError, NotFoundError
from orbit_core.state import ExecutionState

# Picks the executions a plan or a run looks at (the filters `orbit ps`
# has; a richer filter language plugs in here).
Filter = Callable[[ExecutionState], bool]


def everything(state: ExecutionState) -> bool:
    return True


class Migrations:
    def __init__(self, executions: Executions, catalog: Catalog) -> None:
        self._x = executions
        self._catalog = catalog

    def route(self, workflow: str, from_version: str, to_version: str) -> mig.Route:
        source = self._catalog.find(workflow, from_version).defn
        target = self._catalog.find(workflow, to_version).defn
        if source.definition_hash == target.definition_hash:
            raise InvalidError(
                f"{source.key} and {target.key} are the same definition", "MIGRATION_NOT_DECLARED"
            )
        r = mig.route(source, target)
        if r is None:
            raise NotFoundError(
                f"{target.key} declares no migration from {source.version} "
                f'(`migrate from "{source.version}"` pinned to {source.definition_hash})',
                "MIGRATION_NOT_DECLARED",
            )
        return r

    def census(self, workflow: str, last_live: dict[str, int]) -> mig.VersionsDoc:
        definitions = self._catalog.definitions(workflow)
        if not definitions:
            self._catalog.find(workflow, None)  # raises WORKFLOW_NOT_FOUND
        live = [
            x.state
            for x in self._x.memory.all()
            if x.state.workflow == workflow and not x.state.terminal
        ]
        return mig.census(workflow, definitions, live, last_live)

    def candidates(self, r: mig.Route, keep: Filter) -> list[ExecutionState]:
        """The live executions of the route's source that `keep` picks, by id."""
        source = r.source.definition_hash
        states = [
            x.state
            for x in self._x.memory.all()
            if x.state.definition_hash == source and not x.state.terminal and keep(x.state)
        ]
        return sorted(states, key=lambda s: s.id)

    def plan(self, r: mig.Route, keep: Filter) -> list[mig.PlanEntry]:
        entries: list[mig.PlanEntry] = []
        for state in self.candidates(r, keep):
            found = mig.assess(state, r)
            entry: mig.PlanEntry = {
                "execution_id": state.id,
                "version": state.version,
                "verdict": found.verdict,
            }
            if found.reason is not None:
                entry["reason"] = found.reason
            entries.append(entry)
        return entries

    def migrate(self, tx: Tx, execution_id: str, r: mig.Route) -> mig.MigratedEntry:
        """Moves one execution if it is at a safe point now; otherwise
        leaves it untouched and says why."""
        x = self._x
        live = x.running(execution_id)
        found = mig.assess(live.state, r)
        entry: mig.MigratedEntry = {
            "execution_id": execution_id,
            "verdict": found.verdict,
            "migrated": False,
        }
        if found.verdict != mig.NOW:
            if found.reason is not None:
                entry["reason"] = found.reason
            return entry
        x.append(tx, live, mig.migrated_event(live.state, r, found.input, tx.now))
        x.memory.discard(execution_id)
        moved = x.adopt(live.state)
        assert moved is not None  # the route found the target in the catalog
        x.decide(tx, moved)
        entry["migrated"] = True
        return entry
