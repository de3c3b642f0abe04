#!/usr/bin/env python3
"""Extracts the ORBIT examples of the book into tests/book/.

The book (../shared/spec/*.md, outside this repository) prints code without
fences, so examples are found by their shape: a run of lines that starts like
an ORBIT declaration (`workflow Name {`, `schema`, `task "..." {`, `test`,
`import "..."`, or comments leading to one) or like a workflow or step member
(`step name {`, `on failure {`, `retry {`, ...), extended while braces are
open or the next non-blank line starts another declaration. When the lines
right after an example are compiler output (`error[...]`, `warning[...]`,
`ok ...`), that output is kept as the example's expected result.

Each example becomes `tests/book/examples/<chapter>/<line>.orbit` (the line
number is where it starts in the chapter) and, when the book prints output
after it, `<line>.expected` holding that output verbatim. Every example is
listed in `tests/book/manifest.json` with its kind:

- `program`: whole declarations, checked as they are;
- `fragment`: workflow or step members shown on their own; the test wraps
  them (`wrap`: "workflow" or "step") in a minimal workflow to parse them;
- `template`: syntax summaries with placeholders such as `<name>` or `...`,
  which are not ORBIT and are skipped (`reason` says why).

Every rendered diagnostic in the book, with or without a source before it,
is also copied to `tests/book/diagnostics/<chapter>-<line>.txt` for the
renderer's tests.

Usage: scripts/extract_book_examples.py [--spec DIR] [--out DIR]
The output is committed, so tests never need the book itself.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPEC = ROOT.parent / "shared" / "spec"

DECLARATION = re.compile(
    r"""^(?:
        workflow\s+[A-Za-z_]\w*\s*\{
      | schema\s+[A-Za-z_]\w*\s*\{
      | task\s+"[^"\n]*"\s*\{
      | test\s+"[^"\n]*"\s*\{
      | import\s+"[^"\n]*"\s*(?://.*)?$
    )""",
    re.VERBOSE,
)
STEP_FRAGMENT = re.compile(r"^(?:retry|compensate)\s*\{")
WORKFLOW_FRAGMENT = re.compile(
    r"""^(?:
        step\s+[A-Za-z_]\w*\s*\{
      | on\s+(?:failure|cancel|timeout|event\s+\w+|[a-z]+)\s*\{
      | signal\s+[A-Za-z_]\w*\s*\{
      | query\s+[A-Za-z_]\w*\s*=
      | limits\s*\{
      | continue_as_new\s+(?:when|with)\b
    )""",
    re.VERBOSE,
)
STEP_DECLARATION = re.compile(r"^step\s+[A-Za-z_]\w*\s*\{")
COMMENT = re.compile(r"^(?://|/\*)")
DIAGNOSTIC_HEADER = re.compile(r"^(?:error|warning)\[[EWP]\d{4}\]: ")
DIAGNOSTIC_BODY = re.compile(r"^(?:\s*-->\s|\s*\d*\s*\|(?: |$)|\s+= (?:note|help): |$)")
GUTTER_LINE = re.compile(r"^(\d+)\s+\| ?(.*)$")
SUMMARY = re.compile(r"^error: (?:compilation failed|\d+ warning\(s\) treated as errors)")
# Placeholders of syntax summaries: `<name>`, `<expression>`, `...`, `[ ... ]`.
PLACEHOLDER = re.compile(r"<[a-z][a-z _-]*>|<[A-Z]+>|\.\.\.|…|\[\s*(?:when|timeout|after)\b")


def _strip_strings(line: str) -> str:
    return re.sub(r'"(?:[^"\\\n]|\\.)*"?', '""', line)


class _Depth:
    """Tracks open braces and block comments across lines."""

    def __init__(self) -> None:
        self.braces = 0
        self.comment = 0

    def feed(self, line: str) -> None:
        text = _strip_strings(line) if not self.comment else line
        i = 0
        while i < len(text):
            pair = text[i : i + 2]
            if self.comment:
                if pair == "/*":
                    self.comment += 1
                    i += 2
                    continue
                if pair == "*/":
                    self.comment -= 1
                    i += 2
                    continue
                i += 1
                continue
            if pair == "//":
                return
            if pair == "/*":
                self.comment += 1
                i += 2
                continue
            if text[i] == "{":
                self.braces += 1
            elif text[i] == "}":
                self.braces -= 1
            i += 1

    @property
    def open(self) -> bool:
        return self.braces > 0 or self.comment > 0


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _start_kind(line: str) -> str | None:
    if DECLARATION.match(line):
        return "program"
    if WORKFLOW_FRAGMENT.match(line):
        return "workflow"
    if STEP_FRAGMENT.match(line):
        return "step"
    return None


def _continues_program(line: str, with_steps: bool) -> bool:
    if DECLARATION.match(line) or COMMENT.match(line):
        return True
    # A top-level step after a workflow is how the book shows E0104.
    return with_steps and bool(STEP_DECLARATION.match(line))


def _dedent(lines: list[str], indent: int) -> list[str]:
    return [line[indent:] if line[:indent].strip() == "" else line for line in lines]


def _find_example(lines: list[str], i: int, with_steps: bool) -> tuple[int, int, str, int] | None:
    """(start, end, kind, indent) of an example starting at line i, if any."""
    line = lines[i]
    indent = _indent_of(line)
    body = line[indent:]
    j = i
    # Leading comments count only when ORBIT code follows them.
    while j < len(lines) and COMMENT.match(lines[j][indent:] if lines[j].strip() else ""):
        depth = _Depth()
        depth.feed(lines[j][indent:])
        j += 1
        while depth.comment and j < len(lines):
            depth.feed(lines[j][indent:])
            j += 1
    if j >= len(lines):
        return None
    kind = _start_kind(lines[j][indent:]) if _indent_of(lines[j]) == indent else None
    if kind is None or (j > i and not COMMENT.match(body)):
        return None
    depth = _Depth()
    k = i
    while k < len(lines):
        depth.feed(lines[k][indent:])
        k += 1
        if depth.open:
            continue
        # A following declaration (after blank lines) belongs to the same example.
        n = k
        while n < len(lines) and not lines[n].strip():
            n += 1
        if (
            kind == "program"
            and n < len(lines)
            and _indent_of(lines[n]) == indent
            and _continues_program(lines[n][indent:], with_steps)
        ):
            k = n
            continue
        if kind != "program" and n < len(lines) and k < len(lines) and lines[k].strip():
            # Several members in a row (a fragment of more than one member).
            next_line = lines[k]
            if _indent_of(next_line) == indent and _start_kind(next_line[indent:]) is not None:
                continue
        break
    return i, k, kind, indent


def _output_after(lines: list[str], k: int, indent: int) -> tuple[list[str], int]:
    """Compiler output printed right after an example, and where it ends."""
    out: list[str] = []
    n = k
    while n < len(lines) and not lines[n].strip():
        n += 1
    if n < len(lines) and lines[n][indent:].startswith("$ orbit "):
        n += 1
    if n >= len(lines) or not (
        DIAGNOSTIC_HEADER.match(lines[n][indent:]) or lines[n][indent:].startswith("ok ")
    ):
        return [], k
    while n < len(lines):
        text = lines[n][indent:] if lines[n][:indent].strip() == "" else lines[n]
        if (
            DIAGNOSTIC_HEADER.match(text)
            or DIAGNOSTIC_BODY.match(text)
            or text.startswith("ok ")
            or SUMMARY.match(text)
        ):
            out.append(text)
        else:
            break
        n += 1
    while out and not out[-1].strip():
        out.pop()
    return out, n


def _shows(output: list[str], code: list[str]) -> bool:
    """Whether every source line quoted in `output` is that line of `code`."""
    for line in output:
        quoted = GUTTER_LINE.match(line)
        if quoted:
            number = int(quoted.group(1))
            if number > len(code) or code[number - 1].rstrip() != quoted.group(2).rstrip():
                return False
    return True


def _example(
    lines: list[str], start: int, end: int, indent: int
) -> tuple[list[str], list[str], int]:
    """The example's lines, the output that follows it, and where both end."""
    code = _dedent(lines[start:end], indent)
    while code and not code[-1].strip():
        code.pop()
    output, after = _output_after(lines, end, indent)
    if not _shows(output, code):
        output, after = [], end
    return code, output, after


def _diagnostic_blocks(lines: list[str]) -> list[tuple[int, list[str]]]:
    blocks = []
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = _indent_of(line)
        if DIAGNOSTIC_HEADER.match(line[indent:]):
            block = [line[indent:]]
            j = i + 1
            while j < len(lines) and lines[j].strip():
                block.append(lines[j][indent:])
                j += 1
            blocks.append((i + 1, block))
            i = j
        else:
            i += 1
    return blocks


def extract(spec: Path, out: Path) -> dict[str, int]:
    for sub in ("examples", "diagnostics"):
        shutil.rmtree(out / sub, ignore_errors=True)
    manifest = []
    totals: dict[str, int] = {}
    for chapter in sorted(spec.glob("*.md")):
        lines = chapter.read_text(encoding="utf-8").splitlines()
        stem = chapter.stem
        i = 0
        while i < len(lines):
            found = _find_example(lines, i, with_steps=True) if lines[i].strip() else None
            if found is None:
                i += 1
                continue
            start, end, kind, indent = found
            code, output, after = _example(lines, start, end, indent)
            if not output:
                # Without output that quotes it, a top-level step is a
                # separate snippet rather than part of the program.
                found = _find_example(lines, i, with_steps=False)
                assert found is not None
                start, end, kind, indent = found
                code, output, after = _example(lines, start, end, indent)
            entry: dict[str, object] = {
                "id": f"{stem}:{start + 1}",
                "chapter": stem,
                "line": start + 1,
                "source": f"examples/{stem}/{start + 1:04d}.orbit",
            }
            text = "\n".join(code) + "\n"
            if kind != "program":
                entry["wrap"] = kind
            placeholder = PLACEHOLDER.search(
                "\n".join(_strip_strings(c).split("//")[0] for c in code)
            )
            if placeholder:
                entry["kind"] = "template"
                entry["reason"] = f"syntax summary with the placeholder `{placeholder.group()}`"
            elif kind == "program":
                entry["kind"] = "program"
            else:
                entry["kind"] = "fragment"
                entry["reason"] = (
                    f"{kind} members shown on their own; parsed inside a minimal {kind}"
                )
            if output:
                entry["expected"] = f"examples/{stem}/{start + 1:04d}.expected"
                location = next(
                    (re.search(r"-->\s+(\S+?):\d+:\d+", o) for o in output if "-->" in o), None
                )
                if location:
                    entry["file"] = location.group(1)
            target = out / str(entry["source"])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            if output:
                (out / str(entry["expected"])).write_text("\n".join(output) + "\n", "utf-8")
            manifest.append(entry)
            totals[str(entry["kind"])] = totals.get(str(entry["kind"]), 0) + 1
            i = max(after, end)
        for line_number, block in _diagnostic_blocks(lines):
            target = out / "diagnostics" / f"{stem}-{line_number:04d}.txt"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("\n".join(block) + "\n", encoding="utf-8")
            totals["diagnostics"] = totals.get("diagnostics", 0) + 1
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "book")
    args = parser.parse_args()
    totals = extract(args.spec, args.out)
    print(", ".join(f"{count} {kind}" for kind, count in sorted(totals.items())))


if __name__ == "__main__":
    main()
