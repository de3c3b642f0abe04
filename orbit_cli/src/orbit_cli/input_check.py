"""Every problem of a workflow input, found before anything is deployed.

The runtime checks an execution's input when it starts it and names the
first problem only (`orbit_core.values.conform`). `orbit run FILE` has the
compiled input type at hand, so it checks the input first and names them
all: someone who typed three fields wrong fixes them in one go, and a
rejected input leaves no new definition behind on the runtime.

Each problem is worded and located as the runtime words it (`$.amount:
expected Float, found a string`), and they come in the order the runtime
meets them (the given fields in their order, then the missing ones, then
the undeclared ones), so the first line of the report is the runtime's own
`INVALID_INPUT` error, as chapter 11's transcript prints it.
"""

from __future__ import annotations

from orbit_cli.output import CliError
from orbit_core.ir.types import ListType, MapType, OptionalType, RecordType, Type, render_type
from orbit_core.limits import render_path
from orbit_core.values import ValidationError, conform

# What the runtime answers for the first problem; the rest follow it.
FIRST = "INVALID_INPUT (400): workflow input is invalid at "
MORE = "  and at "


def input_problems(value: object, type_: Type) -> list[ValidationError]:
    """Every place where `value` (an execution input, null meaning `{}`) breaks `type_`."""
    found: list[ValidationError] = []
    _walk({} if value is None else value, type_, [], found)
    return found


def check_input(value: object, type_: Type) -> None:
    """Raises `InvalidInput` naming every problem, or returns when the input is valid."""
    problems = input_problems(value, type_)
    if problems:
        raise InvalidInput(problems)


class InvalidInput(CliError):
    """`error: INVALID_INPUT (400): workflow input is invalid at <first>`, one more line each."""

    def __init__(self, problems: list[ValidationError]) -> None:
        first, *rest = problems
        super().__init__("\n".join([f"{FIRST}{first}", *(f"{MORE}{p}" for p in rest)]))
        self.problems = problems


def _walk(value: object, type_: Type, at: list[str | int], found: list[ValidationError]) -> None:
    if isinstance(type_, OptionalType):
        if value is None:
            return
        if _shaped(value, type_.type):
            _walk(value, type_.type, at, found)
        else:
            _leaf(value, type_, at, found)  # worded with the `?`, as the runtime does
        return
    if isinstance(type_, RecordType) and isinstance(value, dict):
        _record(value, type_, at, found)
    elif isinstance(type_, ListType) and isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, type_.items, [*at, index], found)
    elif isinstance(type_, MapType) and isinstance(value, dict):
        for key, item in value.items():
            _walk(item, type_.values, [*at, key], found)
    else:
        _leaf(value, type_, at, found)


def _shaped(value: object, type_: Type) -> bool:
    """Whether `value` has the container shape of `type_`, so its parts are checked one by one."""
    if isinstance(type_, (RecordType, MapType)):
        return isinstance(value, dict)
    if isinstance(type_, ListType):
        return isinstance(value, list)
    return False


def _leaf(value: object, type_: Type, at: list[str | int], found: list[ValidationError]) -> None:
    # The runtime's own check words the problem (`expected Int, found a string`).
    try:
        conform(value, type_, strict=True)
    except ValidationError as error:
        # The check's path is relative to the leaf: `$`, or deeper in a JSON value.
        found.append(ValidationError(render_path(at) + error.path[1:], error.problem))


def _record(
    value: dict[object, object],
    type_: RecordType,
    at: list[str | int],
    found: list[ValidationError],
) -> None:
    declared = {f.name: f for f in type_.fields}
    unknown: list[str] = []
    for key, item in value.items():
        field = declared.get(str(key))
        if field is None:
            unknown.append(str(key))
        else:
            _walk(item, field.type, [*at, str(key)], found)
    for field in type_.fields:
        if field.name in value or field.has_default:
            continue
        if isinstance(field.type, OptionalType) or render_type(field.type) == "JSON":
            continue  # may be absent: read as null
        problem = f"missing required field `{field.name}` of type {render_type(field.type)}"
        found.append(ValidationError(render_path([*at, field.name]), problem))
    for key in unknown:
        found.append(ValidationError(render_path([*at, key]), f"unknown field `{key}`"))
