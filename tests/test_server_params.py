"""Integer query parameters and headers (issue 11 #9): ASCII digits only.

`?limit=%C2%B2` (a superscript two) used to pass `str.isdigit` and crash
`int`: 500. Every integer parameter of chapter 67 now answers a bad value
with the HTTP layer's plain-text 400, through the WSGI app on a SQLite
engine (the store a real server uses), and a value in range still works.
"""

from __future__ import annotations

from collections.abc import Iterator

import falcon.testing
import pytest
import server_ir
from hypothesis import given
from hypothesis import strategies as st

from orbit_core.engine import Engine
from orbit_server.app import create_app
from orbit_server.config import Address, ServerConfig
from orbit_server.params import MAX, NotANumber, non_negative
from orbit_store.sqlite import SqliteStore

ROUTES = (
    ("/v1/executions", "limit"),
    ("/v1/executions/r-1/history", "run"),
    ("/v1/executions/r-1/wait", "timeout_ms"),
)
BAD = (
    ("%C2%B2", "invalid digit found in string"),  # superscript two
    ("%C2%B9%C2%B3", "invalid digit found in string"),  # superscripts
    ("%D9%A3", "invalid digit found in string"),  # Arabic-Indic three
    ("%EF%BC%95", "invalid digit found in string"),  # fullwidth five
    ("%F0%9D%9F%98", "invalid digit found in string"),  # mathematical zero
    ("1_000", "invalid digit found in string"),
    ("%2B5", "invalid digit found in string"),
    ("%205", "invalid digit found in string"),
    ("5%20", "invalid digit found in string"),
    ("-1", "invalid digit found in string"),
    ("0x10", "invalid digit found in string"),
    ("1e3", "invalid digit found in string"),
    ("1.0", "invalid digit found in string"),
    ("%00", "invalid digit found in string"),
    ("9" * 5000, "number too large to fit in target type"),
    (str(MAX + 1), "number too large to fit in target type"),
    ("99999999999999999999", "number too large to fit in target type"),
)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[falcon.testing.TestClient]:
    engine = Engine(SqliteStore(tmp_path_factory.mktemp("params") / "orbit.db"))
    try:
        engine.deploy(server_ir.review())
        engine.start("Review", input={"order_id": "o"}, execution_id="r-1")
        yield falcon.testing.TestClient(create_app(engine, ServerConfig()))
    finally:
        engine.close()


@pytest.mark.parametrize(("path", "name"), ROUTES)
@pytest.mark.parametrize(("value", "detail"), BAD)
def test_bad_integers_are_400_in_plain_text(
    client: falcon.testing.TestClient, path: str, name: str, value: str, detail: str
) -> None:
    reply = client.simulate_get(path, query_string=f"{name}={value}")
    assert reply.status_code == 400
    assert reply.headers["content-type"].startswith("text/plain")
    assert reply.text == f"Failed to deserialize query string: {name}: {detail}"


def test_good_integers_still_work(client: falcon.testing.TestClient) -> None:
    assert client.simulate_get("/v1/executions", query_string="limit=007").json["executions"]
    assert client.simulate_get("/v1/executions", query_string="limit=").status_code == 200
    history = client.simulate_get("/v1/executions/r-1/history", query_string="run=1")
    assert (history.status_code, history.json["run"]) == (200, 1)
    for run in ("0", "2", str(MAX)):
        reply = client.simulate_get("/v1/executions/r-1/history", query_string=f"run={run}")
        assert (reply.status_code, reply.json["error"]["code"]) == (404, "RUN_NOT_FOUND"), run
    assert (
        client.simulate_get("/v1/executions/r-1/wait", query_string="timeout_ms=0").json["status"]
        == "RUNNING"
    )


@pytest.mark.parametrize(
    "length", ["%C2%B2", "\u00b2", "1_0", "+1", "0x1", "9" * 5000, str(MAX + 1), "-1"]
)
def test_bad_content_lengths_are_400(client: falcon.testing.TestClient, length: str) -> None:
    # Straight into the WSGI app: the test client's validator refuses such
    # environs before the app could.
    environ = falcon.testing.create_environ(
        "/v1/workflows", method="POST", headers={"content-type": "application/json"}
    )
    environ["CONTENT_LENGTH"] = length
    answer = falcon.testing.StartResponseMock()
    body = b"".join(client.app(environ, answer))
    assert answer.status is not None and answer.status.startswith("400 ")
    assert body.startswith(b"invalid `content-length` header: ")


@given(st.text(max_size=30))
def test_only_ascii_digit_strings_are_numbers(text: str) -> None:
    try:
        value = non_negative(text)
    except NotANumber:
        assert not (text and text.isascii() and text.isdigit() and int(text) <= MAX)
    else:
        assert text.isascii() and text.isdigit() and value == int(text) <= MAX


@pytest.mark.parametrize("port", ["\u0667\u0662\u0663\u0663", "\u00b2", "\uff17\uff12"])
def test_listen_ports_are_ascii_digits_too(port: str) -> None:
    with pytest.raises(ValueError, match="is not an ip:port address"):
        Address.parse(f"127.0.0.1:{port}")
