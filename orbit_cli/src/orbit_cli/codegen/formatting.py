"""Runs a language's own formatter over generated files when it is installed.

gofmt and rustfmt come with the toolchains that build Go and Rust, and their
output for a given input is fixed, so formatting keeps the output
deterministic wherever code is built; prettier is used for TypeScript when
it is on PATH (the code is written close to its layout anyway). A formatter that is missing or fails
leaves the text as generated (which is valid code, only laid out less
tidily).
"""

from __future__ import annotations

import shutil
import subprocess

_FORMATTERS = {
    "go": ["gofmt"],
    "rust": ["rustfmt", "--edition", "2021", "--emit", "stdout", "--quiet"],
    "typescript": ["prettier", "--stdin-filepath", "generated.ts"],
}


def format_files(lang: str, files: dict[str, str]) -> dict[str, str]:
    command = _FORMATTERS.get(lang)
    if command is None or shutil.which(command[0]) is None:
        return files
    return {name: _run(command, text) for name, text in files.items()}


def _run(command: list[str], text: str) -> str:
    try:
        done = subprocess.run(
            command, input=text, capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return text
    return done.stdout if done.returncode == 0 and done.stdout else text
