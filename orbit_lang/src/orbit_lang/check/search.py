"""Checks a workflow's `search { name: expression }` block (docs/language/visibility.md).

Each entry names a field the runtime writes to its search index in the
commit of the event that makes the value known: the workflow's start for an
expression over `input`, the completion of a step for one over that step's
output. The expression is checked like a `return` (steps read as their
output, not as possibly absent), since the value is only computed once every
step it reads has succeeded.

Codes (E1300..E1339 belong to visibility):

- E1300 a field is declared twice;
- E1301 the expression's type is not one the index can hold (String, Int,
  Float, Bool, Timestamp, UUID, or an optional of one);
- E1302 the name is one of the filter language's built-in fields;
- E1303 more fields than `MAX_SEARCH_FIELDS`.
"""

from __future__ import annotations

from orbit_core.ir import SearchField
from orbit_core.ir.types import OptionalType, Primitive
from orbit_lang import ast
from orbit_lang.check.env import Env
from orbit_lang.check.expressions import ExprChecker
from orbit_lang.check.report import Reporter, first_declared
from orbit_lang.check.types import render, to_ir

# The kinds of value the index holds (orbit_core.visibility.fields).
SEARCHABLE = ("string", "int", "float", "bool", "timestamp", "uuid")
# Names the filter language gives its own meaning (orbit_core.visibility.filter).
BUILT_IN = ("status", "workflow", "version", "started", "ended", "waiting_for")
MAX_SEARCH_FIELDS = 32


def check_search(member: ast.Search, env: Env, report: Reporter) -> tuple[SearchField, ...]:
    fields: list[SearchField] = []
    first: dict[str, ast.Setting] = {}
    for setting in member.settings:
        name = setting.name.name
        if name in first:
            report.error(
                "E1300",
                f"search field `{name}` is declared more than once",
                setting.name.span,
                labels=[first_declared(first[name].name.span)],
                help="keep one of them, or rename one",
            )
            continue
        first[name] = setting
        if name in BUILT_IN:
            report.error(
                "E1302",
                f"`{name}` is a built-in search field and cannot be declared",
                setting.name.span,
                help="built-in fields are "
                + ", ".join(f"`{b}`" for b in BUILT_IN)
                + "; choose another name",
            )
            continue
        before = report.error_count
        typed = ExprChecker(report, env).infer(setting.value)
        if report.error_count > before:
            continue  # the expression's own diagnostic says enough
        type_ = to_ir(typed.type)
        scalar = type_.type if isinstance(type_, OptionalType) else type_
        if not (isinstance(scalar, Primitive) and scalar.kind in SEARCHABLE):
            report.error(
                "E1301",
                f"search field `{name}` has type `{render(typed.type)}`, which cannot be searched",
                setting.value.span,
                help="a search field is a String, Int, Float, Bool, Timestamp or UUID "
                "(optional or not); pick a field of a record or list",
            )
            continue
        fields.append(SearchField(name, typed.ir, type_))
    if len(fields) > MAX_SEARCH_FIELDS:
        report.error(
            "E1303",
            f"a workflow declares at most {MAX_SEARCH_FIELDS} search fields, "
            f"this one declares {len(fields)}",
            member.keyword,
            help="keep the fields you filter by",
        )
    return tuple(fields)
