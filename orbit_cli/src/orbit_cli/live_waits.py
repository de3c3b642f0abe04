"""`orbit compat --server`: warnings for steps that live executions of the
old version wait in and that the new version changes (issue 41).

A step counts as changed when the new definition lacks it, its IR differs
(kind, dependencies, timeout, expressions, ...), or the task contract it
calls differs. Those executions keep their pinned definition, so nothing
breaks; the warning says that moving them is a migration to plan, with
`orbit migrate plan`. Only the census is read, one request per workflow
both sides define, and only when --server is given: without it `orbit
compat` prints exactly what it always printed.
"""

from __future__ import annotations

from orbit_cli.client import RuntimeClient
from orbit_cli.drain import census
from orbit_core.ir import Definition, Step
from orbit_lang.compat import Finding, Side


def _changed(old: Definition, new: Definition, name: str) -> bool:
    before, after = old.step(name), new.step(name)
    if before is None or after is None:
        return after is None
    if before != after:
        return True
    return _contract_of(old, before) != _contract_of(new, after)


def _contract_of(defn: Definition, step: Step) -> object:
    return defn.contracts.get(step.task) if step.task is not None else None


def findings(client: RuntimeClient, old: Side, new: Side) -> list[Finding]:
    """One warning per (workflow, step) that live executions of an old
    version wait in and that the new version changes."""
    found: list[Finding] = []
    newer = {d.name: d for d in new.definitions}
    for before in old.definitions:
        after = newer.get(before.name)
        if after is None or after.definition_hash == before.definition_hash:
            continue
        rows = [r for r in census(client, before.name) if r.get("version") == before.version]
        for row in rows:
            for wait in row.get("waiting", []):
                step = str(wait["step"])
                if not _changed(before, after, step):
                    continue
                what = "removes" if after.step(step) is None else "changes"
                found.append(
                    Finding(
                        "warning",
                        "workflow",
                        before.name,
                        before.version,
                        after.version,
                        f"{wait['count']} live execution(s) of {before.version} wait in step "
                        f"`{step}` ({wait['kind']}), which {after.version} {what}",
                        hint=(
                            f"they stay on {before.version}; see `orbit migrate plan "
                            f"{before.name} --from {before.version} --to {after.version}`"
                        ),
                    )
                )
    return found
