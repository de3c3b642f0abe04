"""The PostgreSQL store against real servers: URLs and credentials, TLS as
`sslmode` says, a database that goes away and comes back, schema versions
(on SQLite too), and the engine on PostgreSQL."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "orbit_core" / "tests"))

import pgkit
from test_store_recovery import one_task, start_from_threads

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.errors import StorageError
from orbit_core.ports import CommitBatch, ExecutionChange, ExecutionRow, Store
from orbit_store import schema
from orbit_store.pg_arrays import Int8s, Texts
from orbit_store.postgres import PostgresStore
from orbit_store.sql import Disconnected, SqlStore
from orbit_store.sqlite import SqliteStore

pytestmark = pytest.mark.postgres


def row(eid: str, last: int = 2) -> ExecutionRow:
    return ExecutionRow(eid, "Wf", "1.0.0", "sha256:x", "RUNNING", 1000, 1000, last)


def start(store: Store, eid: str) -> None:
    created = ev.WorkflowCreated(1, 1000, "Wf", "1.0.0", "sha256:x", {}, None, None, None)
    store.commit(
        CommitBatch(
            executions=[
                ExecutionChange(eid, row(eid), [created, ev.WorkflowStarted(2, 1000)], new=True)
            ]
        )
    )


def step_on(store: Store, eid: str, seq: int) -> None:
    store.commit(
        CommitBatch(
            executions=[
                ExecutionChange(
                    eid, row(eid, seq), [ev.StepScheduled(seq, 1000, "a", 1, {}, "k", False)]
                )
            ]
        )
    )


def test_the_commit_statements_arrays_reach_postgresql_as_sent(pg_url: str) -> None:
    """`pg_arrays`' binary dumpers, on the store's own connections: NULLs,
    non-ASCII and control characters, JSON text, the int8 extremes, empty."""
    store = PostgresStore(pg_url)
    try:
        with store.engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None
            texts = Texts(["x", None, "é\u2603\x1f", "", '{"a": [1]}'])
            int8s = Int8s([0, -1, 2**62, -(2**63), 2**63 - 1])
            row = raw.execute(
                "SELECT %b::text[], %b::bigint[], %b::text[], %b::bigint[]",
                (texts, int8s, Texts(), Int8s()),
            ).fetchone()
            assert row == (list(texts), list(int8s), [], [])
    finally:
        store.close()


# ---- URLs, credentials, bad input


def test_percent_encoded_passwords_and_both_schemes(pg_server: pgkit.Cluster) -> None:
    name = pg_server.create_database()
    for scheme in ("postgres", "postgresql"):
        url = pg_server.url(name).replace("postgres://", f"{scheme}://", 1)
        assert pgkit.PASSWORD not in url  # the fixture's password needs encoding
        store = PostgresStore(url)
        start(store, f"e-{scheme}")
        store.close()


def test_libpq_parameters_in_the_query(pg_server: pgkit.Cluster) -> None:
    url = pg_server.url(pg_server.create_database(), application_name="orbit-test-app")
    store = PostgresStore(url)
    found = store._read(
        lambda conn: conn.exec_driver_sql("SELECT current_setting('application_name')").scalar()
    )
    assert found == "orbit-test-app"
    store.close()


def _refusal(url: str, **kwargs: Any) -> str:
    with pytest.raises(StorageError) as info:
        PostgresStore(url, **kwargs)
    message = info.value.message
    assert "\n" not in message
    assert pgkit.PASSWORD not in message and "secret" not in message
    return message


def test_bad_urls_credentials_and_servers_are_one_clear_line(pg_server: pgkit.Cluster) -> None:
    name = pg_server.create_database()
    port = pg_server.port
    wrong = pgkit.url("127.0.0.1", port, name, password="secret")
    assert _refusal(wrong) == (
        f"cannot connect to PostgreSQL at postgres://orbit:***@127.0.0.1:{port}/{name}: "
        'connection failed: connection to server at "127.0.0.1", '
        f'port {port} failed: FATAL: password authentication failed for user "orbit"'
    )
    refused = _refusal(f"postgres://orbit:secret@127.0.0.1:{pgkit.free_port()}/db")
    assert refused.startswith("cannot connect to PostgreSQL at postgres://orbit:***@127.0.0.1:")
    assert "Connection refused" in refused
    assert _refusal("postgres://orbit:secret@127.0.0.1/db?nonsense=1") == (
        "invalid PostgreSQL URL postgres://orbit:***@127.0.0.1/db?nonsense=1: "
        'invalid URI query parameter: "nonsense"'
    )
    assert "invalid integer value" in _refusal("postgres://orbit:secret@127.0.0.1:port/db")
    assert _refusal("postgres://orbit:secret@h/db?sslmode=verify-ca").startswith(
        "invalid PostgreSQL URL postgres://orbit:***@h/db?sslmode=verify-ca: "
        "sslmode=verify-ca is not supported; use disable, prefer or require"
    )
    missing = _refusal(pg_server.url(name), ca_cert="/nonexistent/ca.pem")
    assert missing.startswith("cannot use ORBIT_DB_CA_CERT=/nonexistent/ca.pem for postgres://")


# ---- TLS


@pytest.fixture(scope="module")
def tls_server() -> Iterator[pgkit.Cluster]:
    yield from pgkit.own_cluster(ssl=True)


def _uses_tls(store: PostgresStore) -> bool:
    return bool(
        store._read(
            lambda conn: conn.exec_driver_sql(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
            ).scalar()
        )
    )


def test_tls_is_used_only_with_a_verified_certificate(tls_server: pgkit.Cluster) -> None:
    name = tls_server.create_database()
    ca = str(tls_server.ca_path)
    for mode in ("prefer", "require"):
        # libpq's prefer would take the self-signed certificate; ORBIT never does.
        message = _refusal(tls_server.url(name, sslmode=mode))
        assert "certificate verify failed" in message, message
        store = PostgresStore(tls_server.url(name, sslmode=mode), ca_cert=ca)
        assert _uses_tls(store)
        store.close()
    store = PostgresStore(tls_server.url(name), ca_cert=ca)  # prefer is the default
    assert _uses_tls(store)
    store.close()
    store = PostgresStore(tls_server.url(name, sslmode="disable"))
    assert not _uses_tls(store)
    store.close()
    # The host name is checked too: connect to 127.0.0.1 under a name the
    # certificate does not carry.
    misnamed = tls_server.url(name, sslmode="require", hostaddr="127.0.0.1")
    misnamed = misnamed.replace("@127.0.0.1:", "@db.invalid:")
    assert 'does not match host name "db.invalid"' in _refusal(misnamed, ca_cert=ca)


def test_without_tls_on_the_server_prefer_goes_plain_and_require_refuses(
    pg_server: pgkit.Cluster,
) -> None:
    name = pg_server.create_database()
    store = PostgresStore(pg_server.url(name, sslmode="prefer"))
    assert not _uses_tls(store)
    store.close()
    assert "server does not support SSL" in _refusal(pg_server.url(name, sslmode="require"))


def test_a_ca_file_without_certificates_is_refused(
    pg_server: pgkit.Cluster, tmp_path: Path
) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    assert "holds no PEM certificate" in _refusal(
        pg_server.url(pg_server.create_database()), ca_cert=str(bad)
    )


# ---- a database that goes away and comes back


@pytest.fixture
def own_server() -> Iterator[pgkit.Cluster]:
    yield from pgkit.own_cluster()


def test_a_stopped_database_fails_calls_and_a_restarted_one_is_reconnected(
    own_server: pgkit.Cluster,
) -> None:
    store = PostgresStore(own_server.url(own_server.create_database()))
    notices: list[str] = []
    store.on_notice = notices.append
    start(store, "d-1")
    assert store.history("d-1") is not None
    own_server.stop()
    with pytest.raises(StorageError) as info:
        step_on(store, "d-1", 3)
    assert info.value.message.startswith("cannot connect to PostgreSQL at postgres://orbit:***@")
    with pytest.raises(StorageError):
        store.history("d-1")
    assert store.write_problem() is not None
    own_server.start()
    # The first statement after the restart already succeeds: the dead
    # connection is replaced before it.
    step_on(store, "d-1", 3)
    history = store.history("d-1")
    assert history is not None and [e.seq for e in history] == [1, 2, 3]
    assert notices and set(notices) == {"reconnected to PostgreSQL"}
    assert store.write_problem() is None
    store.close()


def test_a_connection_killed_between_commits_is_replaced_without_an_error(
    pg_server: pgkit.Cluster,
) -> None:
    name = pg_server.create_database()
    store = PostgresStore(pg_server.url(name))
    start(store, "k-1")
    assert store.execution_row("k-1") is not None
    pg_server.sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
    )
    step_on(store, "k-1", 3)  # the write connection was dead: retried on a new one
    assert store.execution_row("k-1") == row("k-1", 3)  # and the read connection too
    store.close()


class _CutAtCommit:
    """A DBAPI connection whose COMMIT (or, in autocommit mode, the one
    statement that is the transaction) is followed (or preceded) by the loss
    of the connection, as when the server dies at that moment."""

    def __init__(self, raw: Any, lands: bool) -> None:
        object.__setattr__(self, "_raw", raw)
        object.__setattr__(self, "_lands", lands)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._raw, name, value)

    def commit(self) -> None:
        if self._lands:
            self._raw.commit()
        self._cut()

    def cursor(self) -> Any:
        cursor = self._raw.cursor()
        outer = self

        class Cut:
            def __getattr__(self, name: str) -> Any:
                return getattr(cursor, name)

            def execute(self, *args: Any) -> Any:
                if not outer._raw.autocommit:
                    return cursor.execute(*args)
                if outer._lands:
                    cursor.execute(*args)
                outer._cut()

        return Cut()

    def _cut(self) -> None:
        self._raw.close()  # without a COMMIT, the server rolls back
        raise psycopg.OperationalError("server closed the connection unexpectedly")


@pytest.mark.parametrize("lands", [True, False])
def test_a_commit_cut_off_by_a_disconnect_is_checked_not_guessed(
    pg_server: pgkit.Cluster, lands: bool, monkeypatch: Any
) -> None:
    store = PostgresStore(pg_server.url(pg_server.create_database()))
    start(store, "c-1")
    link = store._writer
    real = type(link).raw
    calls = iter([True])
    monkeypatch.setattr(
        link, "raw", lambda: _CutAtCommit(real(link), lands) if next(calls, False) else real(link)
    )
    step_on(store, "c-1", 3)  # either way it ends up committed exactly once
    history = store.history("c-1")
    assert history is not None and [e.seq for e in history] == [1, 2, 3]
    store.close()


def test_a_disconnect_on_a_new_connection_is_not_retried(monkeypatch: Any) -> None:
    class Fresh:
        fresh = True

    attempts: list[int] = []

    def attempt() -> None:
        attempts.append(1)
        raise Disconnected("gone")

    from orbit_store.sql import _again_if_lost

    with pytest.raises(Disconnected):
        _again_if_lost(Fresh(), attempt)  # type: ignore[arg-type]
    assert attempts == [1]


# ---- schema versions, on both dialects


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: Any, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return lambda: SqliteStore(tmp_path / "v.db")
    url = request.getfixturevalue("pg_url")
    return lambda: PostgresStore(url)


def test_a_database_of_a_newer_schema_is_refused(opener: Any) -> None:
    store: SqlStore = opener()
    assert store.found_version == 0
    with store.engine.begin() as conn:
        conn.execute(schema.schema_version.update().values(version=schema.SCHEMA_VERSION + 1))
    store.close()
    newer = schema.SCHEMA_VERSION + 1
    with pytest.raises(StorageError) as info:
        opener()
    assert info.value.message.endswith(
        f"the database has schema version {newer}, newer than this server knows "
        f"({schema.SCHEMA_VERSION}); run a release of orbit server that knows it"
    )
    # Refused before anything was written: the version is still the newer one.
    with store.engine.connect() as conn:
        assert conn.execute(select(schema.schema_version.c.version)).all() == [(newer,)]
    store.engine.dispose()


def test_migrations_run_once_in_order(opener: Any, monkeypatch: Any) -> None:
    opener().close()
    ran: list[int] = []

    def step_to(version: int) -> Any:
        return lambda conn: ran.append(version)

    now = schema.SCHEMA_VERSION
    monkeypatch.setattr(schema, "SCHEMA_VERSION", now + 2)
    monkeypatch.setattr(
        schema,
        "MIGRATIONS",
        [*schema.MIGRATIONS, (now + 1, step_to(now + 1)), (now + 2, step_to(now + 2))],
    )
    store = opener()
    assert (store.found_version, ran) == (now, [now + 1, now + 2])
    store.close()
    store = opener()
    assert (store.found_version, ran) == (now + 2, [now + 1, now + 2])
    store.close()


def test_servers_starting_together_prepare_the_schema_one_at_a_time(pg_url: str) -> None:
    opened: list[PostgresStore] = []
    failed: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(PostgresStore(pg_url))
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failed
    now = schema.SCHEMA_VERSION
    assert sorted(s.found_version for s in opened) == [0, now, now, now]
    for store in opened:
        store.close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM schema_version").fetchone() == (1,)


# ---- the engine on PostgreSQL


def test_the_engine_commits_groups_and_recovers_on_postgres(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    engine = Engine(store, handler_threads=2)
    engine.deploy(one_task())
    start_from_threads(engine, 10)
    engine.close()
    # A new process: the 40 executions wait for their task, recovered from history.
    engine = Engine(PostgresStore(pg_url), handler_threads=2)
    assert engine.recovered_executions == 40
    engine.register_handler("demo.work", "1.0.0", lambda i: {"ok": True})
    assert engine.wait("t-3-9", 10_000)["status"] == "COMPLETED"
    engine.close()
    again = PostgresStore(pg_url)
    assert len(again.list_executions(None, None, 1000)) == 40
    assert [(d.name, d.version) for d in again.load_definitions()] == [("Plain", "1.0.0")]
    again.close()


# ---- plans


def test_statements_are_planned_for_their_own_arrays(pg_url: str) -> None:
    """A prepared statement's generic plan takes `unnest` or `= ANY` of an
    array parameter for 10 rows: made while the executions table was small
    (and kept until autovacuum's next ANALYZE), it scanned the whole table
    for every group's update and start check, so PostgreSQL's CPU per step
    grew with the table. The store's connections plan each statement for
    its own arrays."""
    store = PostgresStore(pg_url)
    try:
        for i in range(4):
            start(store, f"small-{i}")
        with store._connect() as conn:
            for i in range(12):
                conn.execute(
                    "SELECT execution_id FROM workflow_executions WHERE execution_id = ANY(%s)",
                    ([f"small-{i % 4}"],),
                    prepare=True,
                )
                conn.execute(
                    "UPDATE workflow_executions AS x SET last_seq = v.last "
                    "FROM unnest(%s::text[], %s::bigint[]) AS v(id, last) "
                    "WHERE x.execution_id = v.id",
                    ([f"small-{i % 4}"], [2]),
                    prepare=True,
                )
            found = conn.execute(
                "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements"
            ).fetchone()
        assert found is not None
        generic, custom = found
        assert (generic, custom) == (0, 24)
    finally:
        store.close()
