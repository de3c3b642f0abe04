"""Deployed workflow definitions, found by name and version or by hash.

A definition is immutable once deployed (DEFINITION_CONFLICT), except on a
development server: `deploy(replace_unless=...)` then puts a new definition
in place of the one of the same version, when no unfinished execution uses
the old one. The old plan stays reachable by hash in memory (finished
executions and parents that pinned it still find it until a restart), and
a rolled-back replacement puts it back under its name and version.
"""

from __future__ import annotations

from collections.abc import Callable

from orbit_core import ir, limits
from orbit_core.api import Deployed, WorkflowList, WorkflowSummary
from orbit_core.engine.commands import Tx
from orbit_core.errors import ConflictError, InvalidError, workflow_not_found
from orbit_core.jsontypes import JsonObject
from orbit_core.plan import Plan
from orbit_core.ports import DefinitionRow
from orbit_core.semver import semver_key


def checked_definition(
    definition: ir.Definition | JsonObject,
) -> tuple[ir.Definition, JsonObject]:
    """The definition and its IR document, once its hash and IR version check out.

    Whatever goes wrong reading or hashing a document is INVALID_IR: it came
    from the caller (`from_json` checks its shape first, see
    `orbit_core.limits`; a `Definition` built in Python gets the same check
    through its document)."""
    try:
        if isinstance(definition, dict):
            document = definition
            defn = ir.from_json(document)
        else:
            defn = definition
            document = ir.to_json(defn)
            limits.check_json(document, int_min=limits.IR_INT_MIN, int_max=limits.IR_INT_MAX)
        digest = ir.hash_document(document)
    except (ValueError, TypeError, RecursionError) as exc:  # IRError is a ValueError
        raise InvalidError(str(exc) or type(exc).__name__, "INVALID_IR") from None
    if not defn.definition_hash:
        raise InvalidError("definition_hash is missing", "INVALID_IR")
    if digest != defn.definition_hash:
        raise InvalidError(
            "definition_hash does not match the IR content (was the file modified?)",
            "INVALID_IR",
        )
    if defn.ir_version == ir.IR_V1 and ir.needs_ir_v2(defn):
        raise InvalidError(
            f"{defn.key} uses features of orbit-ir/2 but declares orbit-ir/1", "INVALID_IR"
        )
    return defn, document


class Catalog:
    def __init__(self) -> None:
        self._plans: dict[tuple[str, str], Plan] = {}
        self._by_hash: dict[str, Plan] = {}
        # The highest version of each name (starts without a version look it up).
        self._latest: dict[str, Plan] = {}
        # Replacements not yet undone, by the new hash: the plan each replaced.
        self._replaced: dict[str, Plan] = {}
        # Set when other servers deploy into the same store: asked to add
        # what the store holds before a name is reported unknown.
        self.load_missing: Callable[[], object] | None = None

    def deploy(
        self,
        tx: Tx,
        defn: ir.Definition,
        document: JsonObject,
        replace_unless: Callable[[str], list[str]] | None = None,
    ) -> Deployed:
        """Registers `defn`. With `replace_unless` (a development server), a
        different definition of the same version is replaced unless the
        function, given the old hash, names unfinished executions using it."""
        key = (defn.name, defn.version)
        existing = self._plans.get(key)
        answer = Deployed(
            name=defn.name,
            version=defn.version,
            definition_hash=defn.definition_hash,
            created=False,
        )
        if existing is not None:
            if existing.defn.definition_hash == defn.definition_hash:
                return answer
            if replace_unless is not None:
                users = replace_unless(existing.defn.definition_hash)
                if users:
                    shown = ", ".join(users[:3]) + (", ..." if len(users) > 3 else "")
                    raise ConflictError(
                        f"{defn.key} cannot be replaced: {len(users)} unfinished "
                        f"execution(s) use it ({shown}); let them finish or cancel them, "
                        "or bump the version",
                        "DEFINITION_CONFLICT",
                    )
            else:
                raise ConflictError(
                    f"{defn.key} is already registered with a different definition "
                    f"({existing.defn.definition_hash}); workflow definitions are immutable, "
                    "bump the version",
                    "DEFINITION_CONFLICT",
                )
        for contract in defn.contracts.values():
            if isinstance(contract, ir.ChildContract):
                child = self._by_hash.get(contract.definition_hash)
                if child is None or child.defn.name != contract.name:
                    raise InvalidError(
                        f"child workflow {contract.name}@{contract.version} "
                        f"({contract.definition_hash}) is not registered; register it first",
                        "CHILD_NOT_REGISTERED",
                    )
        plan = Plan(defn)
        if existing is not None:
            self._replaced[defn.definition_hash] = existing
        self.add(plan)
        tx.new_plans.append(plan)
        tx.definitions.append(
            DefinitionRow(
                defn.name,
                defn.version,
                defn.definition_hash,
                dict(document),
                tx.now,
                replaces=existing is not None,
            )
        )
        answer["created"] = True
        if existing is not None:
            answer["replaced"] = True
        return answer

    def add(self, plan: Plan) -> None:
        defn = plan.defn
        self._plans[(defn.name, defn.version)] = plan
        self._by_hash[defn.definition_hash] = plan
        # Only the new plan can change the highest version, so it is compared
        # with the current one instead of scanning every plan of the name (a
        # restart adds every stored definition: that scan made it quadratic).
        # As `_find_latest`'s `max`, the plan added first wins a tie; a plan
        # that replaces the highest version's takes its place.
        latest = self._latest.get(defn.name)
        if (
            latest is None
            or latest.defn.version == defn.version
            or semver_key(defn.version) > semver_key(latest.defn.version)
        ):
            self._latest[defn.name] = plan

    def remove(self, plan: Plan) -> None:
        """Undoes `plan`'s deployment (its group was rolled back)."""
        self._plans.pop((plan.defn.name, plan.defn.version), None)
        self._by_hash.pop(plan.defn.definition_hash, None)
        previous = self._replaced.pop(plan.defn.definition_hash, None)
        if previous is not None:
            self._plans[(previous.defn.name, previous.defn.version)] = previous
        self._find_latest(plan.defn.name)

    def _find_latest(self, name: str) -> None:
        versions = [p for (n, _v), p in self._plans.items() if n == name]
        if versions:
            self._latest[name] = max(versions, key=lambda p: semver_key(p.defn.version))
        else:
            self._latest.pop(name, None)

    def by_hash(self, definition_hash: str) -> Plan | None:
        return self._by_hash.get(definition_hash)

    def find(self, name: str, version: str | None) -> Plan:
        """`name@version`, or the highest version of `name`."""
        if self.load_missing is not None and (
            (name, version) not in self._plans if version is not None else name not in self._latest
        ):
            self.load_missing()
        if version is not None:
            plan = self._plans.get((name, version))
            if plan is None:
                raise workflow_not_found(name, version)
            return plan
        latest = self._latest.get(name)
        if latest is None:
            raise workflow_not_found(name, None)
        return latest

    def definitions(self, name: str) -> list[ir.Definition]:
        """Every registered version of `name` (unordered)."""
        if self.load_missing is not None:
            self.load_missing()
        return [p.defn for (n, _v), p in self._plans.items() if n == name]

    def contract_versions(self, task: str) -> list[str]:
        """The versions of `task` that deployed workflows call."""
        return sorted(
            {
                c.version
                for p in self._plans.values()
                for key, c in p.defn.contracts.items()
                if key == task
            }
        )

    def all_definitions(self) -> list[ir.Definition]:
        """Every deployed definition (the search fields of filters)."""
        if self.load_missing is not None:
            self.load_missing()
        return [p.defn for p in list(self._plans.values())]

    def list_workflows(self) -> WorkflowList:
        rows: list[WorkflowSummary] = []
        for plan in sorted(
            self._plans.values(), key=lambda p: (p.defn.name, semver_key(p.defn.version))
        ):
            d = plan.defn
            rows.append(
                {
                    "name": d.name,
                    "version": d.version,
                    "description": d.description,
                    "definition_hash": d.definition_hash,
                    "steps": [s.name for s in d.steps],
                    "tasks": plan.tasks(),
                }
            )
        return {"workflows": rows}
