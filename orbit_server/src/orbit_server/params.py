"""Integers from the request line and headers: one rule for all of them.

A query parameter or header that carries a count, a run number or a duration
is a run of ASCII digits `0`-`9` and nothing else. `str.isdigit` and `int`
are both wider than that (`int` takes `+5`, ` 5`, `1_000` and the digits of
every script; `isdigit` also takes `²`, which `int` then refuses), so values
go through `non_negative` only. The value is capped at 2**63-1, the largest
integer the stores hold, which also keeps `int` from parsing thousands of
digits. Refusals are chapter 67's plain-text 400 of the HTTP layer, with the
wording of the parser the book's server uses.
"""

from __future__ import annotations

import re

import falcon

from orbit_server.errors import HttpError, bad_query

MAX = 2**63 - 1
_DIGITS = re.compile(r"[0-9]+")
_MAX_DIGITS = len(str(MAX))


class NotANumber(ValueError):
    """The text is not a non-negative integer; the message says why."""


def non_negative(text: str) -> int:
    """`text` as a non-negative integer up to `MAX`, or NotANumber."""
    if len(text) < _MAX_DIGITS and text.isascii() and text.isdigit():
        # The usual case, checked cheaply: ASCII digits only, and too few of
        # them to exceed MAX.
        return int(text)
    if not text:
        raise NotANumber("cannot parse integer from empty string")
    if _DIGITS.fullmatch(text) is None:
        raise NotANumber("invalid digit found in string")
    if len(text.lstrip("0")) > _MAX_DIGITS or int(text) > MAX:
        raise NotANumber("number too large to fit in target type")
    return int(text)


def query_int(req: falcon.Request, name: str) -> int | None:
    """An optional non-negative integer query parameter (400 when it is not one)."""
    raw = req.get_param(name)
    if raw is None:
        return None
    try:
        return non_negative(raw)
    except NotANumber as exc:
        raise bad_query(f"{name}: {exc}") from None


def header_int(req: falcon.Request, name: str) -> int | None:
    """An optional non-negative integer header (400 when it is not one)."""
    raw = req.get_header(name)
    if not raw:  # some WSGI servers give an absent Content-Length as ""
        return None
    return header_value_int(name, raw)


def header_value_int(name: str, raw: str) -> int:
    """The value `raw` of header `name` as a non-negative integer (400 when
    it is not one)."""
    try:
        return non_negative(raw.strip(" \t"))
    except NotANumber as exc:
        raise HttpError(400, f"invalid `{name}` header: {exc}") from None
