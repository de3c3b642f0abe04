"""`verify` blocks (beyond the book; `orbit verify`): checked with the
program, never lowered, so they change no definition or hash.

A verify block names a workflow (E0901 when it names none, E0900 when it
is unknown) and maybe its version (E0902); its optional `input` is a
constant of the workflow's input type (without one, `orbit verify`
generates the input). Each `invariant` and each of its `when` conditions
is one of chapter 51's expectations, checked as a test's `expect` is, but
reported under the E09xx codes so that an editor or a script can tell a
bad verify block from a bad test: an unknown step is E0903, a word that is
not a status E0904, `compensated` of a step without a `compensate` block
E0905, a constant that cannot be evaluated E0907 and a bad count E0908.
Verify names are unique (E0906). A block without an invariant is fine:
the built-in invariants are always checked.

The expectation checks are `tests._TestChecker`'s own, run against a
scratch reporter whose diagnostics are then given their E09xx codes; type
errors in constants keep their E04xx codes, as everywhere else.
"""

from __future__ import annotations

import attrs

from orbit_lang import ast
from orbit_lang.check.context import CheckedWorkflow, Compilation
from orbit_lang.check.report import Reporter, did_you_mean, duplicate_member, first_declared
from orbit_lang.check.tests import _TestChecker
from orbit_lang.diagnostics import Diagnostic

# What a test's code becomes in a verify block.
RECODED = {
    "E0700": "E0900",
    "E0706": "E0903",
    "E0707": "E0904",
    "E0708": "E0905",
    "E0710": "E0907",
    "E0711": "E0908",
    "E0712": "E0908",
    "E0713": "E0908",
    "W0701": "W0900",
}
_SINGLE: dict[type, str] = {
    ast.TestWorkflow: "workflow",
    ast.Version: "version",
    ast.TestInput: "input",
}


def check_verifies(c: Compilation) -> None:
    seen: dict[str, ast.Verify] = {}
    for block in c.declarations.verifies:
        name = block.name.value
        if name in seen:
            c.report.error(
                "E0906",
                f"verify `{name}` is declared more than once",
                block.name.span,
                labels=[first_declared(seen[name].name.span)],
                help="give each verify block its own name",
            )
        else:
            seen[name] = block
        _VerifyChecker(c, block).run()


def recode(diagnostic: Diagnostic) -> Diagnostic:
    code = RECODED.get(diagnostic.code)
    if code is None:
        return diagnostic
    help_text = diagnostic.help
    if help_text is not None:
        # The test checker's advice names `expect`; here it is an invariant.
        help_text = help_text.replace("expect the step's", "check the step's").replace(
            "`expect step", "`invariant step"
        )
    return attrs.evolve(diagnostic, code=code, help=help_text)


class _VerifyChecker:
    def __init__(self, c: Compilation, block: ast.Verify) -> None:
        self.c = c
        self.block = block
        self.report = c.report

    def run(self) -> None:
        members: dict[type, ast.VerifyMember] = {}
        for member in self.block.members:
            kind = type(member)
            if kind in _SINGLE:
                first = members.get(kind)
                if first is not None:
                    duplicate_member(self.report, _SINGLE[kind], member.keyword, first.keyword)
                    continue
                members[kind] = member
        invariants = [m for m in self.block.members if isinstance(m, ast.Invariant)]
        workflow = self._workflow(members)
        if workflow is None:
            return
        scratch = Reporter()
        checker = _TestChecker(self.c, _as_test(self.block))
        checker.report = scratch
        given = members.get(ast.TestInput)
        if isinstance(given, ast.TestInput):
            checker._constant(given.expression, workflow.definition.input, "a verify input")
        for invariant in invariants:
            for expectation in (invariant.expectation, *invariant.conditions):
                checker._expect(expectation, workflow)
        self.report.diagnostics.extend(recode(d) for d in scratch.diagnostics)

    def _workflow(self, members: dict[type, ast.VerifyMember]) -> CheckedWorkflow | None:
        member = members.get(ast.TestWorkflow)
        if not isinstance(member, ast.TestWorkflow):
            self.report.error(
                "E0901",
                f"verify `{self.block.name.value}` does not name a workflow",
                self.block.name.span,
                help="add `workflow <Name>` to the verify block",
            )
            return None
        name = member.workflow.name
        workflow = self.c.checked.get(name)
        if workflow is None:
            self.report.error(
                "E0900",
                f"unknown workflow `{name}`",
                member.workflow.span,
                help=did_you_mean(name, self.c.checked)
                or 'import the file that defines it, e.g. `import "orders.orbit"`',
            )
            return None
        version = members.get(ast.Version)
        defined = workflow.definition.version
        if isinstance(version, ast.Version) and version.value.value != defined:
            self.report.error(
                "E0902",
                f"verify block expects `{name}` version {version.value.value}, but the sources "
                f"define version {defined}",
                version.value.span,
                help="update the version, or remove it to verify whatever version is compiled",
            )
        return workflow


def _as_test(block: ast.Verify) -> ast.Test:
    """A test standing for the block, for the test checker's messages."""
    return ast.Test(block.name, (), block.doc, block.keyword, block.span)
