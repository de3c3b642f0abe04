"""`urls.redact`: the one function that hides PostgreSQL passwords."""

from __future__ import annotations

import pytest

from orbit_store.urls import is_postgres, password_of, redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "postgres://orbit:secret@db.internal:5432/orbit?sslmode=require",
            "postgres://orbit:***@db.internal:5432/orbit?sslmode=require",
        ),
        ("postgresql://u:p%40ss%3A@h/db", "postgresql://u:***@h/db"),
        # An unencoded @ in the password: hidden whole, not split where libpq would.
        ("postgres://u:a@b@h:1/d", "postgres://u:***@h:1/d"),
        (
            "postgres://h/db?password=x&sslmode=disable",
            "postgres://h/db?password=***&sslmode=disable",
        ),
        ("postgres://h?password=x&a=1", "postgres://h?password=***&a=1"),
        ("postgres://u@h/d", "postgres://u@h/d"),
        ("POSTGRES://u:pw@h/d", "POSTGRES://u:***@h/d"),
        (
            'error db="postgres://u:pw@h/d" and postgresql://v:qq@k/e.',
            'error db="postgres://u:***@h/d" and postgresql://v:***@k/e.',
        ),
        ("orbit.db", "orbit.db"),
    ],
)
def test_urls_in_text_lose_their_passwords(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_a_bare_password_of_the_given_url_is_hidden_in_both_spellings() -> None:
    url = "postgresql://u:p%40ss@h/db?password=zz"
    message = "auth failed for p@ss (p%40ss) then zz"
    assert redact(message, url) == "auth failed for *** (***) then ***"
    assert redact(url, url) == "postgresql://u:***@h/db?password=***"


def test_passwords_and_schemes() -> None:
    assert password_of("postgres://u:p%2Fw@h/d") == "p/w"
    assert password_of("postgres://u@h/d?password=a%26b") == "a&b"
    assert password_of("postgres://h/d") is None
    assert is_postgres("postgresql://h/d") and is_postgres("postgres://h")
    assert not is_postgres("orbit.db") and not is_postgres("/var/postgres://x")
