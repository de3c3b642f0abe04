"""Flow-control declarations as text, from the IR (`orbit docs`, `orbit
graph`, `orbit diff`, `orbit compat`): each declaration written the way the source writes
it, settings in a fixed order, so two versions compare line by line."""

from __future__ import annotations

from orbit_core.ir.definition import Flow
from orbit_core.ir.printer import render_expr

_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000))


def duration(ms: int) -> str:
    """A duration literal: the largest unit that divides it."""
    for unit, size in _UNITS:
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def flow_parts(flow: Flow | None) -> list[str]:
    """`concurrency { max: 2, key: input.customer_id }`, `priority: ...`, ..."""
    if flow is None:
        return []
    parts: list[str] = []
    if flow.concurrency is not None:
        settings = [f"max: {flow.concurrency.limit}"]
        if flow.concurrency.key is not None:
            settings.append(f"key: {render_expr(flow.concurrency.key)}")
        parts.append(_block("concurrency", settings))
    if flow.rate is not None:
        rate = flow.rate
        settings = [f"max: {rate.limit}", f"per: {duration(rate.period_ms)}"]
        if rate.burst is not None:
            settings.append(f"burst: {rate.burst}")
        if rate.key is not None:
            settings.append(f"key: {render_expr(rate.key)}")
        if rate.on_exceed != "wait":
            settings.append(f"on_exceed: {rate.on_exceed}")
        parts.append(_block("rate", settings))
    if flow.priority is not None:
        parts.append(f"priority: {render_expr(flow.priority)}")
    if flow.fairness is not None:
        settings = [f"key: {render_expr(flow.fairness.key)}"]
        if flow.fairness.weight is not None:
            settings.append(f"weight: {render_expr(flow.fairness.weight)}")
        parts.append(_block("fairness", settings))
    if flow.debounce is not None:
        debounce = flow.debounce
        settings = [f"period: {duration(debounce.period_ms)}"]
        if debounce.max_wait_ms is not None:
            settings.append(f"max_wait: {duration(debounce.max_wait_ms)}")
        if debounce.key is not None:
            settings.append(f"key: {render_expr(debounce.key)}")
        parts.append(_block("debounce", settings))
    return parts


def flow_text(flow: Flow | None) -> str | None:
    """The declarations on one line (`; ` between them), or None."""
    parts = flow_parts(flow)
    return "; ".join(parts) if parts else None


def _block(name: str, settings: list[str]) -> str:
    return f"{name} {{ {', '.join(settings)} }}"
