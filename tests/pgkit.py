"""Throw-away PostgreSQL servers for tests: no mocks, a real server.

`Cluster` runs `initdb` into a fresh temporary directory and `pg_ctl start`
on a free loopback port (its Unix socket lives in the same directory), and
`stop` removes everything again. Its superuser has a password full of URL
delimiters, so every URL the tests build exercises percent-encoding, and TCP
logins are checked (scram-sha-256) while the socket trusts local users.

PostgreSQL refuses to run as root: a root test run starts the server as the
`postgres` user (Debian's package creates it), or `nobody`.

The binaries are looked up on PATH, then in /usr/lib/postgresql/*/bin (where
Debian installs them, off the PATH). When none are found the tests that need
them are skipped with the reason, unless ORBIT_REQUIRE_POSTGRES is set (CI
sets it), in which case they fail: CI must never pass by skipping them.
ORBIT_TEST_POSTGRES_URL points the tests at an existing server instead (its
user needs CREATEDB; tests that stop the server still start their own).

`acquire()` is the one server of a test process (started on first use,
kept while any fixture holds it, stopped at exit); `create_database()` gives
each test its own empty database on it. With ORBIT_TEST_DB=postgres,
`db_for(path)` turns the SQLite file a real-server test would use into a URL
of its own database on that server (the same one for the same path, so a
restarted server finds its data): the test harnesses call it, so the
end-to-end tests and the book's timelines run unchanged on PostgreSQL. `mark_postgres_items` tags every test that uses the fixtures
with the `postgres` marker, so `-m "not postgres"` leaves them out.

Only the standard library and psycopg are imported: orbit_store's tests run
in a virtualenv with nothing else.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

REQUIRE_ENV = "ORBIT_REQUIRE_POSTGRES"
EXTERNAL_ENV = "ORBIT_TEST_POSTGRES_URL"
# ORBIT_TEST_DB=postgres runs the real-server tests on PostgreSQL: see `db_for`.
BACKEND_ENV = "ORBIT_TEST_DB"
USER = "orbit"
# Every character here must be percent-encoded in a URL's userinfo.
PASSWORD = "p@ss:w/rd?#%&="
FIXTURES = ("pg_server", "pg_url", "pg_cluster")
_TOOLS = ("initdb", "pg_ctl", "postgres")


class Unavailable(Exception):
    """No PostgreSQL server can be started here; the message says why."""


def bin_dir() -> Path:
    """The directory holding initdb, pg_ctl and postgres."""
    found = shutil.which("pg_ctl")
    if found is not None:
        here = Path(found).resolve().parent
        if all((here / tool).exists() for tool in _TOOLS):
            return here
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: [int(x) for x in re.findall(r"\d+", p.parent.name)] or [0],
        reverse=True,
    )
    for candidate in candidates:
        if all((candidate / tool).exists() for tool in _TOOLS):
            return candidate
    raise Unavailable(
        "no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in "
        "/usr/lib/postgresql/*/bin; install Debian's `postgresql` package "
        "(scripts/bootstrap does when ORBIT_REQUIRE_POSTGRES is set)"
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _runner() -> dict[str, Any]:
    """subprocess arguments that run a command as a user PostgreSQL accepts."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    raise Unavailable("running as root, and there is no `postgres` or `nobody` user to run as")


def url(
    host: str,
    port: int,
    dbname: str,
    *,
    user: str = USER,
    password: str | None = PASSWORD,
    scheme: str = "postgres",
    **params: str,
) -> str:
    """A libpq URI with the password percent-encoded."""
    userinfo = quote(user, safe="")
    if password is not None:
        userinfo += ":" + quote(password, safe="")
    query = f"?{urlencode(params)}" if params else ""
    return f"{scheme}://{userinfo}@{host}:{port}/{dbname}{query}"


class _Databases:
    """What both kinds of server offer over a superuser connection: a fresh
    database per test and one-off statements."""

    _names: itertools.count[int]

    def admin(self, dbname: str = "postgres") -> Any:
        raise NotImplementedError

    def _database_name(self, prefix: str) -> str:
        return f"{prefix}_{os.getpid()}_{next(self._names)}"

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its name."""
        name = self._database_name(prefix)
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def sql(self, statement: str, dbname: str = "postgres") -> list[tuple[Any, ...]]:
        with self.admin(dbname) as conn:
            cursor = conn.execute(statement)
            return list(cursor.fetchall()) if cursor.description else []


class Cluster(_Databases):
    """One PostgreSQL server in its own temporary directory."""

    def __init__(self, settings: dict[str, str] | None = None, *, ssl: bool = False) -> None:
        self.bin = bin_dir()
        self.run_as = _runner()
        self.root = Path(tempfile.mkdtemp(prefix="orbit-pg-"))
        self.data = self.root / "data"
        self.log_path = self.root / "server.log"
        self.port = 0
        # Tests run on fsync=off: durability is PostgreSQL's, not under test.
        self.settings = {
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.root}'",
            "fsync": "off",
            "full_page_writes": "off",
            "max_connections": "200",
            **(settings or {}),
        }
        self.ssl = ssl
        self.ca_path: Path | None = None
        self._names = itertools.count(1)
        if "user" in self.run_as:
            os.chown(self.root, self.run_as["user"], self.run_as["group"])
        try:
            self._initdb()
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            argv,
            check=False,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
            **self.run_as,
        )
        if check and result.returncode != 0:
            raise Unavailable(
                f"{Path(argv[0]).name} failed ({result.returncode}):\n"
                f"{result.stdout}{result.stderr}{self.server_log()[-3000:]}"
            )
        return result

    def _initdb(self) -> None:
        pwfile = self.root / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if "user" in self.run_as:
            os.chown(pwfile, self.run_as["user"], self.run_as["group"])
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "-N",
        )
        pwfile.unlink()
        if self.ssl:
            self._make_certificates()
        with (self.data / "postgresql.conf").open("a") as conf:
            for key, value in self.settings.items():
                conf.write(f"{key} = {value}\n")

    def _make_certificates(self) -> None:
        """A private CA and a server certificate for 127.0.0.1 and localhost;
        `ca_path` is the CA a client must be given to verify the server."""
        openssl = shutil.which("openssl")
        if openssl is None:
            raise Unavailable("openssl is needed to make the test server's certificate")
        ca_key, ca = self.root / "ca.key", self.root / "ca.pem"
        key, csr, cert = (
            self.data / "server.key",
            self.root / "server.csr",
            self.data / "server.crt",
        )
        ext = self.root / "san.ext"
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        steps: list[list[Any]] = [
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr],
            ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial"],
        ]
        steps[0].extend(["-days", "2", "-subj", "/CN=orbit test CA"])
        steps[1].extend(["-subj", "/CN=127.0.0.1"])
        steps[2].extend(["-out", cert, "-days", "2", "-extfile", ext])
        for argv in steps:
            subprocess.run([openssl, *map(str, argv)], check=True, capture_output=True, timeout=60)
        if "user" in self.run_as:
            for path in (key, cert):
                os.chown(path, self.run_as["user"], self.run_as["group"])
        key.chmod(0o600)
        self.ca_path = ca
        self.settings.update(
            {"ssl": "on", "ssl_cert_file": "'server.crt'", "ssl_key_file": "'server.key'"}
        )

    def start(self) -> Cluster:
        """Starts the server (again, on the same port, after `stop`)."""
        for attempt in range(5):
            port = self.port or free_port()
            result = self._run(
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.log_path),
                "-o",
                f"-p {port}",
                "-w",
                "-t",
                "60",
                "start",
                check=False,
            )
            if result.returncode == 0:
                self.port = port
                return self
            if self.port or attempt == 4 or "in use" not in self.server_log():
                raise Unavailable(f"pg_ctl start failed:\n{result.stderr}{self.server_log()}")
        raise AssertionError("unreachable")

    def stop(self, mode: str = "fast") -> None:
        """Stops the server; the data stays for `start`."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    @property
    def running(self) -> bool:
        status = self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "status", check=False)
        return status.returncode == 0

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            if self.running:
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def server_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def url(self, dbname: str = "postgres", **params: Any) -> str:
        """A TCP URL with the superuser's password; extra libpq parameters
        go in the query."""
        return url("127.0.0.1", self.port, dbname, **params)

    def admin(self, dbname: str = "postgres") -> Any:
        """An autocommit psycopg connection as the superuser, over the socket."""
        import psycopg

        return psycopg.connect(
            host=str(self.root), port=self.port, user=USER, dbname=dbname, autocommit=True
        )


class External(_Databases):
    """An existing server named by ORBIT_TEST_POSTGRES_URL."""

    def __init__(self, base: str) -> None:
        self.base = base
        self._names = itertools.count(1)

    def url(self, dbname: str = "postgres", **params: Any) -> str:
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(self.base)
        query = "&".join(x for x in (parts.query, urlencode(params)) if x)
        return urlunsplit(parts._replace(path=f"/{dbname}", query=query))

    def admin(self, dbname: str = "postgres") -> Any:
        import psycopg

        return psycopg.connect(self.url(dbname), autocommit=True)

    def _database_name(self, prefix: str) -> str:
        # The server outlives this process, and a later one may get its pid.
        return f"{prefix}_{os.getpid()}_{int(time.time())}_{next(self._names)}"

    def destroy(self) -> None:
        return None


# ---- the process's shared server

_lock = threading.Lock()
_shared: Cluster | External | None = None
_holders = 0


def unavailable(reason: str) -> None:
    """Skips the test with `reason`, or fails it when PostgreSQL is required."""
    import pytest

    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{REQUIRE_ENV} is set but PostgreSQL is unavailable: {reason}", False)
    pytest.skip(f"PostgreSQL unavailable: {reason} (set {REQUIRE_ENV}=1 to make this an error)")


def acquire() -> Cluster | External:
    """The shared server, started on first use; pair with `release`."""
    global _shared, _holders
    with _lock:
        if _shared is None:
            external = os.environ.get(EXTERNAL_ENV)
            try:
                _shared = External(external) if external else Cluster().start()
            except Unavailable as exc:
                unavailable(str(exc))
            atexit.register(_stop_shared)
        _holders += 1
        assert _shared is not None
        return _shared


def release() -> None:
    global _holders
    with _lock:
        _holders -= 1
        if _holders > 0:
            return
    _stop_shared()


def _stop_shared() -> None:
    global _shared
    with _lock:
        server, _shared = _shared, None
    if server is not None:
        server.destroy()


def session_server() -> Iterator[Cluster | External]:
    """The body of a session-scoped fixture."""
    server = acquire()
    try:
        yield server
    finally:
        release()


def own_cluster(**kwargs: Any) -> Iterator[Cluster]:
    """The body of a fixture for a server of the test's own (to stop, restart
    or configure); always a local one."""
    try:
        cluster = Cluster(**kwargs).start()
    except Unavailable as exc:
        unavailable(str(exc))
        raise
    try:
        yield cluster
    finally:
        cluster.destroy()


_databases: dict[str, str] = {}


def on_postgres() -> bool:
    """Whether ORBIT_TEST_DB asks for the real-server tests on PostgreSQL."""
    return os.environ.get(BACKEND_ENV, "sqlite").lower() in ("postgres", "postgresql")


def db_for(db: str | os.PathLike[str]) -> str:
    """What a real-server test passes to --db for `db` (a SQLite path):
    the path itself, or with ORBIT_TEST_DB=postgres a database on the shared
    server, one per path."""
    path = os.fspath(db)
    if not on_postgres() or path.startswith(("postgres://", "postgresql://")):
        return path
    with _lock:
        found = _databases.get(path)
    if found is None:
        server = acquire()  # held until exit
        found = server.url(server.create_database("e2e"))
        with _lock:
            _databases[path] = found
    return found


def mark_postgres_items(items: list[Any]) -> None:
    """Adds the `postgres` marker to every test that uses a server fixture."""
    import pytest

    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in FIXTURES):
            item.add_marker(pytest.mark.postgres)
