"""Loading policy files never crashes: any mix of known and unknown keys with
values of any TOML type gives a Policy or a PolicyError naming the file."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbit_lang.policy import _KEYS, CODES, Policy, PolicyError, load_policy

KEYS = sorted({k for keys in _KEYS.values() for k in keys} | {"id", "severity", "workflows", "x"})
SCALARS = st.one_of(
    st.booleans(),
    st.integers(-5, 600),
    st.sampled_from(["*", "payments.*", "1m", "7d", "error", "warning", "failure", "max_fan_out"]),
    st.sampled_from(["input.amount >= 10", "soon", "", "a b"]),
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3))


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


RULES = st.lists(
    st.tuples(
        st.sampled_from([*CODES, "nope"]),
        st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4),
    ),
    max_size=3,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rules=RULES, exempt=st.booleans())
def test_any_policy_file_loads_or_is_a_policy_error(
    tmp_path: Path, rules: list[tuple[str, dict[str, object]]], exempt: bool
) -> None:
    lines = ['[policy]\nname = "p"']
    for kind, keys in rules:
        lines.append(f'[[rule]]\ntype = "{kind}"')
        lines += [f"{key} = {toml_value(value)}" for key, value in keys.items()]
    if exempt:
        lines.append('[[exemption]]\nrule = "forbid_tasks"\nworkflow = "*"\nreason = "r"')
    path = tmp_path / "p.toml"
    path.write_text("\n".join(lines) + "\n")
    try:
        policy = load_policy(path)
    except PolicyError as exc:
        assert str(exc).startswith(f"policy {path}: ")
    else:
        assert isinstance(policy, Policy)
