"""Checking again after an edit, one workflow at a time.

Checking the workflows and tests is most of the work of `check_program`
once parsing is incremental (`orbit_lang.incremental`); an edit usually
touches one declaration, and the others would be checked again to the same
result. `IncrementalChecker` is a `check_program` for
`compiler.compile_program` that remembers, for every workflow and test of
the last program it checked, the diagnostics its check reported and the
`CheckedWorkflow` it made, and gives them again when nothing they were
computed from has changed. The other phases (collecting names, schemas,
contracts, the call graph, duplicate test names) run whole each time; they
are cheap. Below, "workflow" stands for a workflow or a test.

What a workflow's check reads. A workflow refers to schemas, tasks and
child workflows by name, and they to others (a task's types name schemas,
`compensated_by` names a task), so the check of a workflow can only depend
on the declarations whose names occur in its text, and on those whose names
occur in theirs, and so on (the prelude is the same in every program). The
memory of a workflow is used again when its own text (with the comments
above it) and the text of every declaration in that closure are unchanged.
Names are found as words of the text (`_WORD`), so a mention anywhere, even
in a comment, counts: finding too many only costs a check. A name that is
not one word (a task name with a space) is counted as mentioned everywhere,
and a text with a backslash (an escape could spell a name) as mentioning
everything. A check that reported something may also depend on the names
not mentioned (the closest-name suggestion of an unknown name): its memory
is used only while the list of all declared names is the same.

Where things are. What is remembered carries spans of the program it came
from. Between two programs, each file's text changed in one region at most
(found as the longest common prefix and suffix): spans before it stay, spans
on the lines after it move by the same number of lines and characters, and
a span in between cannot be moved. The remembered extents of the workflow
and of its closure must move exactly onto where those declarations are now
(so a pasted copy that took over a name is never mistaken for the original),
and every span of the remembered diagnostics must move; otherwise the
workflow is checked again. The checker's results hold no other positions:
the IR it builds gets its source map only in lowering, and types carry none.

The memory holds the last program only, so one `IncrementalChecker` serves
one root document (`orbit lsp` keeps one per document). Not thread-safe.
"""

from __future__ import annotations

import re
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping

import attrs

from orbit_lang import ast
from orbit_lang.check import CheckedProgram, CheckedWorkflow, Compilation, check_program, tests
from orbit_lang.check.workflow import check_workflow
from orbit_lang.diagnostics import Diagnostic, Label
from orbit_lang.loader import Program
from orbit_lang.source import SourceFile, Span

# A declaration's namespace and name.
Key = tuple[str, str]
# A region of a file: path, start offset, end offset.
Place = tuple[str, int, int]

# The words a declaration's name is looked for among: identifiers and the
# dotted or dashed names tasks usually have, whole and in parts.
_WORD = re.compile(r"[\w.\-]+")
# Word sets remembered, by text: the declarations of a few large files.
_WORDS_CACHE_SIZE = 4096


@attrs.frozen
class _Memory:
    """What checking one workflow gave, and what it was computed from."""

    text: str
    # (key, text) of every declaration of the closure, sorted by key.
    closure: tuple[tuple[Key, str], ...]
    # The workflow's extent, then those of the closure, in the same order.
    places: tuple[Place, ...]
    # All declared names, when the check reported anything; else None.
    names: tuple[Key, ...] | None
    diagnostics: tuple[Diagnostic, ...]
    # What checking a workflow made; None for a test.
    checked: CheckedWorkflow | None


class IncrementalChecker:
    """`check_program` with memory of the last program's workflows (see the
    module docstring). `checked` counts the workflows actually checked, and
    `reused` those answered from memory (for tests and benchmarks)."""

    def __init__(self) -> None:
        self._memory: dict[Key, _Memory] = {}
        self._sources: Mapping[str, SourceFile] = {}
        self._words: OrderedDict[str, frozenset[str]] = OrderedDict()
        self.checked = 0
        self.reused = 0

    def __call__(self, program: Program) -> CheckedProgram:
        run = _Run(self, program)
        try:
            result = check_program(program, run.check, run.check_test)
        except BaseException:
            # A check cut short (too deep a tree) leaves nothing to trust.
            self._memory, self._sources = {}, {}
            raise
        self._memory, self._sources = run.memory, program.sources
        return result

    def words(self, text: str) -> frozenset[str]:
        """The words of `text`, each dotted or dashed word also in parts."""
        found = self._words.get(text)
        if found is not None:
            self._words.move_to_end(text)
            return found
        words = set(_WORD.findall(text))
        for word in list(words):
            if "." in word or "-" in word:
                words.update(re.split(r"[.\-]", word))
        found = frozenset(words)
        self._words[text] = found
        while len(self._words) > _WORDS_CACHE_SIZE:
            self._words.popitem(last=False)
        return found


class _Run:
    """One call of `IncrementalChecker`: the new program against the memory."""

    def __init__(self, owner: IncrementalChecker, program: Program) -> None:
        self.owner = owner
        self.program = program
        self.memory: dict[Key, _Memory] = {}
        # How many tests of each name were seen so far.
        self.tests: dict[str, int] = {}
        # Every declaration's extent: from the end of the one before it in its
        # file (so comments above it belong to it) to its own end.
        self.extents: dict[int, tuple[Place, str]] = {}
        self.names: list[Key] = []
        for module in program.modules:
            source = program.sources.get(module.path)
            text = source.text if source is not None else ""
            previous = 0
            for declaration in module.declarations:
                end = declaration.span.end
                place = (module.path, previous, end)
                self.extents[id(declaration)] = (place, text[previous:end])
                previous = end
                key = _key(declaration)
                if key is not None:
                    self.names.append(key)
        self._index: _Index | None = None
        self._moves: dict[str, _Move | None] = {}

    def check(self, c: Compilation, workflow: ast.Workflow) -> CheckedWorkflow:
        """`check_workflow`, or what it gave before (see the module docstring)."""
        own: Key = ("workflow", workflow.name.name)
        checked = self._remembered(c, own, workflow, lambda: check_workflow(c, workflow))
        assert checked is not None
        return checked

    def check_test(self, c: Compilation, test: ast.Test) -> None:
        """`tests.check_test`, or its diagnostics from before."""
        name = test.name.value
        # Tests may share a name (the checker reports it): the nth of a name.
        self.tests[name] = self.tests.get(name, 0) + 1
        own: Key = ("test", f"{name}\n{self.tests[name]}")

        def check() -> None:
            tests.check_test(c, test)

        self._remembered(c, own, test, check)

    def _remembered(
        self,
        c: Compilation,
        own: Key,
        node: ast.Workflow | ast.Test,
        compute: Callable[[], CheckedWorkflow | None],
    ) -> CheckedWorkflow | None:
        index = self._index
        if index is None:
            index = self._index = _Index(c, self.extents, self.owner.words)
        place, text = self.extents[id(node)]
        closure = index.closure(own, text)
        places = (place, *(index.place(key) for key, _ in closure))
        names = tuple(self.names)
        old = self.owner._memory.get(own)
        if old is not None and self._fits(old, text, closure, names):
            diagnostics = self._moved(old, places)
            if diagnostics is not None:
                c.report.diagnostics.extend(diagnostics)
                checked = old.checked
                if checked is not None and isinstance(node, ast.Workflow):
                    checked = attrs.evolve(checked, node=node)
                self.memory[own] = attrs.evolve(
                    old, places=places, diagnostics=diagnostics, checked=checked
                )
                self.owner.reused += 1
                return checked
        self.owner.checked += 1
        before = len(c.report.diagnostics)
        checked = compute()
        diagnostics = tuple(c.report.diagnostics[before:])
        self.memory[own] = _Memory(
            text, closure, places, names if diagnostics else None, diagnostics, checked
        )
        return checked

    @staticmethod
    def _fits(
        old: _Memory, text: str, closure: tuple[tuple[Key, str], ...], names: tuple[Key, ...]
    ) -> bool:
        """Whether the workflow and everything it reads are as remembered."""
        same_names = old.names is None or old.names == names
        return same_names and old.text == text and old.closure == closure

    def _moved(self, old: _Memory, places: tuple[Place, ...]) -> tuple[Diagnostic, ...] | None:
        """The remembered diagnostics moved into this program, or None when
        the memory does not fit it."""
        if len(old.places) != len(places):
            return None
        for before, now in zip(old.places, places, strict=True):
            if self._place(before) != now:
                return None
        moved = []
        for diagnostic in old.diagnostics:
            span = diagnostic.span
            if span is not None:
                span = self._span(span)
                if span is None:
                    return None
            labels = []
            for label in diagnostic.labels:
                where = self._span(label.span)
                if where is None:
                    return None
                labels.append(Label(where, label.message))
            moved.append(attrs.evolve(diagnostic, span=span, labels=tuple(labels)))
        return tuple(moved)

    def _move(self, path: str) -> _Move | None:
        if path not in self._moves:
            before = self.owner._sources.get(path)
            now = self.program.sources.get(path)
            found = None
            if before is not None and now is not None:
                found = _Move(before.text, now.text)
            self._moves[path] = found
        return self._moves[path]

    def _place(self, place: Place) -> Place | None:
        move = self._move(place[0])
        if move is None:
            return None
        moved = move.offsets(place[1], place[2])
        return None if moved is None else (place[0], moved[0], moved[1])

    def _span(self, span: Span) -> Span | None:
        move = self._move(span.file)
        return None if move is None else move.span(span)


class _Index:
    """The declarations in force in one program, and what each mentions."""

    def __init__(
        self,
        c: Compilation,
        extents: dict[int, tuple[Place, str]],
        words: Callable[[str], frozenset[str]],
    ) -> None:
        # Not the `_Run` itself: no reference cycle, so it is freed at once.
        self.extents = extents
        self.words = words
        found = c.declarations
        self.declarations: dict[Key, ast.Schema | ast.Task | ast.Workflow] = {}
        for schema_name, schema in found.schemas.items():
            self.declarations["schema", schema_name] = schema
        for task_name, task in found.tasks.items():
            self.declarations["task", task_name] = task
        for workflow_name, workflow in found.workflows.items():
            self.declarations["workflow", workflow_name] = workflow
        self.by_word: dict[str, list[Key]] = {}
        # Names that are not one word: taken as mentioned by every text.
        self.everywhere: list[Key] = []
        for key in self.declarations:
            if _WORD.fullmatch(key[1]):
                self.by_word.setdefault(key[1], []).append(key)
            else:
                self.everywhere.append(key)

    def mentions(self, text: str) -> Iterator[Key]:
        if "\\" in text:
            yield from self.declarations
            return
        yield from self.everywhere
        words = self.words(text)
        if len(words) < len(self.by_word):
            for word in words:
                yield from self.by_word.get(word, ())
        else:
            for word, keys in self.by_word.items():
                if word in words:
                    yield from keys

    def closure(self, own: Key, text: str) -> tuple[tuple[Key, str], ...]:
        """(key, extent text) of every declaration the one `own` with the
        extent `text` depends on."""
        seen: dict[Key, str] = {}
        queue = deque(self.mentions(text))
        while queue:
            key = queue.popleft()
            if key in seen or key == own:
                continue
            declaration = self.declarations[key]
            _, extent = self.extents[id(declaration)]
            seen[key] = extent
            queue.extend(self.mentions(extent))
        return tuple(sorted(seen.items()))

    def place(self, key: Key) -> Place:
        place, _ = self.extents[id(self.declarations[key])]
        return place


class _Move:
    """Where positions of one file's old text are in its new text (see the
    module docstring): the texts differ in one region at most."""

    def __init__(self, old: str, new: str) -> None:
        self.same = old == new
        prefix = _common_prefix(old, new)
        suffix = _common_suffix(old, new, min(len(old), len(new)) - prefix)
        old_end, new_end = len(old) - suffix, len(new) - suffix
        # Unchanged: everything before the first difference.
        self.prefix = prefix
        # Moved: from the line after the one the difference ends on (its
        # line break lies in the common suffix, so columns stay).
        self.tail = old.find("\n", old_end) + 1 or len(old) + 1
        self.chars = len(new) - len(old)
        self.lines = new.count("\n", 0, new_end) - old.count("\n", 0, old_end)

    def offsets(self, start: int, end: int) -> tuple[int, int] | None:
        if self.same or end <= self.prefix:
            return start, end
        if start >= self.tail:
            return start + self.chars, end + self.chars
        return None

    def span(self, span: Span) -> Span | None:
        if self.same or span.end <= self.prefix:
            return span
        if span.start >= self.tail:
            return Span(
                span.file,
                span.line + self.lines,
                span.column,
                span.end_line + self.lines,
                span.end_column,
                span.start + self.chars,
                span.end + self.chars,
            )
        return None


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix (by halving: slices compare in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: str, b: str, limit: int) -> int:
    """The length of the longest common suffix, at most `limit`."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle : len(a) - low] == b[len(b) - middle : len(b) - low]:
            low = middle
        else:
            high = middle - 1
    return low


def _key(declaration: ast.Declaration) -> Key | None:
    if isinstance(declaration, ast.Schema):
        return ("schema", declaration.name.name)
    if isinstance(declaration, ast.Task):
        return ("task", declaration.name.value)
    if isinstance(declaration, ast.Workflow):
        return ("workflow", declaration.name.name)
    return None
