"""The PostgreSQL store: the dialect-neutral `SqlStore` on psycopg 3.

The URL is a libpq connection URI and libpq itself reads it (psycopg hands
it over as is): `postgres://` or `postgresql://`, percent-encoded userinfo,
several hosts, any libpq parameter in the query. It is checked when the
store is made, so a malformed URL fails at once, naming the URL with its
password hidden (`urls.redact`, as in every message this module makes).

TLS follows `sslmode`, with the book's meaning rather than libpq's: TLS is
only ever used with a verified certificate (libpq's `verify-full`: chain and
host name), trusting the public web PKI roots (certifi's bundle) plus every
certificate in the PEM file `ca_cert` names (ORBIT_DB_CA_CERT):

- `disable`: never TLS;
- `prefer` (the default): TLS when the server offers it; a server that does
  not offer it is used in plain text, but one that offers a certificate that
  cannot be verified is refused, never used;
- `require`: TLS or nothing.

Writes go through one connection and reads through another (autocommit, so
a read costs no BEGIN or ROLLBACK round trips). The usual group (history
appends, new and changed projection rows) is written by ONE statement in
autocommit mode, a data-modifying WITH fed binary arrays through `unnest`:
it is its own transaction, one message and one reply. Other groups
(definitions, worker rows, continue-as-new moves, a fenced store) are a
transaction sent in pipeline mode (BEGIN, statements, COMMIT in one round
trip), where 8 rows or more of a table go as one array-fed statement and
fewer as pipelined single-row statements. `execution_hashes` answers the ids of a group's starts with one
`= ANY(array)` query. A lost connection is
replaced on next use (`SqlStore` tries a statement once more on a new
connection; the pool pings a connection before handing it out), and the
store's `notice` reports "reconnected to PostgreSQL". Servers starting
together on one database create the schema one at a time (an advisory lock
in `schema.prepare`).

Fenced mode (`fence_term`, the store of a cluster's leader, chapter 44):
every write transaction first reads the `orbit_cluster` row with `FOR
SHARE` and aborts with `Fenced` unless its term is still the one this
server was elected with. The row lock orders a write and an election: the
next leader's term increment waits for a write in progress, and a write that
starts after it sees the new term. So a deposed leader (paused, cut off)
cannot commit anything once a successor exists, whatever it believes. Its
sessions also end a transaction left open for `IDLE_IN_TRANSACTION_MS`, so a
leader frozen inside a write cannot hold the successor's increment for ever.
`session()` opens a plain autocommit connection with the store's URL and TLS
rules (the election session of `orbit_store.cluster`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import certifi
import psycopg
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import Connection, create_engine
from sqlalchemy.pool import QueuePool

from orbit_core.errors import StorageError
from orbit_store import pg_arrays, search
from orbit_store.pg_arrays import Float8s, Int8s, Texts
from orbit_store.sql import SqlStore, _Link
from orbit_store.urls import is_postgres, redact

T = TypeVar("T")
# psycopg warns through `logging` when it cannot close a pipeline or COPY on a
# lost connection; with no handler configured, Python would print that raw to
# stderr, in the middle of the server's log. The store's failures reach its
# callers as StorageError (which the server logs once, redacted), so psycopg's
# own lines get a handler that drops them unless the application adds one.
logging.getLogger("psycopg").addHandler(logging.NullHandler())
SSLMODES = ("disable", "prefer", "require")
CONNECT_TIMEOUT_S = 10
# Bulk statements for at least this many rows of a group; fewer go as
# single-row statements (one prepared statement, pipelined).
_BULK_FROM = 8
# The bulk statements take one array per column, sent in binary (no quoting
# of the JSON payloads), so each is one prepared statement whatever the
# number of rows. (COPY is not allowed in pipeline mode.)
INSERT_EVENTS = (
    "INSERT INTO execution_events (execution_id, seq, event_type, step, payload, timestamp_ms) "
    "SELECT * FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::text[], %b::text[], "
    "%b::bigint[])"
)
INSERT_ROWS = (
    "INSERT INTO workflow_executions (execution_id, workflow, version, definition_hash, status, "
    "created_at_ms, updated_at_ms, last_seq) "
    "SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], "
    "%b::bigint[], %b::bigint[], %b::bigint[])"
)
UPDATE_ROWS = (
    "UPDATE workflow_executions AS x SET status = v.status, created_at_ms = v.created, "
    "updated_at_ms = v.updated, last_seq = v.last "
    "FROM unnest(%b::text[], %b::text[], %b::bigint[], %b::bigint[], %b::bigint[]) "
    "AS v(id, status, created, updated, last) WHERE x.execution_id = v.id"
)
# The usual group (appends, new and changed projection rows) as one
# statement: in autocommit mode it is its own transaction, so the group costs
# one message and one reply, with no BEGIN or COMMIT. The parts touch
# different rows (a group's executions are either new or changed), so that
# they share one snapshot does not matter.
_GROUP = f"WITH e AS ({INSERT_EVENTS}), n AS ({INSERT_ROWS}) {UPDATE_ROWS}"
# The group's search rows (orbit_store.search), upserted by the same
# statement: a group with search fields keeps the one round trip. Its rows
# are one per (execution, field) (`search.latest`), as one upsert
# statement may touch a row only once.
UPSERT_SEARCH = (
    "INSERT INTO orbit_search_values (execution_id, field_id, str_value, num_value) "
    "SELECT * FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::float8[]) "
    "ON CONFLICT (execution_id, field_id) DO UPDATE SET "
    "str_value = excluded.str_value, num_value = excluded.num_value"
)
_GROUP_SEARCH = (
    f"WITH e AS ({INSERT_EVENTS}), n AS ({INSERT_ROWS}), s AS ({UPSERT_SEARCH}) {UPDATE_ROWS}"
)
_HASHES = (
    "SELECT execution_id, definition_hash FROM workflow_executions "
    "WHERE execution_id = ANY(%b::text[])"
)
# What libpq says when verify-full meets a server without TLS.
_NO_TLS = "does not support SSL"
# A fenced store's sessions abort a transaction idle this long.
IDLE_IN_TRANSACTION_MS = 5000
_FENCE = "SELECT term FROM orbit_cluster WHERE id = 1 FOR SHARE"


class Fenced(StorageError):
    """A fenced store's write was refused: another server leads a later term."""


def fenced_message(held: int, found: int | None) -> str:
    now = "has no leadership row" if found is None else f"is at term {found}"
    return (
        f"fenced: this server led term {held}, but the cluster {now}; another server is the leader"
    )


class PostgresStore(SqlStore):
    reconnected_notice = "reconnected to PostgreSQL"

    def __init__(
        self, url: str, *, ca_cert: str | None = None, fence_term: int | None = None
    ) -> None:
        """`ca_cert`: a PEM bundle trusted besides the web PKI roots (the
        server passes ORBIT_DB_CA_CERT). `fence_term`: fenced mode (module
        docstring), for the leader elected at that term."""
        self.url = url
        self.fence_term = fence_term
        self.display = redact(url)
        self._bundle: str | None = None
        if not is_postgres(url):
            raise StorageError(f"`{self.display}` is not a postgres:// or postgresql:// URL")
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise StorageError(
                f"invalid PostgreSQL URL {self.display}: {self.describe_error(exc)}"
            ) from exc
        self.sslmode = str(params.get("sslmode") or "prefer")
        if self.sslmode not in SSLMODES:
            raise StorageError(
                f"invalid PostgreSQL URL {self.display}: sslmode={self.sslmode} is not supported; "
                "use disable, prefer or require (a certificate is always verified when TLS is used)"
            )
        self._defaults: dict[str, Any] = {}
        if "connect_timeout" not in params:
            self._defaults["connect_timeout"] = CONNECT_TIMEOUT_S
        if "application_name" not in params:
            self._defaults["application_name"] = "orbit"
        self._options = str(params.get("options") or "")
        # Every statement is planned for its own parameters. A prepared
        # statement's generic plan takes `unnest` of an array parameter for
        # 10 rows, so a group's update and the start check chose a hash join
        # over a scan of the whole executions table while its statistics
        # still called it small (until autovacuum's next ANALYZE): PostgreSQL's
        # CPU per step grew with the table.
        options = f"{self._options} -c plan_cache_mode=force_custom_plan"
        if fence_term is not None:
            options += f" -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
        self._defaults["options"] = options.strip()
        if self.sslmode != "disable":
            self._bundle = _trust_bundle(ca_cert, self.display)
        engine = create_engine(
            "postgresql+psycopg://",
            creator=self._connect,
            poolclass=QueuePool,
            pool_size=2,
            max_overflow=4,
            pool_pre_ping=True,
        )
        try:
            super().__init__(engine, read_options={"isolation_level": "AUTOCOMMIT"})
        except BaseException:
            self._remove_bundle()
            engine.dispose()
            raise

    def _connect(self, **extra: Any) -> psycopg.Connection[Any]:
        """A new connection, with TLS as `sslmode` says (module docstring),
        that sends the typed arrays of `pg_arrays`."""
        conn = self._open(**extra)
        pg_arrays.register(conn)
        return conn

    def _open(self, **extra: Any) -> psycopg.Connection[Any]:
        options = {**self._defaults, **extra}
        if self.sslmode == "disable":
            return psycopg.connect(self.url, **options, sslmode="disable")
        try:
            return psycopg.connect(
                self.url, **options, sslmode="verify-full", sslrootcert=self._bundle
            )
        except psycopg.OperationalError as exc:
            if self.sslmode == "prefer" and _NO_TLS in str(exc):
                return psycopg.connect(self.url, **options, sslmode="disable")
            raise

    def session(self, application_name: str, **params: Any) -> psycopg.Connection[Any]:
        """A new autocommit connection of its own (not from the pool), named
        `application_name` in pg_stat_activity; `params` are more libpq
        parameters. Raises StorageError naming the redacted URL."""
        try:
            conn = self._connect(application_name=application_name, **params)
        except psycopg.Error as exc:
            raise StorageError(self.describe_connect_error(exc)) from exc
        conn.autocommit = True
        return conn

    # Fenced mode: the term check opens every write transaction.

    def _write(
        self,
        statements: Any,
        marker: Any,
        *,
        alone: bool = False,
        link: Any = None,
        durable: bool = True,
    ) -> None:
        if self.fence_term is None:
            super()._write(statements, marker, alone=alone, link=link, durable=durable)
            return

        def fenced(cursor: Any) -> None:
            cursor.execute(_FENCE)
            self._check_term(cursor.fetchone())
            statements(cursor)

        super()._write(fenced, marker, link=link, durable=durable)

    @contextlib.contextmanager
    def lax_commit(self, raw: Any) -> Iterator[None]:
        """`synchronous_commit` off on the sweeper's own connection (the
        only user of `lax_commit`): its COMMIT does not wait for the WAL
        flush."""
        cursor = raw.cursor()
        try:
            cursor.execute("SET synchronous_commit TO off")
        finally:
            cursor.close()
        yield

    def sweep_link(self) -> _Link:
        """The sweeper deletes on a connection of its own: finished
        executions' rows, which no group commit writes, so the engine's
        commits never queue behind a sweep's delete on the one write
        connection (a fenced store checks its term there too)."""
        link: _Link | None = getattr(self, "_sweep_writer", None)
        if link is None:
            link = self._sweep_writer = _Link(self)
        return link

    def _transaction(self, fn: Callable[[Connection], T]) -> T:
        if self.fence_term is None:
            return super()._transaction(fn)

        def fenced(conn: Connection) -> T:
            self._check_term(conn.exec_driver_sql(_FENCE).first())
            return fn(conn)

        return super()._transaction(fenced)

    def _check_term(self, row: Any) -> None:
        assert self.fence_term is not None
        found = None if row is None else int(row[0])
        if found != self.fence_term:
            raise Fenced(fenced_message(self.fence_term, found))

    # A group's transaction is sent in pipeline mode: BEGIN, every statement
    # and the COMMIT go out together and the results are read once, so a
    # commit costs one round trip to the server instead of one per statement.
    # The bulk writes feed arrays to one statement each.

    def transaction_scope(self, raw: Any) -> contextlib.AbstractContextManager[Any]:
        return raw.pipeline()  # type: ignore[no-any-return]

    def one_statement(
        self,
        events: list[tuple[Any, ...]],
        new_rows: list[tuple[Any, ...]],
        updates: list[tuple[Any, ...]],
        search_rows: list[tuple[Any, ...]],
    ) -> Callable[[Any], None] | None:
        if self.fence_term is not None:
            return None  # a fenced write checks its term first, in a transaction
        params: list[Any] = _group_params(events, new_rows, updates)
        if not search_rows:
            return lambda cursor: cursor.execute(_GROUP, params)
        params[14:14] = search_params(search_rows)
        return lambda cursor: cursor.execute(_GROUP_SEARCH, params)

    def insert_events(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        if len(rows) < _BULK_FROM:
            super().insert_events(cursor, rows)
        else:
            cursor.execute(INSERT_EVENTS, event_params(rows))

    def insert_rows(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        if len(rows) < _BULK_FROM:
            super().insert_rows(cursor, rows)
        else:
            cursor.execute(INSERT_ROWS, row_params(rows))

    def update_rows(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        if len(rows) < _BULK_FROM:
            super().update_rows(cursor, rows)
            return
        cursor.execute(UPDATE_ROWS, update_params(rows))

    def execution_hashes(self, execution_ids: list[str]) -> dict[str, str]:
        def read(cursor: Any) -> dict[str, str]:
            cursor.execute(_HASHES, [execution_ids])
            return dict(cursor.fetchall())

        return self._raw_read(read)

    def describe_error(self, exc: BaseException, *, lost: bool = False) -> str:
        # psycopg's messages span lines (a hint on the second); one line here.
        text = redact(" ".join(str(exc).split()), self.url)
        return f"lost the connection to PostgreSQL at {self.display}: {text}" if lost else text

    def describe_connect_error(self, exc: BaseException) -> str:
        detail = self.describe_error(getattr(exc, "orig", None) or exc)
        return f"cannot connect to PostgreSQL at {self.display}: {detail}"

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._remove_bundle()

    def _remove_bundle(self) -> None:
        bundle, self._bundle = self._bundle, None
        if bundle is not None and bundle != certifi.where():
            with contextlib.suppress(OSError):
                os.unlink(bundle)


# The array types of each statement's columns, in its order.
_EVENT_TYPES: tuple[type[Texts] | type[Int8s], ...] = (Texts, Int8s, Texts, Texts, Texts, Int8s)
_ROW_TYPES: tuple[type[Texts] | type[Int8s], ...] = (*(Texts,) * 5, Int8s, Int8s, Int8s)
_UPDATE_TYPES: tuple[type[Texts] | type[Int8s], ...] = (Texts, Int8s, Int8s, Int8s, Texts)


def search_params(rows: list[tuple[Any, ...]]) -> list[Texts | Int8s | Float8s]:
    """The arrays of UPSERT_SEARCH, from rows in `search._COLUMNS` order
    (one per key: the statement may upsert a row once)."""
    rows = search.latest(rows)
    return [
        Texts(r[0] for r in rows),
        Int8s(r[1] for r in rows),
        Texts(r[2] for r in rows),
        Float8s(r[3] for r in rows),
    ]


def _group_params(
    events: list[tuple[Any, ...]], new_rows: list[tuple[Any, ...]], updates: list[tuple[Any, ...]]
) -> list[Texts | Int8s]:
    """The arrays of `_GROUP`: those of INSERT_EVENTS, INSERT_ROWS and UPDATE_ROWS."""
    return [*event_params(events), *row_params(new_rows), *update_params(updates)]


def event_params(rows: list[tuple[Any, ...]]) -> list[Texts | Int8s]:
    """The arrays of INSERT_EVENTS."""
    return _columns(rows, _EVENT_TYPES)


def row_params(rows: list[tuple[Any, ...]]) -> list[Texts | Int8s]:
    """The arrays of INSERT_ROWS."""
    return _columns(rows, _ROW_TYPES)


def update_params(rows: list[tuple[Any, ...]]) -> list[Texts | Int8s]:
    """The arrays of UPDATE_ROWS (the execution id first), one row per
    execution: the later of a group's rows wins."""
    latest = list({row[-1]: row for row in rows}.values())
    columns = _columns(latest, _UPDATE_TYPES)
    return [columns[-1], *columns[:-1]]


def _columns(
    rows: list[tuple[Any, ...]], types: tuple[type[Texts] | type[Int8s], ...]
) -> list[Texts | Int8s]:
    """Rows as one typed array per column (empty ones for no rows)."""
    if not rows:
        return [kind() for kind in types]
    return [kind(column) for kind, column in zip(types, zip(*rows, strict=True), strict=True)]


def _trust_bundle(ca_cert: str | None, display: str) -> str:
    """The file of certificates a server's certificate may chain to: the web
    PKI roots, plus `ca_cert`'s (copied into a private temporary file, as
    libpq takes one file)."""
    roots = certifi.where()
    if not ca_cert:
        return roots
    try:
        with open(ca_cert, "rb") as f:
            extra = f.read()
    except OSError as exc:
        raise StorageError(
            f"cannot use ORBIT_DB_CA_CERT={ca_cert} for {display}: {exc.strerror or exc}"
        ) from exc
    if b"-----BEGIN CERTIFICATE-----" not in extra:
        raise StorageError(
            f"cannot use ORBIT_DB_CA_CERT={ca_cert} for {display}: "
            "it holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        )
    with open(roots, "rb") as f:
        bundle = f.read()
    fd, path = tempfile.mkstemp(prefix="orbit-db-ca-", suffix=".pem")
    with os.fdopen(fd, "wb") as out:
        out.write(bundle.rstrip(b"\n") + b"\n" + extra)
    return path
