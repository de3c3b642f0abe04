"""The ORBIT grammar (chapter 31) as a parsimonious token grammar.

The grammar runs over the lexer's tokens, not over characters: a quoted
terminal such as "workflow" or "{" matches a token of that type (words are
typed by their own text, literals by `<string>`, `<int>`, `<float>` and
`<duration>`). Rules whose names do not appear on the left of RULES are
written in Python below, each a check of one token:

- identifier rules (`step_name`, `field_name`, ...) match any word except
  the reserved literals `true`, `false` and `null`; keywords stay contextual
  because a keyword is just a word that a rule expects in one position. Each
  role has its own name so that messages can say "a step name";
- `ref_name` is an identifier used as an expression root; it also refuses
  `if`, so a malformed `if` expression is reported as such;
- the line rule (RULINGS §1): `dot`, `open_bracket`, `open_paren`, `arrow`
  and `binary_op`'s `-` only match on the line of the token before them, so a
  line break before `.`, `[`, `(`, `=>` or `-` ends the expression on its
  left, while a line that starts with any other binary operator continues
  it; `sl` ("same line") is the same check without a token, for the payload
  of a test's `signal`;
- token classes (`binary_op`, `literal`, `sep`, the optional `colon`, ...)
  that the rule syntax would spell as a dozen alternatives.

Binary expressions are parsed as a flat operand/operator chain; the AST
builder applies chapter 26's precedence table (all operators are
left-associative). This keeps the parse tree small and the parser fast.

Rule names matter twice: the builder dispatches on them, and error messages
(`expected <what>, found <token>`) describe the last rule that failed at the
furthest position, using `EXPECTATIONS` below.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from parsimonious.grammar import TokenGrammar

from orbit_lang.syntax.lexer import RESERVED, Token
from orbit_lang.syntax.nesting import counted

TokenRule = Callable[[Sequence[Token], int], int | None]

RULES = r"""
program             = top_item* eof
top_item            = declaration / sep
declaration         = workflow_decl / schema_decl / task_decl / import_decl / test_decl
                    / verify_decl

import_decl         = "import" import_path
schema_decl         = "schema" schema_name record_body

# Records and types ------------------------------------------------------
record_body         = "{" record_items record_close
record_items        = record_item*
record_item         = field opt_sep
field               = field_name ":" type field_default?
field_default       = "=" expression
record_close        = "}"
type_body           = base_type optional_marks
base_type           = type_name / list_type / map_type / record_body
list_type           = "List" "<" type type_close
map_type            = "Map" "<" type "," type type_close
type_close          = ">"

# Task contracts ----------------------------------------------------------
task_decl           = task_head task_items block_close
task_head           = "task" task_name "{"
task_items          = task_item*
task_item           = task_member / sep
task_member         = version / description / task_input / task_output / compensated_by
                    / effect_clause
task_input          = "input" colon type
task_output         = "output" colon type
compensated_by      = "compensated_by" colon task_name
# Effect classes (issue 38, docs/restart-and-fork.md): what running the task
# again does; the class is a word, checked against the known ones by the
# checker (E1000) so that a typo gets a located suggestion.
effect_clause       = "effect" colon effect_class

version             = "version" colon version_string
description         = "description" colon description_string
block_close         = "}"

# Workflows ---------------------------------------------------------------
workflow_decl       = workflow_head workflow_items block_close
workflow_head       = "workflow" workflow_name "{"
workflow_items      = workflow_item*
workflow_item       = workflow_member / sep
workflow_member     = version / description / workflow_timeout / workflow_input
                    / workflow_output / step_decl / signal_decl / query_decl
                    / return_member / continue_as_new / limits / on_event / on_outcome
                    / migrate_decl
                    / flow_member
                    / search_fields
                    / workflow_retention
workflow_timeout    = "timeout" colon duration_value
# `retention` (beyond the book, docs/retention.md): how long a finished
# execution of this workflow stays in the database of a server with --retention.
workflow_retention  = "retention" colon duration_value
workflow_input      = "input" record_body
workflow_output     = "output" record_body
signal_decl         = "signal" signal_name record_body
query_decl          = "query" query_name query_sep expression
return_member       = "return" expression
continue_as_new     = "continue_as_new" continue_clauses?
continue_clauses    = continue_with_first / continue_when_first
continue_with_first = continue_with continue_when?
continue_when_first = continue_when continue_with?
continue_with       = "with" colon expression
continue_when       = "when" colon expression
limits              = "limits" "{" limit_items entries_close
limit_items         = limit_item*
limit_item          = entry opt_sep
entry               = entry_name ":" expression
entries_close       = "}"
# Searchable fields (beyond the book: docs/language/visibility.md) --------
search_fields       = "search" "{" search_items entries_close
search_items        = search_item*
search_item         = entry opt_sep
on_outcome          = on_outcome_head handler_items block_close
on_outcome_head     = "on" outcome_kind "{"
on_event            = on_event_head handler_items block_close
on_event_head       = "on" "event" signal_name "{"
handler_items       = handler_item*
handler_item        = step_decl / sep

# Live migration (beyond the book: docs/language/migration.md) --------------
migrate_decl        = migrate_head migrate_items block_close
migrate_head        = "migrate" "from" version_string "in" import_path "{"
migrate_items       = migrate_item*
migrate_item        = migrate_member / sep
migrate_member      = migrate_rename / migrate_remove / migrate_input / migrate_reverse
migrate_rename      = "rename" step_name "to" step_name
migrate_remove      = "remove" step_name
migrate_input       = "input" colon object
migrate_reverse     = "reverse" "{" reverse_items block_close
reverse_items       = reverse_item*
reverse_item        = reverse_member / sep
reverse_member      = migrate_rename / migrate_remove / migrate_input

# Steps -------------------------------------------------------------------
step_decl           = step_head step_items block_close
step_head           = "step" step_name "{"
step_items          = step_item*
step_item           = step_member / sep
step_member         = step_simple_member / compensate / flow_member
compensate          = compensate_head compensate_items block_close
compensate_head     = "compensate" "{"
compensate_items    = compensate_item*
compensate_item     = step_simple_member / sep
step_simple_member  = worker_action / workflow_action / sleep_action / await_action
                    / compute_action / using / after / with_member / step_timeout
                    / queue_timeout / retry / idempotency_key / when_member / for_each
                    / max_parallel
worker_action       = "worker" colon task_name
workflow_action     = "workflow" colon child_name
sleep_action        = "sleep" colon duration_value
await_action        = "await" colon signal_name
compute_action      = "compute" colon expression
using               = "using" colon language
after               = "after" colon step_name after_more*
after_more          = "," step_name
with_member         = "with" colon expression
step_timeout        = "timeout" colon duration_value
queue_timeout       = "queue_timeout" colon duration_value
retry               = "retry" "{" retry_items entries_close
retry_items         = retry_item*
retry_item          = entry opt_sep
idempotency_key     = "idempotency_key" colon expression
when_member         = "when" colon expression
for_each            = "for" loop_variable "in" expression
max_parallel        = "max_parallel" colon expression

# Flow control (beyond the book: docs/language/flow-control.md) -------------
# `concurrency`, `rate`, `fairness` and `debounce` blocks of `name: value`
# entries, like `limits` and `retry`, and `priority: expression`; on a
# workflow and (all but `debounce`) on a step.
flow_member         = flow_block / flow_priority
flow_block          = flow_kind "{" flow_items entries_close
flow_items          = flow_item*
flow_item           = entry opt_sep
flow_priority       = "priority" colon expression

# Tests (chapter 51) -------------------------------------------------------
test_decl           = test_head test_items block_close
test_head           = "test" test_name "{"
test_items          = test_item*
test_item           = test_member / sep
test_member         = test_workflow / version / test_input / mock / test_signal / expect
test_workflow       = "workflow" colon workflow_name
test_input          = "input" colon expression
mock                = "mock" task_name behaviour mock_then*
mock_then           = "times" count "then" behaviour
behaviour           = returns / fails / hangs
returns             = "returns" expression
fails               = "fails" error_code fail_message? retryable?
fail_message        = "<string>"
retryable           = "retryable"
hangs               = "hangs"
test_signal         = "signal" signal_name signal_payload?
signal_payload      = sl expression
expect              = "expect" expectation
expectation         = expect_status / expect_output / expect_error / expect_step
                    / expect_compensated / expect_runs
expect_status       = "status" status_name
expect_output       = "output" expression
expect_error        = "error" error_code
expect_step         = "step" step_path step_check
step_path           = step_name step_path_more*
step_path_more      = ":" step_name
step_check          = step_output / step_attempts / status_name
step_output         = "output" expression
step_attempts       = "attempts" count
expect_compensated  = "compensated" step_name
expect_runs         = "runs" count

# Verify blocks (beyond the book: `orbit verify`) ------------------------------
verify_decl         = verify_head verify_items block_close
verify_head         = "verify" test_name "{"
verify_items        = verify_item*
verify_item         = verify_member / sep
verify_member       = test_workflow / version / test_input / invariant
invariant           = "invariant" expectation invariant_when?
invariant_when      = "when" expectation invariant_and*
invariant_and       = "and" expectation

# Expressions (chapter 26) ---------------------------------------------------
expression_body     = operand binary_tail*
binary_tail         = binary_op operand
operand             = prefix_ops postfix
postfix             = primary postfix_op*
postfix_op          = &postfix_start postfix_suffix
postfix_suffix      = member_suffix / index_suffix
member_suffix       = dot member_name
index_suffix        = open_bracket expression index_close
index_close         = "]"
primary             = literal / named / object / list / paren / if_expr
named               = ref_name named_tail?
named_tail          = lambda_tail / call_tail
lambda_tail         = arrow expression
call_tail           = open_paren arguments arguments_close
arguments           = argument_list?
argument_list       = expression argument_more* opt_comma
argument_more       = "," expression
arguments_close     = ")"
object              = "{" object_items object_close
object_items        = object_item*
object_item         = object_entry opt_sep
object_entry        = object_key ":" expression
object_key          = member_name / "<string>"
object_close        = "}"
list                = "[" list_items list_close
list_items          = list_item*
list_item           = expression opt_comma
list_close          = "]"
if_expr             = "if" expression "then" expression "else" expression
paren               = "(" expression paren_close
paren_close         = ")"

eof                 = "<eof>"
"""

# What a message says was expected when the named rule (or, for unnamed
# terminals, the token type) is the last thing that failed at the furthest
# position the parser reached.
EXPECTATIONS: dict[str, str] = {
    "schema_name": "a schema name",
    "workflow_name": "a workflow name",
    "step_name": "a step name",
    "signal_name": "a signal name",
    "query_name": "a query name",
    "field_name": "a field name",
    "entry_name": "a name",
    "loop_variable": "a loop variable",
    "language": "a worker language",
    "status_name": "a status",
    "member_name": "a field name",
    "ref_name": "an expression",
    "task_name": "a task name (a string)",
    "effect_class": "an effect class (`idempotent`, `compensable`, `once` or `pure`)",
    "child_name": "a workflow name (a string)",
    "import_path": "a file path (a string)",
    "test_name": "a test name (a string)",
    "version_string": "a version string",
    "description_string": "a description string",
    "error_code": "an error code (a string)",
    "count": "an integer",
    "record_close": "a field name or `}`",
    "object_close": "a field name or `}`",
    "entries_close": "a name or `}`",
    "list_close": "`,` or `]`",
    "arguments_close": "`,` or `)`",
    "index_close": "`]`",
    "paren_close": "`)`",
    "type_close": "`>`",
    "base_type": "a type",
    "type_name": "a type",
    "primary": "an expression",
    "duration_value": "a duration",
    "literal": "an expression",
    "outcome_kind": "`failure`, `cancel`, `timeout` or `event`",
    "expectation": "`status`, `output`, `error`, `step`, `compensated` or `runs`",
    "behaviour": "`returns`, `fails` or `hangs`",
    "step_check": "a status, `output` or `attempts`",
    "<string>": "a string",
    "<int>": "an integer",
    "<float>": "a number",
    "<duration>": "a duration",
    "<eof>": "end of file",
}

# Copies of the identifier rule under role names, so that messages can say
# "a step name" rather than "an identifier".
_IDENT_ROLES = (
    "schema_name",
    "workflow_name",
    "step_name",
    "signal_name",
    "query_name",
    "field_name",
    "entry_name",
    "loop_variable",
    "language",
    "status_name",
    "member_name",
)
_STRING_ROLES = (
    "task_name",
    "child_name",
    "import_path",
    "test_name",
    "version_string",
    "description_string",
    "error_code",
)


def _ident(tokens: Sequence[Token], pos: int) -> int | None:
    # Words are typed by their own text; every other token type starts with
    # punctuation or `<`.
    text = tokens[pos].type
    if (text[0].isalpha() or text[0] == "_") and text not in RESERVED:
        return pos + 1
    return None


def _type_name(tokens: Sequence[Token], pos: int) -> int | None:
    # `List<` and `Map<` start generic types; a bare `List` is a (bad) name.
    if tokens[pos].type in ("List", "Map") and tokens[pos + 1].type == "<":
        return None
    return _ident(tokens, pos)


def _postfix_start(tokens: Sequence[Token], pos: int) -> int | None:
    token = tokens[pos]
    return pos if token.type in (".", "[") and not token.nl_before else None


def _ref_name(tokens: Sequence[Token], pos: int) -> int | None:
    if tokens[pos].type == "if":
        return None
    return _ident(tokens, pos)


def _same_line(tokens: Sequence[Token], pos: int) -> int | None:
    return None if tokens[pos].nl_before else pos


def _same_line_token(type_: str) -> TokenRule:
    """A postfix `.`, `[` or `(`, or a lambda's `=>`: on its operand's line."""

    def rule(tokens: Sequence[Token], pos: int) -> int | None:
        token = tokens[pos]
        return pos + 1 if token.type == type_ and not token.nl_before else None

    return rule


def _prefix_ops(tokens: Sequence[Token], pos: int) -> int | None:
    while tokens[pos].type in ("!", "-"):
        pos += 1
    return pos


def _one_of(types: frozenset[str]) -> TokenRule:
    def rule(tokens: Sequence[Token], pos: int) -> int | None:
        return pos + 1 if tokens[pos].type in types else None

    return rule


def _optional(types: frozenset[str]) -> TokenRule:
    def rule(tokens: Sequence[Token], pos: int) -> int | None:
        return pos + 1 if tokens[pos].type in types else pos

    return rule


def _optional_marks(tokens: Sequence[Token], pos: int) -> int | None:
    while tokens[pos].type == "?":
        pos += 1
    return pos


def _binary_op(tokens: Sequence[Token], pos: int) -> int | None:
    token = tokens[pos]
    if token.type in BINARY_OPERATORS:
        # RULINGS §1: only `-` must stay on the line of its left operand; a
        # line that starts with `-` begins a new expression.
        if token.type == "-" and token.nl_before:
            return None
        return pos + 1
    return None


# The token-class rules named in RULES but written in Python: each is one
# check on one token, where the rule syntax would try a dozen alternatives.
BINARY_OPERATORS = frozenset(
    {"||", "&&", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%"}
)
_TOKEN_CLASSES: dict[str, TokenRule] = {
    "binary_op": _binary_op,
    "prefix_ops": _prefix_ops,
    "dot": _same_line_token("."),
    "open_bracket": _same_line_token("["),
    "open_paren": _same_line_token("("),
    "arrow": _same_line_token("=>"),
    "literal": _one_of(
        frozenset({"<string>", "<int>", "<float>", "<duration>", "true", "false", "null"})
    ),
    "duration_value": _one_of(frozenset({"<duration>", "<int>", "<float>"})),
    "outcome_kind": _one_of(frozenset({"failure", "cancel", "timeout"})),
    "flow_kind": _one_of(frozenset({"concurrency", "rate", "fairness", "debounce"})),
    "sep": _one_of(frozenset({",", ";"})),
    "opt_sep": _optional(frozenset({",", ";"})),
    "opt_comma": _optional(frozenset({","})),
    "colon": _optional(frozenset({":"})),
    "query_sep": _optional(frozenset({"=", ":"})),
    "optional_marks": _optional_marks,
    "sl": _same_line,
    "postfix_start": _postfix_start,
    "type_name": _type_name,
    "ref_name": _ref_name,
    "count": _one_of(frozenset({"<int>"})),
}


# The rules through which all nesting passes (see orbit_lang.syntax.nesting):
# each is a counting custom rule around the `<name>_body` written in RULES.
NESTING_RULES = ("expression", "type")


def _build() -> TokenGrammar:
    custom: dict[str, Callable[..., object]] = dict.fromkeys(_IDENT_ROLES, _ident)
    custom.update(dict.fromkeys(_STRING_ROLES, _one_of(frozenset({"<string>"}))))
    # Effect classes (issue 38): any word; the checker knows the classes.
    custom["effect_class"] = _ident
    custom.update(_TOKEN_CLASSES)
    custom.update({name: counted(f"{name}_body") for name in NESTING_RULES})
    return TokenGrammar(RULES, **custom)


GRAMMAR = _build()
