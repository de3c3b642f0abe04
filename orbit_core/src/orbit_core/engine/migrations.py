"""The engine's side of versions in production: the census of the live
executions it holds, the migration plan and the migration of one execution
(orbit_core/migration.py holds the rules).

Every unfinished execution is in memory, so the census and the plan read
memory only (in a group, as every read of memory does) and never a history;
the store is read once per census, for when each version was last live.

Moving an execution is one command: the `WorkflowMigrated` event is
appended, the execution's record is rebuilt as recovery would build it from
its history (the plan found by its new definition hash, its tokens held
under the renamed units) and decided, so whatever the target adds and is
ready runs in the same group. Nothing else is written: a failed group is
undone like any other, and the execution stays on its old definition.

In shared mode (chapter 44) the server's engine holds only its own
executions, so the desk is given an `Elsewhere` (`MigrationDesk.across`):
a plan also assesses the executions other servers hold, folded from their
histories in the store, and moving one of those is sent to its owner,
which moves it by the same command in its own commit (the inbox entry
`migrate`, carrying the mapping's hash so the owner refuses a mapping other
than the one planned). The census counts those executions too, so any
server answers for the whole cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from orbit_core import migration as mig
from orbit_core.engine.catalog import Catalog
from orbit_core.engine.commands import Tx
from orbit_core.engine.executions import Executions
from orbit_core.engine.pipeline import GroupCommit
from orbit_core.errors import InvalidError, NotFoundError, OrbitError
from orbit_core.ports import Store
from orbit_core.state import ExecutionState

# Picks the executions a plan or a run looks at (the filters `orbit ps`
# has; a richer filter language plugs in here).
Filter = Callable[[ExecutionState], bool]


def everything(state: ExecutionState) -> bool:
    return True


class Elsewhere(Protocol):
    """The executions other servers hold (shared mode)."""

    def states_elsewhere(self, workflow: str) -> list[ExecutionState]:
        """The live executions of `workflow` that other servers hold, each
        folded from its current run's history."""
        ...

    def owner_elsewhere(self, execution_id: str) -> bool:
        """Whether another server holds the execution."""
        ...

    def migrate_elsewhere(
        self,
        execution_id: str,
        workflow: str,
        from_version: str,
        to_version: str,
        migration_hash: str,
    ) -> mig.MigratedEntry:
        """Has the execution's owner move it (`MigrationDesk.move` there)."""
        ...


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

    def census(
        self,
        workflow: str,
        last_live: dict[str, int],
        others: Sequence[ExecutionState] = (),
    ) -> mig.VersionsDoc:
        """`others`: live executions other servers hold (shared mode); one
        this engine holds too (taken over meanwhile) is counted once."""
        definitions = self._catalog.definitions(workflow)
        if not definitions:
            self._catalog.find(workflow, None)  # raises WORKFLOW_NOT_FOUND
        live = [
            x.state
            for x in self._x.memory.all()
            if x.state.workflow == workflow and not x.state.terminal
        ]
        seen = {s.id for s in live}
        live += [s for s in others if s.id not in seen and not s.terminal]
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
        return self.plan_of(self.candidates(r, keep), r)

    def plan_of(self, states: list[ExecutionState], r: mig.Route) -> list[mig.PlanEntry]:
        """The plan's entry of each of `states` that runs the route's source."""
        source = r.source.definition_hash
        entries: list[mig.PlanEntry] = []
        for state in states:
            if state.definition_hash != source or state.terminal:
                continue
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


class MigrationDesk:
    """`engine.migrations`: the calls of operators retiring versions."""

    def __init__(
        self,
        pipeline: GroupCommit,
        store: Store,
        migrations: Migrations,
        elsewhere: Elsewhere | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._store = store
        self._m = migrations
        self._elsewhere = elsewhere

    def across(self, elsewhere: Elsewhere) -> MigrationDesk:
        """This desk, planning and moving the executions `elsewhere` names
        too (shared mode)."""
        return MigrationDesk(self._pipeline, self._store, self._m, elsewhere)

    def census(self, workflow: str) -> mig.VersionsDoc:
        """Per registered version of `workflow`: its live executions, where
        they wait, the tasks they may still call, and its drain status."""
        self._pipeline.check_open()
        last_live = _version_activity(self._store, workflow)
        # Read before the command: the store is not read inside a group.
        others = [] if self._elsewhere is None else self._elsewhere.states_elsewhere(workflow)
        return self._pipeline.submit(
            lambda tx: self._m.census(workflow, last_live, others), read=True
        )

    def plan(
        self, workflow: str, from_version: str, to_version: str, keep: Filter = everything
    ) -> mig.PlanDoc:
        """What migrating the live executions of `from_version` to
        `to_version` would do to each; changes nothing."""
        # Read before the command: the store is not read inside a group.
        others = [] if self._elsewhere is None else self._elsewhere.states_elsewhere(workflow)

        def read(tx: Tx) -> mig.PlanDoc:
            r = self._m.route(workflow, from_version, to_version)
            entries = self._m.plan(r, keep)
            if others:
                seen = {e["execution_id"] for e in entries}
                entries += self._m.plan_of([s for s in others if s.id not in seen and keep(s)], r)
                entries.sort(key=lambda e: e["execution_id"])
            return {
                "workflow": workflow,
                "from_version": from_version,
                "to_version": to_version,
                "migration_hash": r.hash,
                "executions": entries,
            }

        return self._pipeline.submit(read, read=True)

    def run(
        self,
        workflow: str,
        from_version: str,
        to_version: str,
        *,
        limit: int = 100,
        dry_run: bool = False,
        keep: Filter = everything,
    ) -> mig.RunDoc:
        """Moves up to `limit` executions of `from_version` that are at a
        safe point to `to_version`, each by its own command and commit (an
        interruption leaves each on one version or the other). `remaining`
        counts the executions `keep` picks that are still on `from_version`."""
        plan = self.plan(workflow, from_version, to_version, keep)
        done: list[mig.MigratedEntry] = []
        if dry_run:
            done = [
                {"execution_id": e["execution_id"], "verdict": e["verdict"], "migrated": False}
                for e in plan["executions"]
            ]
        else:
            ready = [e["execution_id"] for e in plan["executions"] if e["verdict"] == mig.NOW]
            done = [
                self.move(
                    workflow,
                    from_version,
                    to_version,
                    eid,
                    migration_hash=plan["migration_hash"],
                )
                for eid in ready[:limit]
            ]
        moved = sum(1 for e in done if e["migrated"])
        return {
            "workflow": workflow,
            "from_version": from_version,
            "to_version": to_version,
            "migration_hash": plan["migration_hash"],
            "dry_run": dry_run,
            "migrated": moved,
            "remaining": len(plan["executions"]) - moved,
            "executions": done,
        }

    def move(
        self,
        workflow: str,
        from_version: str,
        to_version: str,
        execution_id: str,
        *,
        migration_hash: str | None = None,
    ) -> mig.MigratedEntry:
        """Moves one execution in one command and commit, if it is at a safe
        point now; the entry says whether it moved and why not (a batch
        job's migrate action calls this per execution). With
        `migration_hash`, only by the mapping of that hash. An execution
        another server holds is moved by that server."""

        def move(tx: Tx) -> mig.MigratedEntry:
            r = self._m.route(workflow, from_version, to_version)
            if migration_hash is not None and r.hash != migration_hash:
                return {
                    "execution_id": execution_id,
                    "verdict": mig.NEVER,
                    "migrated": False,
                    "reason": (
                        f"the migration from {from_version} to {to_version} has the hash "
                        f"{r.hash} here, not {migration_hash}"
                    ),
                }
            return self._m.migrate(tx, execution_id, r)

        try:
            elsewhere = self._elsewhere
            if elsewhere is not None and elsewhere.owner_elsewhere(execution_id):
                if migration_hash is None:
                    migration_hash = self._pipeline.submit(
                        lambda tx: self._m.route(workflow, from_version, to_version).hash,
                        read=True,
                    )
                return elsewhere.migrate_elsewhere(
                    execution_id, workflow, from_version, to_version, migration_hash
                )
            return self._pipeline.submit(move)
        except OrbitError as exc:  # it ended meanwhile, say
            return {
                "execution_id": execution_id,
                "verdict": mig.NEVER,
                "migrated": False,
                "reason": exc.message,
            }


def _version_activity(store: Store, workflow: str) -> dict[str, int]:
    """By version of `workflow`, the newest update of its executions, over
    the listed rows (no store offers a grouped read)."""
    newest: dict[str, int] = {}
    for row in store.list_executions(None, workflow, 10_000):
        newest[row.version] = max(newest.get(row.version, 0), row.updated_at_ms)
    return newest
