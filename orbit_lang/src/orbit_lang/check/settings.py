"""Literal settings: retry policies, timeouts, `max_parallel` (E0410) and
workflow limits (E0320, E0321). Every value must be written as a literal;
the result is what the IR stores, with defaults filled in."""

from __future__ import annotations

from orbit_core.ir import Retry
from orbit_core.ir.definition import LIMIT_NAMES
from orbit_lang import ast
from orbit_lang.check.report import Reporter, did_you_mean, duplicate_member, first_declared

RETRY_SETTINGS = ("attempts", "backoff", "initial_delay", "max_delay", "non_retryable")
DEFAULT_INITIAL_DELAY_MS = 1000
DEFAULT_MAX_DELAY_MS = 60_000
MAX_ATTEMPTS = 1000
MAX_PARALLEL = 10_000


def timeout_ms(duration: ast.DurationLiteral, report: Reporter) -> int | None:
    if duration.milliseconds <= 0:
        report.error("E0410", "timeouts must be greater than zero", duration.span)
        return None
    return duration.milliseconds


def retention_ms(duration: ast.DurationLiteral, report: Reporter) -> int | None:
    """A workflow's `retention` (beyond the book, docs/retention.md)."""
    if duration.milliseconds <= 0:
        report.error(
            "E1400",
            "`retention` must be greater than zero",
            duration.span,
            help="write how long finished executions stay, e.g. `retention 30d`",
        )
        return None
    return duration.milliseconds


def max_parallel(member: ast.MaxParallel, report: Reporter) -> int | None:
    value = member.value
    if isinstance(value, ast.IntLiteral) and 1 <= value.value <= MAX_PARALLEL:
        return value.value
    report.error("E0410", "`max_parallel` must be between 1 and 10000", value.span)
    return None


def retry(member: ast.Retry, report: Reporter) -> Retry | None:
    """The policy of a `retry` block, or None after an error."""
    seen: dict[str, ast.Setting] = {}
    before = report.error_count
    attempts = 1
    backoff = "fixed"
    initial: int | None = None
    maximum: ast.DurationLiteral | None = None
    codes: list[str] = []
    for setting in member.settings:
        name = setting.name.name
        if name not in RETRY_SETTINGS:
            report.error(
                "E0410",
                f"unknown retry setting `{name}`",
                setting.name.span,
                help=did_you_mean(name, RETRY_SETTINGS),
            )
            continue
        first = seen.get(name)
        if first is not None:
            report.error(
                "E0410",
                f"duplicate retry setting `{name}`",
                setting.name.span,
                labels=[first_declared(first.name.span)],
            )
            continue
        seen[name] = setting
        value = setting.value
        if name == "attempts":
            attempts = _attempts(value, report)
        elif name == "backoff":
            backoff = _backoff(value, report)
        elif name == "initial_delay":
            initial = _delay(name, value, report)
        elif name == "max_delay":
            if _delay(name, value, report) is not None:
                assert isinstance(value, ast.DurationLiteral)
                maximum = value
        else:
            codes = _codes(value, report)
    initial_ms = DEFAULT_INITIAL_DELAY_MS if initial is None else initial
    max_ms = max(DEFAULT_MAX_DELAY_MS, initial_ms)
    if maximum is not None:
        if maximum.milliseconds < initial_ms:
            report.error("E0410", "`max_delay` must be at least `initial_delay`", maximum.span)
        max_ms = maximum.milliseconds
    if report.error_count > before:
        return None
    return Retry(attempts, backoff, initial_ms, max_ms, tuple(codes))


def _attempts(value: ast.Expr, report: Reporter) -> int:
    if not isinstance(value, ast.IntLiteral):
        report.error("E0410", "`attempts` must be an integer literal", value.span)
        return 1
    if not 1 <= value.value <= MAX_ATTEMPTS:
        report.error(
            "E0410",
            "`attempts` must be between 1 and 1000",
            value.span,
            notes=["attempts counts every execution, including the first"],
        )
        return 1
    return value.value


def _backoff(value: ast.Expr, report: Reporter) -> str:
    if isinstance(value, ast.Name) and value.name in ("fixed", "exponential"):
        return value.name
    if isinstance(value, ast.Name):
        report.error(
            "E0410",
            f"unknown backoff strategy `{value.name}`",
            value.span,
            help=did_you_mean(value.name, ("fixed", "exponential"))
            or "use `fixed` or `exponential`",
        )
    else:
        report.error("E0410", "`backoff` must be `fixed` or `exponential`", value.span)
    return "fixed"


def _delay(name: str, value: ast.Expr, report: Reporter) -> int | None:
    if isinstance(value, ast.DurationLiteral):
        return value.milliseconds
    report.error("E0410", f"`{name}` must be a duration literal such as `5s`", value.span)
    return None


def _codes(value: ast.Expr, report: Reporter) -> list[str]:
    if not isinstance(value, ast.ListLiteral):
        report.error("E0410", "error codes must be string literals", value.span)
        return []
    codes = []
    for item in value.items:
        if isinstance(item, ast.StringExpr):
            codes.append(item.value)
        else:
            report.error("E0410", "error codes must be string literals", item.span)
    return codes


def limits(member: ast.Limits, report: Reporter) -> dict[str, int]:
    found: dict[str, int] = {}
    seen: dict[str, ast.Setting] = {}
    for setting in member.settings:
        name = setting.name.name
        if name not in LIMIT_NAMES:
            report.error(
                "E0320",
                f"unknown limit `{name}`",
                setting.name.span,
                help=did_you_mean(name, LIMIT_NAMES)
                or "limits are `max_fan_out`, `max_history_events` and `max_payload_bytes`",
            )
            continue
        first = seen.get(name)
        if first is not None:
            duplicate_member(report, name, setting.name.span, first.name.span)
            continue
        seen[name] = setting
        value = setting.value
        if isinstance(value, ast.IntLiteral) and value.value > 0:
            found[name] = value.value
        else:
            report.error(
                "E0321",
                f"limit `{name}` must be a positive integer literal",
                value.span,
                help="for example `max_fan_out: 100`",
            )
    return found
