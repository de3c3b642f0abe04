"""Turns parsimonious parse nodes into the AST.

The builder walks the tree top-down and only visits what it needs, which is
much cheaper than visiting every token node. Each `_build_<rule>` method
knows the shape of its rule in `grammar.RULES`; those shapes and these
methods change together.

Besides building nodes, the builder reports the few problems that the
grammar accepts on purpose to give a better message: a bare number where a
duration is required (E0101) and a key repeated in an object literal (E0107).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from orbit_lang import ast
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.source import SourceFile, Span
from orbit_lang.syntax.lexer import DURATION, FLOAT, INT, STRING, Token
from orbit_lang.syntax.nesting import MAX_NESTING, TooDeep

# parsimonious is untyped; its nodes have `expr_name`, `start`, `end` (token
# indexes here) and `children`.
Node = Any
_E = TypeVar("_E", bound=ast.Expr)

_PRECEDENCE = {
    "||": 1,
    "&&": 2,
    "==": 3,
    "!=": 3,
    "<": 4,
    "<=": 4,
    ">": 4,
    ">=": 4,
    "+": 5,
    "-": 5,
    "*": 6,
    "/": 6,
    "%": 6,
}


class Builder:
    def __init__(
        self,
        source: SourceFile,
        tokens: Sequence[Token],
        doc_lines: dict[int, str],
        diagnostics: list[Diagnostic],
    ) -> None:
        self.source = source
        self.path = source.path
        self.tokens = tokens
        self.doc_lines = doc_lines
        self.diagnostics = diagnostics
        # The height of every expression node built that has children (a
        # leaf is 1 high), keyed by id; holding the node keeps its id unique.
        self._heights: dict[int, tuple[ast.Expr, int]] = {}
        self._declarations: dict[str, Callable[[Node], ast.Declaration]] = {
            "workflow_decl": self.workflow,
            "schema_decl": self.schema,
            "task_decl": self.task,
            "import_decl": self.import_,
            "test_decl": self.test,
            "verify_decl": self.verify,
        }
        self._members: dict[str, Callable[[Node], Any]] = {
            "version": self.version,
            "description": self.description,
            "task_input": self.task_input,
            "task_output": self.task_output,
            "compensated_by": self.compensated_by,
            "effect_clause": self.effect_clause,
            "workflow_timeout": self.timeout,
            "workflow_input": self.workflow_input,
            "workflow_output": self.workflow_output,
            "step_decl": self.step,
            "signal_decl": self.signal,
            "query_decl": self.query,
            "return_member": self.return_,
            "continue_as_new": self.continue_as_new,
            "limits": self.limits,
            "migrate_decl": self.migrate,
            "search_fields": self.search_fields,
            "workflow_retention": self.retention,
            "on_outcome": self.on_outcome,
            "on_event": self.on_event,
            "compensate": self.compensate,
            "worker_action": self.worker_action,
            "workflow_action": self.workflow_action,
            "sleep_action": self.sleep_action,
            "await_action": self.await_action,
            "compute_action": self.compute_action,
            "using": self.using,
            "after": self.after,
            "with_member": self.with_,
            "step_timeout": self.timeout,
            "queue_timeout": self.queue_timeout,
            "retry": self.retry,
            "idempotency_key": self.idempotency_key,
            "when_member": self.when,
            "for_each": self.for_each,
            "max_parallel": self.max_parallel,
            "flow_block": self.flow_block,
            "flow_priority": self.flow_priority,
            "test_workflow": self.test_workflow,
            "test_input": self.test_input,
            "mock": self.mock,
            "test_signal": self.test_signal,
            "expect": self.expect,
            "invariant": self.invariant,
        }

    # Positions -------------------------------------------------------------

    def token_span(self, index: int) -> Span:
        token = self.tokens[index]
        return Span(
            self.path,
            token.line,
            token.column,
            token.line,
            token.end_column,
            token.start,
            token.end,
        )

    def range_span(self, start: int, end: int) -> Span:
        """The span of tokens `start` to `end` (exclusive, at least one token)."""
        first = self.tokens[start]
        last = self.tokens[max(start, end - 1)]
        return Span(
            self.path,
            first.line,
            first.column,
            last.line,
            last.end_column,
            first.start,
            last.end,
        )

    def span(self, node: Node) -> Span:
        return self.range_span(node.start, node.end)

    def doc(self, index: int) -> str | None:
        """The `///` lines directly above token `index`, if it starts its line."""
        token = self.tokens[index]
        if not token.nl_before or not self.doc_lines:
            return None
        lines: list[str] = []
        line = token.line - 1
        while line in self.doc_lines:
            lines.append(self.doc_lines[line])
            line -= 1
        return "\n".join(reversed(lines)) if lines else None

    def identifier(self, node: Node) -> ast.Identifier:
        return ast.Identifier(self.tokens[node.start].text, self.token_span(node.start))

    def string(self, node: Node) -> ast.StringLiteral:
        token = self.tokens[node.start]
        return ast.StringLiteral(str(token.value), self.token_span(node.start))

    # Program and declarations ---------------------------------------------

    def program(self, node: Node) -> list[ast.Declaration]:
        declarations = []
        for item in node.children[0].children:
            chosen = item.children[0]
            if chosen.expr_name == "declaration":
                declarations.append(self.declaration(chosen))
        return declarations

    def declaration(self, node: Node) -> ast.Declaration:
        chosen = node.children[0]
        return self._declarations[chosen.expr_name](chosen)

    def import_(self, node: Node) -> ast.Import:
        return ast.Import(
            self.string(node.children[1]), self.token_span(node.start), self.span(node)
        )

    def schema(self, node: Node) -> ast.Schema:
        _, name, record = node.children
        return ast.Schema(
            self.identifier(name),
            self.record(record),
            self.doc(node.start),
            self.token_span(node.start),
            self.span(node),
        )

    def task(self, node: Node) -> ast.Task:
        head, items, _ = node.children
        return self.make_task(head, self.items(items), self.span(node))

    def make_task(self, head: Node, members: list[Any], span: Span) -> ast.Task:
        return ast.Task(
            self.string(head.children[1]),
            tuple(members),
            self.doc(head.start),
            self.token_span(head.start),
            span,
        )

    def workflow(self, node: Node) -> ast.Workflow:
        head, items, _ = node.children
        return self.make_workflow(head, self.items(items), self.span(node))

    def make_workflow(self, head: Node, members: list[Any], span: Span) -> ast.Workflow:
        return ast.Workflow(
            self.identifier(head.children[1]),
            tuple(members),
            self.doc(head.start),
            self.token_span(head.start),
            span,
        )

    def test(self, node: Node) -> ast.Test:
        head, items, _ = node.children
        return self.make_test(head, self.items(items), self.span(node))

    def make_test(self, head: Node, members: list[Any], span: Span) -> ast.Test:
        return ast.Test(
            self.string(head.children[1]),
            tuple(members),
            self.doc(head.start),
            self.token_span(head.start),
            span,
        )

    def verify(self, node: Node) -> ast.Verify:
        head, items, _ = node.children
        return self.make_verify(head, self.items(items), self.span(node))

    def make_verify(self, head: Node, members: list[Any], span: Span) -> ast.Verify:
        return ast.Verify(
            self.string(head.children[1]),
            tuple(members),
            self.doc(head.start),
            self.token_span(head.start),
            span,
        )

    def items(self, node: Node) -> list[Any]:
        """The members of a `*_items` node, skipping separators."""
        members = []
        for item in node.children:
            chosen = item.children[0]
            if chosen.expr_name != "sep":
                members.append(self.member(chosen))
        return members

    def member(self, node: Node) -> Any:
        """Any block member: the node of a `*_member` rule or of one member rule."""
        while node.expr_name not in self._members:
            node = node.children[0]
        return self._members[node.expr_name](node)

    # Members -----------------------------------------------------------------

    def _keyword(self, node: Node) -> Span:
        return self.token_span(node.start)

    def version(self, node: Node) -> ast.Version:
        return ast.Version(self.string(node.children[2]), self._keyword(node), self.span(node))

    def description(self, node: Node) -> ast.Description:
        return ast.Description(self.string(node.children[2]), self._keyword(node), self.span(node))

    def task_input(self, node: Node) -> ast.TaskInput:
        return ast.TaskInput(self.type(node.children[2]), self._keyword(node), self.span(node))

    def task_output(self, node: Node) -> ast.TaskOutput:
        return ast.TaskOutput(self.type(node.children[2]), self._keyword(node), self.span(node))

    def compensated_by(self, node: Node) -> ast.CompensatedBy:
        return ast.CompensatedBy(
            self.string(node.children[2]), self._keyword(node), self.span(node)
        )

    def effect_clause(self, node: Node) -> ast.Effect:
        return ast.Effect(self.identifier(node.children[2]), self._keyword(node), self.span(node))

    def duration(self, node: Node) -> ast.DurationLiteral:
        token = self.tokens[node.start]
        span = self.token_span(node.start)
        if token.type == DURATION:
            return ast.DurationLiteral(int(token.value), span)
        self.diagnostics.append(
            Diagnostic.error(
                "E0101",
                "duration is missing a unit",
                span,
                help="add a unit such as `ms`, `s`, `m`, `h` or `d`, e.g. `30s`",
            )
        )
        return ast.DurationLiteral(0, span)

    def timeout(self, node: Node) -> ast.Timeout:
        return ast.Timeout(self.duration(node.children[2]), self._keyword(node), self.span(node))

    def retention(self, node: Node) -> ast.Retention:
        return ast.Retention(self.duration(node.children[2]), self._keyword(node), self.span(node))

    def workflow_input(self, node: Node) -> ast.WorkflowInput:
        return ast.WorkflowInput(
            self.record(node.children[1]), self._keyword(node), self.span(node)
        )

    def workflow_output(self, node: Node) -> ast.WorkflowOutput:
        return ast.WorkflowOutput(
            self.record(node.children[1]), self._keyword(node), self.span(node)
        )

    def step(self, node: Node) -> ast.Step:
        head, items, _ = node.children
        return self.make_step(head, self.items(items), self.span(node))

    def make_step(self, head: Node, members: list[Any], span: Span) -> ast.Step:
        return ast.Step(
            self.identifier(head.children[1]),
            tuple(members),
            self.doc(head.start),
            self.token_span(head.start),
            span,
        )

    def signal(self, node: Node) -> ast.Signal:
        _, name, record = node.children
        return ast.Signal(
            self.identifier(name),
            self.record(record),
            self.doc(node.start),
            self._keyword(node),
            self.span(node),
        )

    def query(self, node: Node) -> ast.Query:
        _, name, _, expression = node.children
        return ast.Query(
            self.identifier(name),
            self.expression(expression),
            self.doc(node.start),
            self._keyword(node),
            self.span(node),
        )

    def return_(self, node: Node) -> ast.Return:
        return ast.Return(self.expression(node.children[1]), self._keyword(node), self.span(node))

    def continue_as_new(self, node: Node) -> ast.ContinueAsNew:
        input_: ast.Expr | None = None
        condition: ast.Expr | None = None
        with_keyword: Span | None = None
        when_keyword: Span | None = None
        for clauses in node.children[1].children:
            order = clauses.children[0]
            first, rest = order.children
            for clause in [first, *rest.children]:
                keyword = self._keyword(clause)
                value = self.expression(clause.children[2])
                if clause.expr_name == "continue_with":
                    input_, with_keyword = value, keyword
                else:
                    condition, when_keyword = value, keyword
        return ast.ContinueAsNew(
            input_, condition, with_keyword, when_keyword, self._keyword(node), self.span(node)
        )

    def settings(self, node: Node) -> tuple[ast.Setting, ...]:
        settings = []
        for item in node.children:
            entry = item.children[0]
            name, _, value = entry.children
            settings.append(
                ast.Setting(self.identifier(name), self.expression(value), self.span(entry))
            )
        return tuple(settings)

    def limits(self, node: Node) -> ast.Limits:
        return ast.Limits(self.settings(node.children[2]), self._keyword(node), self.span(node))

    def migrate(self, node: Node) -> ast.Migrate:
        head, items, _ = node.children
        _, _, version, _, source, _ = head.children
        plain, reverse = self.migrate_items(items)
        return ast.Migrate(
            self.string(version),
            self.string(source),
            tuple(plain),
            tuple(r for r in reverse if isinstance(r, ast.MigrateReverse)),
            self.token_span(node.start),
            self.span(node),
        )

    def migrate_items(self, node: Node) -> tuple[list[ast.MigrateItem], list[object]]:
        """The items of a `migrate` or `reverse` block, the `reverse` blocks apart."""
        plain: list[ast.MigrateItem] = []
        reverse: list[object] = []
        for item in node.children:
            chosen = item.children[0]
            if chosen.expr_name == "sep":
                continue
            member = chosen.children[0]
            name = member.expr_name
            keyword = self.token_span(member.start)
            span = self.span(member)
            if name == "migrate_rename":
                _, old, _, new = member.children
                plain.append(
                    ast.MigrateRename(self.identifier(old), self.identifier(new), keyword, span)
                )
            elif name == "migrate_remove":
                plain.append(ast.MigrateRemove(self.identifier(member.children[1]), keyword, span))
            elif name == "migrate_input":
                plain.append(ast.MigrateInput(self.object(member.children[2]), keyword, span))
            else:
                inner, _ = self.migrate_items(member.children[2])
                reverse.append(ast.MigrateReverse(tuple(inner), keyword, span))
        return plain, reverse

    def search_fields(self, node: Node) -> ast.Search:
        return ast.Search(self.settings(node.children[2]), self._keyword(node), self.span(node))

    def on_outcome(self, node: Node) -> ast.OutcomeHandler:
        head, items, _ = node.children
        return self.make_outcome(head, self.items(items), self.span(node))

    def make_outcome(self, head: Node, steps: list[Any], span: Span) -> ast.OutcomeHandler:
        return ast.OutcomeHandler(
            self.identifier(head.children[1]), tuple(steps), self.token_span(head.start), span
        )

    def on_event(self, node: Node) -> ast.EventHandler:
        head, items, _ = node.children
        return self.make_event(head, self.items(items), self.span(node))

    def make_event(self, head: Node, steps: list[Any], span: Span) -> ast.EventHandler:
        _, kind, signal, _ = head.children
        return ast.EventHandler(
            self.identifier(kind),
            self.identifier(signal),
            tuple(steps),
            self.token_span(head.start),
            span,
        )

    def compensate(self, node: Node) -> ast.Compensate:
        head, items, _ = node.children
        return self.make_compensate(head, self.items(items), self.span(node))

    def make_compensate(self, head: Node, members: list[Any], span: Span) -> ast.Compensate:
        return ast.Compensate(tuple(members), self.token_span(head.start), span)

    def worker_action(self, node: Node) -> ast.WorkerAction:
        return ast.WorkerAction(self.string(node.children[2]), self._keyword(node), self.span(node))

    def workflow_action(self, node: Node) -> ast.WorkflowAction:
        return ast.WorkflowAction(
            self.string(node.children[2]), self._keyword(node), self.span(node)
        )

    def sleep_action(self, node: Node) -> ast.SleepAction:
        return ast.SleepAction(
            self.duration(node.children[2]), self._keyword(node), self.span(node)
        )

    def await_action(self, node: Node) -> ast.AwaitAction:
        return ast.AwaitAction(
            self.identifier(node.children[2]), self._keyword(node), self.span(node)
        )

    def compute_action(self, node: Node) -> ast.ComputeAction:
        return ast.ComputeAction(
            self.expression(node.children[2]), self._keyword(node), self.span(node)
        )

    def using(self, node: Node) -> ast.Using:
        return ast.Using(self.identifier(node.children[2]), self._keyword(node), self.span(node))

    def after(self, node: Node) -> ast.After:
        _, _, first, more = node.children
        steps = [self.identifier(first)] + [self.identifier(m.children[1]) for m in more.children]
        return ast.After(tuple(steps), self._keyword(node), self.span(node))

    def with_(self, node: Node) -> ast.With:
        return ast.With(self.expression(node.children[2]), self._keyword(node), self.span(node))

    def queue_timeout(self, node: Node) -> ast.QueueTimeout:
        return ast.QueueTimeout(
            self.duration(node.children[2]), self._keyword(node), self.span(node)
        )

    def retry(self, node: Node) -> ast.Retry:
        return ast.Retry(self.settings(node.children[2]), self._keyword(node), self.span(node))

    def idempotency_key(self, node: Node) -> ast.IdempotencyKey:
        return ast.IdempotencyKey(
            self.expression(node.children[2]), self._keyword(node), self.span(node)
        )

    def when(self, node: Node) -> ast.When:
        return ast.When(self.expression(node.children[2]), self._keyword(node), self.span(node))

    def for_each(self, node: Node) -> ast.ForEach:
        _, variable, _, iterable = node.children
        return ast.ForEach(
            self.identifier(variable),
            self.expression(iterable),
            self._keyword(node),
            self.span(node),
        )

    def max_parallel(self, node: Node) -> ast.MaxParallel:
        return ast.MaxParallel(
            self.expression(node.children[2]), self._keyword(node), self.span(node)
        )

    def flow_block(self, node: Node) -> ast.FlowBlock:
        return ast.FlowBlock(
            self.identifier(node.children[0]),
            self.settings(node.children[2]),
            self._keyword(node),
            self.span(node),
        )

    def flow_priority(self, node: Node) -> ast.Priority:
        return ast.Priority(self.expression(node.children[2]), self._keyword(node), self.span(node))

    # Tests -------------------------------------------------------------------

    def test_workflow(self, node: Node) -> ast.TestWorkflow:
        return ast.TestWorkflow(
            self.identifier(node.children[2]), self._keyword(node), self.span(node)
        )

    def test_input(self, node: Node) -> ast.TestInput:
        return ast.TestInput(
            self.expression(node.children[2]), self._keyword(node), self.span(node)
        )

    def mock(self, node: Node) -> ast.Mock:
        _, task, first, rest = node.children
        stages = []
        behaviour = first
        start = first.start
        for then in rest.children:
            _, count, _, following = then.children
            stages.append(
                ast.MockStage(
                    self.behaviour(behaviour),
                    self.int_literal(count.start),
                    self.range_span(start, count.end),
                )
            )
            behaviour, start = following, following.start
        stages.append(ast.MockStage(self.behaviour(behaviour), None, self.span(behaviour)))
        return ast.Mock(self.string(task), tuple(stages), self._keyword(node), self.span(node))

    def behaviour(self, node: Node) -> ast.MockBehaviour:
        chosen = node.children[0]
        span = self.span(chosen)
        if chosen.expr_name == "returns":
            return ast.MockReturns(self.expression(chosen.children[1]), span)
        if chosen.expr_name == "fails":
            _, code, message, retryable = chosen.children
            return ast.MockFails(
                self.string(code),
                self.string(message.children[0]) if message.children else None,
                bool(retryable.children),
                span,
            )
        return ast.MockHangs(span)

    def test_signal(self, node: Node) -> ast.TestSignal:
        _, name, payload = node.children
        return ast.TestSignal(
            self.identifier(name),
            self.expression(payload.children[0].children[1]) if payload.children else None,
            self._keyword(node),
            self.span(node),
        )

    def int_literal(self, index: int) -> ast.IntLiteral:
        return ast.IntLiteral(int(self.tokens[index].value), self.token_span(index))

    def step_path(self, node: Node) -> ast.StepPath:
        first, more = node.children
        parts = [self.identifier(first)] + [self.identifier(m.children[1]) for m in more.children]
        return ast.StepPath(tuple(parts), self.span(node))

    def expect(self, node: Node) -> ast.Expect:
        return ast.Expect(self.expectation(node.children[1]), self._keyword(node), self.span(node))

    def invariant(self, node: Node) -> ast.Invariant:
        _, expectation, condition = node.children
        conditions: list[ast.Expectation] = []
        if condition.children:
            _, first, more = condition.children[0].children
            conditions.append(self.expectation(first))
            conditions += [self.expectation(m.children[1]) for m in more.children]
        return ast.Invariant(
            self.expectation(expectation), tuple(conditions), self._keyword(node), self.span(node)
        )

    def expectation(self, node: Node) -> ast.Expectation:
        """The expectation of an `expectation` node (after `expect`, `invariant`, `when`, `and`)."""
        chosen = node.children[0]
        name = chosen.expr_name
        span = self.span(chosen)
        if name == "expect_status":
            return ast.ExpectStatus(self.identifier(chosen.children[1]), span)
        if name == "expect_output":
            return ast.ExpectOutput(self.expression(chosen.children[1]), span)
        if name == "expect_error":
            return ast.ExpectError(self.string(chosen.children[1]), span)
        if name == "expect_step":
            path = self.step_path(chosen.children[1])
            check = chosen.children[2].children[0]
            if check.expr_name == "step_output":
                return ast.ExpectStepOutput(path, self.expression(check.children[1]), span)
            if check.expr_name == "step_attempts":
                return ast.ExpectStepAttempts(path, self.int_literal(check.children[1].start), span)
            return ast.ExpectStepStatus(path, self.identifier(check), span)
        if name == "expect_compensated":
            return ast.ExpectCompensated(self.identifier(chosen.children[1]), span)
        return ast.ExpectRuns(self.int_literal(chosen.children[1].start), span)

    # Types --------------------------------------------------------------------

    def record(self, node: Node) -> ast.RecordType:
        fields = []
        for item in node.children[1].children:
            field = item.children[0]
            name, _, type_, default = field.children
            fields.append(
                ast.Field(
                    self.identifier(name),
                    self.type(type_),
                    self.expression(default.children[0].children[1]) if default.children else None,
                    self.doc(field.start),
                    self.span(field),
                )
            )
        return ast.RecordType(tuple(fields), self.span(node))

    def type(self, node: Node) -> ast.TypeExpr:
        base, marks = node.children
        chosen = base.children[0]
        name = chosen.expr_name
        result: ast.TypeExpr
        if name == "list_type":
            result = ast.ListType(self.type(chosen.children[2]), self.span(chosen))
        elif name == "map_type":
            _, _, key, _, value, _ = chosen.children
            result = ast.MapType(self.type(key), self.type(value), self.span(chosen))
        elif name == "record_body":
            result = self.record(chosen)
        else:
            result = ast.NamedType(self.identifier(chosen), self.span(chosen))
        if marks.end > marks.start:
            result = ast.OptionalType(result, self.span(node))
        return result

    # Expressions --------------------------------------------------------------

    def expression(self, node: Node) -> ast.Expr:
        first, tails = node.children
        left = self.operand(first)
        if not tails.children:
            return left
        # Precedence climbing over the flat chain: all operators are
        # left-associative.
        operands = [left]
        operators: list[tuple[str, Span]] = []
        for tail in tails.children:
            op_node, operand = tail.children
            op = self.tokens[op_node.start].type
            while operators and _PRECEDENCE[operators[-1][0]] >= _PRECEDENCE[op]:
                self._reduce(operands, operators)
            operators.append((op, self.token_span(op_node.start)))
            operands.append(self.operand(operand))
        while operators:
            self._reduce(operands, operators)
        return operands[0]

    def _reduce(self, operands: list[ast.Expr], operators: list[tuple[str, Span]]) -> None:
        right = operands.pop()
        left = operands.pop()
        op, op_span = operators.pop()
        binary = ast.Binary(op, left, right, op_span, left.span.to(right.span))
        operands.append(self._nested(binary, op_span, left, right))

    def _nested(self, node: _E, at: Span, *children: ast.Expr) -> _E:
        """`node`, whose children are `children`, after checking that it is
        at most MAX_NESTING high; `at` locates the error if it is not."""
        heights = self._heights
        height = 2 if children else 1
        for child in children:
            known = heights.get(id(child))
            if known is not None and known[1] >= height:
                height = known[1] + 1
        if height > MAX_NESTING:
            raise TooDeep(span=_point(at))
        heights[id(node)] = (node, height)
        return node

    def operand(self, node: Node) -> ast.Expr:
        prefixes, postfix = node.children
        value = self.postfix(postfix)
        for index in range(prefixes.end - 1, prefixes.start - 1, -1):
            op = self.tokens[index].type
            span = self.token_span(index).to(value.span)
            if op == "-" and isinstance(value, ast.IntLiteral):
                value = ast.IntLiteral(-value.value, span)
            elif op == "-" and isinstance(value, ast.FloatLiteral):
                value = ast.FloatLiteral(-value.value, span)
            else:
                op_span = self.token_span(index)
                value = self._nested(ast.Unary(op, value, op_span, span), op_span, value)
        return value

    def postfix(self, node: Node) -> ast.Expr:
        primary, suffixes = node.children
        value = self.primary(primary.children[0])
        for suffix in suffixes.children:
            chosen = suffix.children[1].children[0]
            span = value.span.to(self.range_span(chosen.start, chosen.end))
            if chosen.expr_name == "member_suffix":
                name = self.identifier(chosen.children[1])
                value = self._nested(ast.MemberAccess(value, name, span), name.span, value)
            else:
                index = self.expression(chosen.children[1])
                bracket = self.token_span(chosen.start)
                value = self._nested(ast.Index(value, index, span), bracket, value, index)
        return value

    def primary(self, node: Node) -> ast.Expr:
        name = node.expr_name
        if name == "literal":
            return self.literal(node.start)
        if name == "named":
            return self.named(node)
        if name == "object":
            return self.object(node)
        if name == "list":
            items = tuple(self.expression(item.children[0]) for item in node.children[1].children)
            return self._nested(ast.ListLiteral(items, self.span(node)), self.span(node), *items)
        if name == "paren":
            return self.expression(node.children[1])
        _, condition, _, then, _, otherwise = node.children
        parts = (self.expression(condition), self.expression(then), self.expression(otherwise))
        return self._nested(ast.Conditional(*parts, self.span(node)), self.span(node), *parts)

    def literal(self, index: int) -> ast.Expr:
        token = self.tokens[index]
        span = self.token_span(index)
        kind = token.type
        value: Any = token.value
        if kind == STRING:
            return ast.StringExpr(value, span)
        if kind == INT:
            return ast.IntLiteral(value, span)
        if kind == FLOAT:
            return ast.FloatLiteral(value, span)
        if kind == DURATION:
            return ast.DurationLiteral(value, span)
        if kind == "null":
            return ast.NullLiteral(span)
        return ast.BoolLiteral(kind == "true", span)

    def named(self, node: Node) -> ast.Expr:
        name_node, tail = node.children
        if not tail.children:
            return ast.Name(self.tokens[node.start].text, self.token_span(node.start))
        chosen = tail.children[0].children[0]
        if chosen.expr_name == "lambda_tail":
            body = self.expression(chosen.children[1])
            arrow = self.token_span(chosen.start)
            lambda_ = ast.Lambda(self.identifier(name_node), body, self.span(node))
            return self._nested(lambda_, arrow, body)
        arguments = chosen.children[1]
        values: list[ast.Expr] = []
        for argument_list in arguments.children:
            first, more, _ = argument_list.children
            values.append(self.expression(first))
            values.extend(self.expression(m.children[1]) for m in more.children)
        call = ast.Call(self.identifier(name_node), tuple(values), self.span(node))
        return self._nested(call, self.span(node), *values)

    def object(self, node: Node) -> ast.ObjectLiteral:
        entries = []
        seen: dict[str, Span] = {}
        for item in node.children[1].children:
            entry = item.children[0]
            key_node, _, value = entry.children
            token = self.tokens[key_node.start]
            quoted = token.type == STRING
            key = str(token.value) if quoted else token.text
            key_span = self.token_span(key_node.start)
            if key in seen:
                self.diagnostics.append(
                    Diagnostic.error("E0107", f"duplicate field `{key}` in object", key_span)
                )
            seen.setdefault(key, key_span)
            entries.append(
                ast.ObjectEntry(key, key_span, quoted, self.expression(value), self.span(entry))
            )
        values = (entry.value for entry in entries)
        return self._nested(
            ast.ObjectLiteral(tuple(entries), self.span(node)), self.span(node), *values
        )


def _point(span: Span) -> Span:
    """The first character of `span`."""
    return Span(
        span.file, span.line, span.column, span.line, span.column + 1, span.start, span.start + 1
    )
