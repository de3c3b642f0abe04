"""Types expressions and lowers them to IR expressions in one pass.

`ExprChecker.check(node, expected)` returns the expression's type and its IR
tree, with every name resolved (chapter 26). With an expected type, object
literals are exact (E0404, E0403), list items and `if` branches are checked
against it, and string literals are validated as UUIDs or timestamps; other
expressions are inferred and then tested for assignability (E0400, E0405).

After an error the sub-expression is typed JSON, which every check accepts,
so one mistake is reported once rather than at every use.

The outermost `check` or `infer` also measures the IR it returns: an
expression whose encoding nests deeper than `MAX_EXPR_DEPTH` levels would
make a document the runtime refuses (RULINGS §22), so it is E0100 at the
expression (docs/ir.md, "Depth"). The source limit of 100 levels does not
cover it, as one source level can be up to three IR levels (object literals).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeAlias

from orbit_core import values
from orbit_core.ir import expr as e
from orbit_core.ir.types import Field, ListType, MapType, OptionalType, RecordType
from orbit_core.ir.walk import MAX_EXPR_DEPTH, expr_depth
from orbit_lang import ast
from orbit_lang.check import builtins
from orbit_lang.check.env import Env
from orbit_lang.check.report import Reporter, did_you_mean
from orbit_lang.check.typed import Typed
from orbit_lang.check.types import (
    BOOL,
    DURATION,
    EXECUTION,
    FAILURE,
    FLOAT,
    INT,
    JSON,
    NULL,
    STRING,
    Mismatch,
    NullType,
    Type,
    assignable,
    is_json,
    is_number,
    is_optional,
    join,
    optional,
    render,
    required,
    strip,
    to_ir,
)
from orbit_lang.diagnostics import Label
from orbit_lang.source import Span
from orbit_lang.suggest import closest
from orbit_lang.syntax import nesting

COALESCE_HELP = (
    "provide a fallback with `coalesce(value, default)`, or declare the target as optional with `?`"
)
OPTIONAL_OPERAND_HELP = "one operand may be `null`; use `coalesce(value, default)` first"
LAMBDA_HELP = "for example `map(input.items, item => item.price)`"
ROOT_NAMES = ("input", "execution")

_BINARY_OPS = {
    "+": "add",
    "-": "sub",
    "*": "mul",
    "/": "div",
    "%": "mod",
    "==": "eq",
    "!=": "ne",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
    "&&": "and",
    "||": "or",
}
_STRING_FORMS: dict[str, tuple[Callable[[str], bool], str]] = {
    "uuid": (values.is_uuid, "a valid UUID (8-4-4-4-12 hexadecimal digits)"),
    "timestamp": (values.is_timestamp, "a valid RFC 3339 timestamp"),
}


class ExprChecker:
    def __init__(self, report: Reporter, env: Env, *, bounded: bool = True) -> None:
        """`bounded`: whether the IR becomes an expression of a definition,
        whose depth is limited (not a default, which is evaluated)."""
        self.report = report
        self.env = env
        self.bounded = bounded
        # How many `check`/`infer` calls are open: the outermost measures.
        self._open = 0
        self.params: list[tuple[str, Type]] = []
        # Set when the hidden loop variable was read (E0401 is reported by the
        # caller, over the whole condition).
        self.read_hidden_loop_var = False
        # Errors reported while checking, so callers can tell a clean check.
        self.errors = 0

    # ------------------------------------------------------------ reporting

    def error(
        self,
        code: str,
        message: str,
        span: Span,
        *,
        labels: Iterable[Label] = (),
        notes: Iterable[str] = (),
        help: str | None = None,
    ) -> None:
        self.errors += 1
        self.report.error(code, message, span, labels=labels, notes=notes, help=help)

    def mismatch(self, problem: Mismatch, span: Span) -> None:
        if problem.code == "E0405":
            self.error(
                "E0405",
                f"value may be `null` but `{render(problem.expected)}` is required",
                span,
                help=COALESCE_HELP,
            )
            return
        notes: list[str] = []
        if problem.path:
            notes.append(f"at `{problem.path}`: {problem.detail()}")
        elif problem.missing is not None:
            notes.append(problem.detail())
        self.error(
            "E0400",
            f"type mismatch: expected `{render(problem.expected)}`, found `{render(problem.found)}`",
            span,
            notes=notes,
        )

    # ------------------------------------------------------------ entry points

    def check(self, node: ast.Expr, expected: Type | None = None) -> Typed:
        """Types `node`; with `expected`, also checks it can be used there."""
        self._open += 1
        try:
            typed = self._check(node, expected)
        finally:
            self._open -= 1
        return typed if self._open else self._measured(typed, node)

    def infer(self, node: ast.Expr) -> Typed:
        self._open += 1
        try:
            typed = self._infer(node)
        finally:
            self._open -= 1
        return typed if self._open else self._measured(typed, node)

    def _measured(self, typed: Typed, node: ast.Expr) -> Typed:
        if not self.bounded:
            return typed
        depth = expr_depth(typed.ir)
        if depth <= MAX_EXPR_DEPTH:
            return typed
        self.error(
            "E0100",
            nesting.MESSAGE,
            node.span,
            notes=[
                f"compiled, it nests {depth} levels deep; a compiled expression may nest "
                f"at most {MAX_EXPR_DEPTH} (object literals count three levels, lists "
                "and calls two, other expressions one)"
            ],
            help=nesting.HELP,
        )
        return self.poison()

    def _check(self, node: ast.Expr, expected: Type | None) -> Typed:
        if expected is not None and not is_json(expected):
            if isinstance(node, ast.ObjectLiteral):
                return self._object_against(node, expected)
            if isinstance(node, ast.ListLiteral):
                return self._list_against(node, expected)
            if isinstance(node, ast.Conditional):
                return self._conditional(node, expected)
            if isinstance(node, ast.StringExpr):
                form = _STRING_FORMS.get(getattr(strip(expected), "kind", ""))
                if form is not None:
                    return self._string_form(node, expected, *form)
        typed = self.infer(node)
        if expected is not None:
            self.require(typed, expected, node.span)
        return typed

    def require(self, typed: Typed, expected: Type, span: Span) -> bool:
        problem = assignable(typed.type, expected)
        if problem is None:
            return True
        self.mismatch(problem, span)
        return False

    def _infer(self, node: ast.Expr) -> Typed:
        if isinstance(node, _Literal):
            return _literal(node)
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.MemberAccess):
            return self._member(node)
        if isinstance(node, ast.Index):
            return self._index(node)
        if isinstance(node, ast.Call):
            return builtins.check_call(self, node)
        if isinstance(node, ast.Lambda):
            self.error(
                "E0415",
                "a lambda can only be passed to `map`, `filter`, `any`, `all` or `find`",
                node.span,
                help=LAMBDA_HELP,
            )
            return self.poison()
        if isinstance(node, ast.Unary):
            return self._unary(node)
        if isinstance(node, ast.Binary):
            return self._binary(node)
        if isinstance(node, ast.Conditional):
            return self._conditional(node, None)
        if isinstance(node, ast.ObjectLiteral):
            return self._object(node)
        return self._list(node)

    @staticmethod
    def poison() -> Typed:
        return Typed(JSON, e.Null())

    # ------------------------------------------------------------ names

    def in_scope(self) -> Iterator[str]:
        """Every name a lambda parameter would shadow."""
        yield from (name for name, _ in self.params)
        if self.env.loop_var is not None:
            yield self.env.loop_var[0]
        yield from ROOT_NAMES
        yield from self.env.step_names

    def _name(self, node: ast.Name) -> Typed:
        name = node.name
        for param, type_ in reversed(self.params):
            if param == name:
                return Typed(type_, e.Var(name))
        env = self.env
        if env.constant is not None and env.input is None:
            self.error("E0401", f"`{name}` cannot be used in {env.constant}", node.span)
            return self.poison()
        if env.loop_var is not None and env.loop_var[0] == name:
            return Typed(env.loop_var[1], e.Var(name))
        if env.hidden_loop_var == name:
            self.read_hidden_loop_var = True
            self.errors += 1
            return self.poison()
        if name == "input" and env.input is not None:
            return Typed(env.input, e.Input())
        if name == "execution" and env.execution:
            self.error(
                "E0402",
                "`execution` must be followed by `.id`, `.workflow` or `.version`",
                node.span,
            )
            return self.poison()
        if name == "failure" and env.failure:
            return Typed(FAILURE, e.Failure())
        if name == "event" and env.event is not None:
            return Typed(env.event, e.Event())
        step = env.steps.get(name)
        if step is not None:
            return Typed(step, e.StepRef(name))
        if name in env.step_names:
            if env.blocked is not None:
                env.blocked(name, node.span)
                self.errors += 1
            return self.poison()
        self._unknown(node)
        return self.poison()

    def _unknown(self, node: ast.Name) -> None:
        name = node.name
        if name == "failure":
            help_text = (
                "`failure` is only available in `on failure`, `on cancel` and `on timeout` steps"
            )
        elif name == "event":
            help_text = "`event` is only available in the steps of an `on event` block"
        elif self.env.constant is not None:
            self.error("E0401", f"`{name}` cannot be used in {self.env.constant}", node.span)
            return
        else:
            help_text = did_you_mean(name, self._readable()) or ""
        self.error("E0401", f"unknown reference `{name}`", node.span, help=help_text or None)

    def _readable(self) -> Iterator[str]:
        yield from (name for name, _ in reversed(self.params))
        if self.env.loop_var is not None:
            yield self.env.loop_var[0]
        if self.env.input is not None:
            yield "input"
        if self.env.execution:
            yield "execution"
        yield from self.env.steps

    # ------------------------------------------------------------ paths

    def _member(self, node: ast.MemberAccess) -> Typed:
        field = node.member.name
        target = node.target
        if (
            isinstance(target, ast.Name)
            and target.name == "execution"
            and self.env.execution
            and not self._shadowed("execution")
        ):
            if EXECUTION.field(field) is None:
                self.error(
                    "E0402",
                    f"no field `{field}` on `execution`",
                    node.member.span,
                    help="use `execution.id`, `execution.workflow` or `execution.version`",
                )
                return self.poison()
            return Typed(STRING, e.Get(e.Execution(), field))
        base = self.infer(target)
        result = self._field_type(base.type, field, node.member)
        return Typed(result, e.Get(base.ir, field))

    def _shadowed(self, name: str) -> bool:
        if any(param == name for param, _ in self.params):
            return True
        return self.env.loop_var is not None and self.env.loop_var[0] == name

    def _field_type(self, t: Type, field: str, member: ast.Identifier) -> Type:
        if is_json(t) or isinstance(t, NullType):
            return t
        if isinstance(t, OptionalType):
            return optional(self._field_type(t.type, field, member))
        if isinstance(t, MapType):
            return optional(t.values)
        if isinstance(t, RecordType):
            found = t.field(field)
            if found is not None:
                return found.type
            names = [f.name for f in t.fields]
            suggestion = did_you_mean(field, names)
            if suggestion is None and names:
                suggestion = "available fields: " + ", ".join(f"`{n}`" for n in names)
            self.error(
                "E0402",
                f"no field `{field}` on type `{render(t)}`",
                member.span,
                help=suggestion,
            )
            return JSON
        self.error("E0402", f"no field `{field}` on type `{render(t)}`", member.span)
        return JSON

    def _index(self, node: ast.Index) -> Typed:
        base = self.infer(node.target)
        index = self.infer(node.index)
        result = self._index_type(base.type, index, node)
        return Typed(result, e.Index(base.ir, index.ir))

    def _index_type(self, t: Type, index: Typed, node: ast.Index) -> Type:
        if is_json(t) or isinstance(t, NullType):
            return t
        if isinstance(t, OptionalType):
            return optional(self._index_type(t.type, index, node))
        if isinstance(t, ListType):
            self.require(index, INT, node.index.span)
            return optional(t.items)
        if isinstance(t, MapType):
            self.require(index, STRING, node.index.span)
            return optional(t.values)
        if isinstance(t, RecordType):
            key = node.index
            if not isinstance(key, ast.StringExpr):
                self.error(
                    "E0406",
                    "a record can only be indexed with a string literal",
                    node.index.span,
                    help='write the field name, e.g. `record["field"]`, or use `.field`',
                )
                return JSON
            found = t.field(key.value)
            if found is None:
                self.error(
                    "E0402",
                    f"no field `{key.value}` on type `{render(t)}`",
                    key.span,
                    help=did_you_mean(key.value, [f.name for f in t.fields]),
                )
                return JSON
            return found.type
        self.error(
            "E0406",
            f"a value of type `{render(t)}` cannot be indexed",
            node.span,
            labels=[Label(node.target.span, f"`{render(t)}`")],
        )
        return JSON

    # ------------------------------------------------------------ operators

    def _unary(self, node: ast.Unary) -> Typed:
        operand = self.infer(node.operand)
        t = operand.type
        if node.operator == "!":
            ir: e.Expr = e.Unary("not", operand.ir)
            if t == BOOL or is_json(t):
                return Typed(BOOL, ir)
            if is_optional(t) and (strip(t) == BOOL or isinstance(t, NullType)):
                self.error(
                    "E0405",
                    "value may be `null` but `Bool` is required",
                    node.operand.span,
                    help=COALESCE_HELP,
                )
                return Typed(BOOL, ir)
            self._operand_error(node, t)
            return Typed(BOOL, ir)
        ir = e.Unary("neg", operand.ir)
        if is_number(t) or is_json(t):
            return Typed(t, ir)
        self._operand_error(node, t)
        return Typed(JSON, ir)

    def _operand_error(self, node: ast.Unary, t: Type) -> None:
        self.error(
            "E0406",
            f"operator `{node.operator}` cannot be applied to `{render(t)}`",
            node.span,
            labels=[Label(node.operand.span, f"`{render(t)}`")],
            help=OPTIONAL_OPERAND_HELP if is_optional(t) else None,
        )

    def _binary(self, node: ast.Binary) -> Typed:
        op = node.operator
        if op in ("==", "!="):
            # A string literal compared with a UUID or a Timestamp is one.
            if isinstance(node.right, ast.StringExpr):
                left = self.infer(node.left)
                right = self.check(node.right, _string_form_of(left.type))
            elif isinstance(node.left, ast.StringExpr):
                right = self.infer(node.right)
                left = self.check(node.left, _string_form_of(right.type))
            else:
                left, right = self.infer(node.left), self.infer(node.right)
        else:
            left, right = self.infer(node.left), self.infer(node.right)
        ir = e.Binary(_BINARY_OPS[op], left.ir, right.ir)
        lt, rt = left.type, right.type
        if op in ("==", "!="):
            if not _comparable(lt, rt):
                self._operator_error(node, lt, rt, note="values of different types are never equal")
            return Typed(BOOL, ir)
        if is_json(lt) or is_json(rt):
            if op in ("&&", "||", "<", "<=", ">", ">="):
                return Typed(BOOL, ir)
            return Typed(JSON, ir)
        result = _operator_result(op, lt, rt)
        if result is None:
            self._operator_error(node, lt, rt)
            return Typed(BOOL if op in ("&&", "||", "<", "<=", ">", ">=") else JSON, ir)
        return Typed(result, ir)

    def _operator_error(self, node: ast.Binary, lt: Type, rt: Type, note: str = "") -> None:
        help_text: str | None = None
        notes: list[str] = []
        if is_optional(lt) or is_optional(rt):
            help_text = OPTIONAL_OPERAND_HELP
        elif node.operator == "+" and STRING in (lt, rt):
            help_text = "convert the other operand with `string(...)`"
        elif DURATION in (lt, rt):
            notes.append("durations support no operators")
        elif note:
            notes.append(note)
        self.error(
            "E0406",
            f"operator `{node.operator}` cannot be applied to `{render(lt)}` and `{render(rt)}`",
            node.span,
            labels=[
                Label(node.left.span, f"`{render(lt)}`"),
                Label(node.right.span, f"`{render(rt)}`"),
            ],
            notes=notes,
            help=help_text,
        )

    # ------------------------------------------------------------ if

    def _conditional(self, node: ast.Conditional, expected: Type | None) -> Typed:
        condition = self.infer(node.condition)
        self.condition(condition.type, node.condition.span, "`if` condition")
        then = self.check(node.then, expected)
        otherwise = self.check(node.otherwise, expected)
        ir = e.If(condition.ir, then.ir, otherwise.ir)
        result = join(then.type, otherwise.type)
        if result is None:
            if expected is not None:
                return Typed(expected, ir)
            self.error(
                "E0400",
                f"`if` branches have incompatible types `{render(then.type)}` and "
                f"`{render(otherwise.type)}`",
                node.span,
                labels=[
                    Label(node.then.span, f"`{render(then.type)}`"),
                    Label(node.otherwise.span, f"`{render(otherwise.type)}`"),
                ],
            )
            return Typed(JSON, ir)
        return Typed(result, ir)

    def condition(self, t: Type, span: Span, what: str) -> bool:
        """Checks a `when`/`if` condition is `Bool` or `Bool?` (E0408)."""
        if strip(t) == BOOL or is_json(t) or isinstance(t, NullType):
            return True
        self.error("E0408", f"{what} must be `Bool`, found `{render(t)}`", span)
        return False

    # ------------------------------------------------------------ literals

    def _string_form(
        self, node: ast.StringExpr, expected: Type, test: Callable[[str], bool], form: str
    ) -> Typed:
        # Only literals convert from String to a UUID or Timestamp (chapter 08).
        if not test(node.value):
            self.error(
                "E0400",
                f"type mismatch: expected `{render(expected)}`, found `String`",
                node.span,
                notes=[f"the literal is not {form}"],
            )
        return Typed(strip(expected), e.Str(node.value))

    def _object(self, node: ast.ObjectLiteral) -> Typed:
        fields: list[Field] = []
        entries: list[e.Entry] = []
        for entry in node.entries:
            value = self.infer(entry.value)
            fields.append(Field(entry.key, to_ir(value.type)))
            entries.append(e.Entry(entry.key, value.ir))
        return Typed(RecordType(tuple(fields)), e.Object(tuple(entries)))

    def _object_against(self, node: ast.ObjectLiteral, expected: Type) -> Typed:
        target = strip(expected)
        if isinstance(target, MapType):
            entries = [
                e.Entry(entry.key, self.check(entry.value, target.values).ir)
                for entry in node.entries
            ]
            return Typed(target, e.Object(tuple(entries)))
        if not isinstance(target, RecordType):
            typed = self._object(node)
            self.require(typed, expected, node.span)
            return typed
        entries = []
        given = {entry.key for entry in node.entries}
        names = [f.name for f in target.fields]
        # A misspelt field is one mistake: E0404 suggests the field it was
        # meant to be, so that field is not also reported missing (E0403).
        meant: set[str] = set()
        for entry in node.entries:
            field = target.field(entry.key)
            if field is None:
                suggestion = closest(entry.key, names)
                self.error(
                    "E0404",
                    f"unknown field `{entry.key}` for `{render(target)}`",
                    entry.key_span,
                    help=did_you_mean(entry.key, names),
                )
                if suggestion is not None and suggestion not in given:
                    meant.add(suggestion)
                value = self.infer(entry.value)
            else:
                value = self.check(entry.value, field.type)
            entries.append(e.Entry(entry.key, value.ir))
        given |= meant
        missing = [f for f in target.fields if required(f) and f.name not in given]
        if missing:
            self.missing_fields(missing, target, node.span)
        return Typed(target, e.Object(tuple(entries)))

    def missing_fields(self, missing: list[Field], target: Type, span: Span) -> None:
        listed = ", ".join(f"`{f.name}: {render(f.type)}`" for f in missing)
        plural = "s" if len(missing) > 1 else ""
        self.error(
            "E0403",
            f"missing required field{plural} {listed}",
            span,
            notes=[f"required by `{render(target)}`"],
        )

    def _list(self, node: ast.ListLiteral) -> Typed:
        items = [self.infer(item) for item in node.items]
        ir = e.List(tuple(item.ir for item in items))
        if not items:
            return Typed(ListType(JSON), ir)
        joined: Type = items[0].type
        for item, item_node in zip(items[1:], node.items[1:], strict=True):
            combined = join(joined, item.type)
            if combined is None:
                self.error(
                    "E0400",
                    f"list items have incompatible types `{render(joined)}` and "
                    f"`{render(item.type)}`",
                    item_node.span,
                )
                return Typed(JSON, ir)
            joined = combined
        return Typed(ListType(to_ir(joined)), ir)

    def _list_against(self, node: ast.ListLiteral, expected: Type) -> Typed:
        target = strip(expected)
        if not isinstance(target, ListType):
            typed = self._list(node)
            self.require(typed, expected, node.span)
            return typed
        items = [self.check(item, target.items).ir for item in node.items]
        return Typed(target, e.List(tuple(items)))


# The literals, whose type is known without context.
_Literal: TypeAlias = (
    ast.IntLiteral
    | ast.FloatLiteral
    | ast.StringExpr
    | ast.BoolLiteral
    | ast.NullLiteral
    | ast.DurationLiteral
)


def _literal(node: _Literal) -> Typed:
    if isinstance(node, ast.IntLiteral):
        return Typed(INT, e.Int(node.value))
    if isinstance(node, ast.FloatLiteral):
        return Typed(FLOAT, e.Float(node.value))
    if isinstance(node, ast.StringExpr):
        return Typed(STRING, e.Str(node.value))
    if isinstance(node, ast.BoolLiteral):
        return Typed(BOOL, e.Bool(node.value))
    if isinstance(node, ast.NullLiteral):
        return Typed(NULL, e.Null())
    return Typed(DURATION, e.Duration(node.milliseconds))


def _string_form_of(t: Type) -> Type | None:
    """`t` when a string literal compared with it must be a valid literal of it."""
    return t if getattr(strip(t), "kind", "") in _STRING_FORMS else None


def _comparable(a: Type, b: Type) -> bool:
    if isinstance(a, NullType) or isinstance(b, NullType):
        return True
    return join(strip(a), strip(b)) is not None


def _operator_result(op: str, lt: Type, rt: Type) -> Type | None:
    """The result of `lt op rt` for operands that are neither JSON nor
    incompatible; None when the operator is not defined for them."""
    if is_optional(lt) or is_optional(rt):
        return None
    if op in ("&&", "||"):
        return BOOL if lt == BOOL and rt == BOOL else None
    if op in ("<", "<=", ">", ">="):
        if (is_number(lt) and is_number(rt)) or (lt == STRING and rt == STRING):
            return BOOL
        return None
    if is_number(lt) and is_number(rt):
        return INT if lt == INT and rt == INT else FLOAT
    if op != "+":
        return None
    if lt == STRING and rt == STRING:
        return STRING
    if isinstance(lt, ListType) and isinstance(rt, ListType):
        items = join(lt.items, rt.items)
        return None if items is None else ListType(to_ir(items))
    return None
