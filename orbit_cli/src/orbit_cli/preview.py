"""The effect preview of `orbit restart` and `orbit fork` (issue 38): the
task attempts the action runs again, as the runtime's dry run lists them.

The text is a short header, the steps whose outcomes are kept, and one row
per task step that will run: its task `name@version`, its effect class,
whether its idempotency key stays the same, whether it ran before, and
`needs --force` where the runtime refuses it without --force."""

from __future__ import annotations

from typing import Any

from orbit_cli.output import out


def header(answer: dict[str, Any]) -> str:
    defn = f"{answer['workflow']}@{answer['version']}"
    if answer["action"] == "fork":
        return (
            f"fork {answer['source']} from `{answer['step']}` into "
            f"{answer['execution_id']} ({defn})"
        )
    return (
        f"restart {answer['execution_id']} from `{answer['step']}`: run {answer['run']} of {defn}"
    )


def lines(answer: dict[str, Any]) -> list[str]:
    kept = ", ".join(answer["kept"]) or "(nothing)"
    text = [header(answer), f"keeps:   {kept}", f"runs:    {', '.join(answer['rerun'])}"]
    effects = answer["effects"]
    if not effects:
        text.append("effects: no task step runs again")
        return text
    text.append("effects (task attempts that run):")
    rows = [("STEP", "TASK", "EFFECT", "KEY", "RAN BEFORE", "")]
    for r in effects:
        rows.append(
            (
                r["step"],
                r["task"],
                r["effect"],
                r["idempotency_key"],
                "yes" if r["ran_before"] else "no",
                "needs --force" if r["needs_force"] else "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(5)] + [row[5]]
        text.append(("  " + "  ".join(cells)).rstrip())
    return text


def show(answer: dict[str, Any]) -> None:
    for line in lines(answer):
        out(line)
