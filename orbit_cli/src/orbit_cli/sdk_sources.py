"""Where a project made by `orbit init` gets its worker SDKs from.

The SDKs are to be published as `orbit-lang-sdk` (PyPI) and `orbit-lang`
(npm), and a project names them so: `orbit-lang-sdk>=0.1,<0.2` and
`"orbit-lang": "^0.1.0"`. Until an index serves them, those lines cannot be
installed, so an ORBIT install keeps a copy of each SDK beside itself (a
wheel and an `npm pack` tarball) and `orbit init` points the new project at
that copy instead: a direct reference (`orbit-lang-sdk @ file:///...whl`, and
`"orbit-lang": "file:/...tgz"`). A direct reference names the package too, so
pip and npm install it under its published name, and nothing asks an index
for a name someone else could take there.

The copy is looked for in `ORBIT_SDK_DIR` if set (a `nox -s build` dist/
folder, say) and otherwise in `sdks/` of the environment `orbit` runs from,
where scripts/install puts it. When neither has one, the published names are
written.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from attrs import frozen

ENV = "ORBIT_SDK_DIR"
PYTHON_REQUIREMENT = "orbit-lang-sdk>=0.1,<0.2"
TYPESCRIPT_RANGE = "^0.1.0"

_WHEEL = re.compile(r"orbit_lang_sdk-(\d+(?:\.\d+)*)-.*\.whl")
_TARBALL = re.compile(r"orbit-lang-(\d+(?:\.\d+)*)\.tgz")


@frozen
class SdkSources:
    """The local copies found, each None when there is none."""

    python_wheel: Path | None
    typescript_tarball: Path | None

    def requirements_txt(self) -> str:
        if self.python_wheel is None:
            return PYTHON_REQUIREMENT + "\n"
        return (
            "# orbit-lang-sdk is not on PyPI yet: this is the copy your ORBIT install\n"
            f"# keeps. Once it is published, this can become: {PYTHON_REQUIREMENT}\n"
            f"orbit-lang-sdk @ {self.python_wheel.as_uri()}\n"
        )

    def typescript_dependency(self) -> str:
        if self.typescript_tarball is None:
            return TYPESCRIPT_RANGE
        return f"file:{self.typescript_tarball}"


def sdk_folder(environ: Mapping[str, str] | None = None) -> Path:
    """The folder to look in: `ORBIT_SDK_DIR`, else `sdks/` of this environment."""
    env = os.environ if environ is None else environ
    named = env.get(ENV, "").strip()
    return Path(named).expanduser().resolve() if named else Path(sys.prefix) / "sdks"


def find(folder: Path) -> SdkSources:
    """The newest wheel and tarball of the SDKs in `folder`."""
    try:
        names = [entry.name for entry in folder.iterdir() if entry.is_file()]
    except OSError:
        names = []
    wheel = _newest(names, _WHEEL)
    tarball = _newest(names, _TARBALL)
    return SdkSources(
        python_wheel=None if wheel is None else folder / wheel,
        typescript_tarball=None if tarball is None else folder / tarball,
    )


def _newest(names: list[str], pattern: re.Pattern[str]) -> str | None:
    versions = {}
    for name in names:
        match = pattern.fullmatch(name)
        if match:
            versions[name] = tuple(int(part) for part in match.group(1).split("."))
    return max(versions, key=lambda name: versions[name]) if versions else None
