"""The distributions' metadata: each ORBIT package can be upgraded on its own
within a minor series, and the pytest fixture is registered for users.

`nox -s wheels` proves the packages install alone; this checks the version
ranges that let them be upgraded one at a time (a `==` pin between siblings
would force every package to move together).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["orbit_core", "orbit_lang", "orbit_store", "orbit_server", "orbit_cli"]


def _project(directory: str) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((ROOT / directory / "pyproject.toml").read_text())[
        "project"
    ]
    return project


def _siblings(directory: str) -> list[Requirement]:
    dependencies = _project(directory).get("dependencies", [])
    assert isinstance(dependencies, list)
    return [r for r in map(Requirement, dependencies) if r.name.startswith("orbit-")]


@pytest.mark.parametrize("directory", PACKAGES)
def test_siblings_may_move_within_the_minor_series(directory: str) -> None:
    ours = Version(str(_project(directory)["version"]))
    for requirement in _siblings(directory):
        sibling = Version(str(_project(requirement.name.replace("-", "_"))["version"]))
        series = f"{sibling.major}.{sibling.minor}"
        allowed = [str(sibling), f"{series}.{sibling.micro + 1}", f"{series}.99"]
        for version in allowed:
            assert requirement.specifier.contains(version), (directory, str(requirement), version)
        for version in [f"{sibling.major}.{sibling.minor + 1}.0", f"{sibling.major + 1}.0.0"]:
            assert not requirement.specifier.contains(version), (directory, str(requirement))
        assert (sibling.major, sibling.minor) == (ours.major, ours.minor)


def test_every_layer_declares_the_layers_it_imports() -> None:
    declared = {d: {r.name for r in _siblings(d)} for d in PACKAGES}
    assert declared == {
        "orbit_core": set(),
        "orbit_lang": {"orbit-core"},
        "orbit_store": {"orbit-core"},
        "orbit_server": {"orbit-core", "orbit-store"},
        "orbit_cli": {"orbit-core", "orbit-lang", "orbit-store", "orbit-server"},
    }


def test_the_engine_fixture_is_a_pytest_plugin() -> None:
    entry_points = _project("orbit_core").get("entry-points", {})
    assert isinstance(entry_points, dict)
    assert entry_points.get("pytest11") == {"orbit": "orbit_core.testing"}


def test_the_orbit_command_is_installed_by_the_cli() -> None:
    assert _project("orbit_cli").get("scripts") == {"orbit": "orbit_cli.main:main"}


def test_the_testing_extra_brings_pytest() -> None:
    # The fixture is a pytest plugin; nothing else installs pytest.
    for directory, wanted in (("orbit_core", "pytest"), ("orbit_cli", "orbit-core")):
        extras = _project(directory).get("optional-dependencies", {})
        assert isinstance(extras, dict)
        (requirement,) = map(Requirement, extras["testing"])
        assert requirement.name == wanted
        if wanted == "orbit-core":
            assert requirement.extras == {"testing"}
