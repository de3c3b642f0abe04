"""Authentication and authorisation (chapter 45): who is calling, and may they
call this route for this workflow.

Access is decided from the route a request was matched to, never from the
text of its path: Falcon's router forgives spellings (leading slashes are
stripped, `%2F` is decoded before routing), so a rule written against
`req.path` can disagree with the route that actually runs. `Gate` therefore
decides in `process_resource`, which Falcon calls after routing with the
matched resource, and looks the route's template and method up in a table
that `create_app` builds as it adds each route. Each entry is a `Rule`:
`OPEN` (health, readiness, the UI), `WORKER` (the worker protocol: any
worker credential or the admin token), `ADMIN` (the admin token only) or
`EXECUTIONS` (the admin token, or a client identity granted the rule's
action on the workflow concerned). Deny by default: a route or method
missing from the table is refused with 403 whatever the credential (a
method a route does not serve is answered 405 only to the admin), and
`create_app` refuses to build an app with an undeclared route at all.

Credentials, in the order they are tried: the bearer token against the
admin token, then the shared worker token (both compared in constant
time), then the workers file's identities by the token's SHA-256; without a
bearer token, a client certificate verified by the TLS layer (mutual TLS)
is looked up by its names. A token that matches nothing is 401 even when a
certificate comes with it (the token decides); a verified certificate that
matches no entry is 403 on every path, health included. The gate leaves
the caller in `req.context.caller`, where resources find what the book asks
them to check themselves: the workflow a client may start (it is in the
body), the rows of a list a client may read, and a worker identity's own id,
runtime and task patterns (`check_register`); the engine refuses another
worker's sessions and task tokens (`bound_worker`).

Without `--token` every declared route is open. Responses that pass get the
`x-orbit-api-version` header; the body limit is enforced here too, before a
responder reads the body. All of it happens in one middleware hook,
`process_resource`: the router's own refusals get the version header from
`framework_error`, and only mutual TLS adds the hooks before routing and
after the response (`CertifyingGate`).
"""

from __future__ import annotations

import enum
import functools
import hmac
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import falcon

from orbit_core.errors import OrbitError
from orbit_server import errors
from orbit_server.errors import too_large
from orbit_server.identities import (
    ClientIdentity,
    Identities,
    WorkerIdentity,
    certificate_names,
)
from orbit_server.logs import logger
from orbit_server.params import header_value_int

API_VERSION = "orbit-api/1"
_VERSION_HEADER = "x-orbit-api-version"
_log = logger()
WORKER_ONLY = "worker credentials may only call /v1/workers/* and /v1/tasks/*"
UNMATCHED_CERTIFICATE = (
    "the client certificate is valid but matches no worker or client in the workers file"
)
UNAUTHENTICATED = "missing or invalid credentials"


class Access(enum.Enum):
    """Who may call a route when authentication is configured."""

    OPEN = "open"  # anyone, with or without a credential
    WORKER = "worker"  # any worker credential, or the admin token
    ADMIN = "admin"  # the admin token only
    EXECUTIONS = "executions"  # the admin token, or a client identity per the rule


class Subject(enum.Enum):
    """Where a client identity's rule finds the workflow it is about."""

    EXECUTION = "execution"  # the workflow of the route's {execution_id}
    WORKFLOW = "workflow"  # the route's {name}
    SCHEDULE = "schedule"  # the workflow of the route's {schedule_id}
    RESOURCE = "resource"  # the resource checks (a start's body) or filters (a list)


@attrs.frozen
class Rule:
    access: Access
    action: str | None = None
    subject: Subject | None = None


OPEN, WORKER, ADMIN = Rule(Access.OPEN), Rule(Access.WORKER), Rule(Access.ADMIN)


def for_clients(action: str, subject: Subject) -> Rule:
    return Rule(Access.EXECUTIONS, action, subject)


class Kind(enum.Enum):
    ADMIN = "admin"  # the admin token, or anyone when no credential is configured
    SHARED_WORKER = "shared worker"
    WORKER = "worker identity"
    CLIENT = "client identity"


@attrs.frozen
class Caller:
    kind: Kind
    identity: WorkerIdentity | ClientIdentity | None = None


ANYONE = Caller(Kind.ADMIN)
SHARED_WORKER = Caller(Kind.SHARED_WORKER)


class Credentials:
    """Who presents a credential: the part of authentication that does not
    depend on the transport, shared by the HTTP gate and the gRPC binding."""

    def __init__(
        self,
        token: str | None,
        worker_token: str | None,
        identities: Identities | None = None,
        *,
        mtls: bool = False,
    ) -> None:
        self._admin = token.encode() if token is not None else None
        self._worker = worker_token.encode() if worker_token is not None else None
        self._identities = identities or Identities()
        self.mtls = mtls

    @property
    def required(self) -> bool:
        """Whether calls need a credential at all (the admin token is set)."""
        return self._admin is not None

    def certified(self, names: list[str] | None) -> WorkerIdentity | ClientIdentity | None:
        """The entry a verified client certificate with these names is;
        None without a certificate; FORBIDDEN when it matches no entry."""
        if names is None:
            return None
        identity = self._identities.by_certificate(names)
        if identity is None:
            raise OrbitError(UNMATCHED_CERTIFICATE, "FORBIDDEN")
        return identity

    def caller(
        self,
        authorization: str | None,
        certified: WorkerIdentity | ClientIdentity | None = None,
    ) -> Caller:
        """The caller an `authorization` header (or gRPC metadata entry)
        names, else the `certified` entry under mutual TLS; 401 otherwise.
        Only called when `required`."""
        presented = _bearer(authorization)
        if presented is not None:
            assert self._admin is not None
            if hmac.compare_digest(presented, self._admin):
                return ANYONE
            if self._worker is not None and hmac.compare_digest(presented, self._worker):
                return SHARED_WORKER
            identity = self._identities.by_token(presented)
            if identity is not None:
                return _caller(identity)
        elif self.mtls and certified is not None:
            return _caller(certified)
        raise OrbitError(UNAUTHENTICATED, "UNAUTHENTICATED")


class Gate:
    """Falcon middleware: authenticate, authorise by matched route, stamp
    the API version, limit the body."""

    def __init__(
        self,
        token: str | None,
        worker_token: str | None,
        max_body: int,
        routes: Mapping[tuple[str, str], Rule],
        *,
        identities: Identities | None = None,
        workflow_of: Callable[[str], str] | None = None,
        schedule_of: Callable[[str], str] | None = None,
        mtls: bool = False,
    ) -> None:
        self.credentials = Credentials(token, worker_token, identities, mtls=mtls)
        self._max_body = max_body
        self._routes = routes
        self._templates = {template for template, _ in routes}
        self._workflow_of = workflow_of
        self._schedule_of = schedule_of
        if mtls and not isinstance(self, CertifyingGate):
            raise TypeError("mutual TLS needs a CertifyingGate (see `gate`)")

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, Any]
    ) -> None:
        # The one hook of every request: a Python call per request and hook
        # is measurable on the worker protocol's small requests, so headers
        # are read from the environ directly rather than through
        # `req.get_header`, which rebuilds the variable's name each time.
        env = req.env
        template = req.uri_template or ""
        rule = self._routes.get((template, req.method))
        if rule is None:
            if template not in self._templates:
                _log.error("refused a route without an access rule", route=template)
                raise OrbitError("this endpoint has no access rule", "FORBIDDEN")
            rule = ADMIN  # a method the route does not serve: its 405 is for the admin
        if rule.access is not Access.OPEN:
            if self.credentials.required:
                caller = self.credentials.caller(
                    env.get("HTTP_AUTHORIZATION"), getattr(req.context, "certified", None)
                )
            else:
                caller = ANYONE
            req.context.caller = caller
            if caller.kind is not Kind.ADMIN:
                self._authorise(caller, rule, params)
        resp.set_header(_VERSION_HEADER, API_VERSION)
        raw = env.get("CONTENT_LENGTH")
        if raw:
            length = header_value_int("content-length", raw)
            if length > self._max_body:
                raise too_large()

    def _authorise(self, caller: Caller, rule: Rule, params: Mapping[str, Any]) -> None:
        if caller.kind is not Kind.CLIENT:
            if rule.access is Access.WORKER:
                return
            raise OrbitError(WORKER_ONLY, "FORBIDDEN")
        client = caller.identity
        assert isinstance(client, ClientIdentity)
        if rule.access is not Access.EXECUTIONS or rule.action is None:
            raise OrbitError(
                f"client `{client.id}` may only use the execution API "
                "(start, signal, query, read, cancel) and schedules",
                "FORBIDDEN",
            )
        if rule.subject is Subject.EXECUTION:
            assert self._workflow_of is not None
            # An unknown id is the resource's 404 NOT_FOUND, raised here.
            require(client, rule.action, self._workflow_of(params["execution_id"]))
        elif rule.subject is Subject.WORKFLOW:
            require(client, rule.action, params["name"], what="workflow")
        elif rule.subject is Subject.SCHEDULE:
            assert self._schedule_of is not None
            require(client, rule.action, self._schedule_of(params["schedule_id"]))


class CertifyingGate(Gate):
    """The gate under mutual TLS: a certificate that identifies nobody is
    refused before routing, so on every path (a bearer token, when sent,
    decides instead), and that refusal, like the router's 404, carries the
    version header. Without mutual TLS these two hooks have nothing to do,
    and `Gate` leaves them out of every request."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if _bearer(req.env.get("HTTP_AUTHORIZATION")) is None:
            identity = self.credentials.certified(_peer_names(req.env))
            if identity is not None:
                req.context.certified = identity

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if resource is None:
            resp.set_header(_VERSION_HEADER, API_VERSION)


def gate(
    token: str | None,
    worker_token: str | None,
    max_body: int,
    routes: Mapping[tuple[str, str], Rule],
    *,
    identities: Identities | None = None,
    workflow_of: Callable[[str], str] | None = None,
    schedule_of: Callable[[str], str] | None = None,
    mtls: bool = False,
) -> Gate:
    """The gate for these credentials: `CertifyingGate` under mutual TLS."""
    kind = CertifyingGate if mtls else Gate
    return kind(
        token,
        worker_token,
        max_body,
        routes,
        identities=identities,
        workflow_of=workflow_of,
        schedule_of=schedule_of,
        mtls=mtls,
    )


def framework_error(
    req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError, params: Any
) -> None:
    """Falcon's own refusals (an unknown path, a method a route does not
    serve, an unreadable request): answered as `errors` does, with the
    version header. No route matched for most of them, so the gate never
    ran; the others come after the gate let the request through, which
    set the same header. The gate itself refuses with `OrbitError` and
    `HttpError` only, whose answers do not carry it."""
    errors.framework(req, resp, ex, params)
    resp.set_header(_VERSION_HEADER, API_VERSION)


@functools.lru_cache(maxsize=4096)  # one per identity: made for every request
def _caller(identity: WorkerIdentity | ClientIdentity) -> Caller:
    return Caller(Kind.CLIENT if isinstance(identity, ClientIdentity) else Kind.WORKER, identity)


def _bearer(header: str | None) -> bytes | None:
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    # WSGI hands header values over as latin-1: this recovers the bytes sent.
    return value.strip().encode("latin-1", "replace")


def _peer_names(environ: Mapping[str, Any]) -> list[str] | None:
    """The names of the verified client certificate of the request's
    connection, or None when the client presented none."""
    getpeercert = getattr(environ.get("gunicorn.socket"), "getpeercert", None)
    if getpeercert is None:
        return None
    try:
        peer = getpeercert()
    except ValueError:  # no handshake on this socket
        return None
    return certificate_names(peer) if peer else None


# ---- what resources check themselves


def caller(req: falcon.Request) -> Caller:
    """The request's caller (anyone, when no credential is configured)."""
    found: Caller = getattr(req.context, "caller", ANYONE)
    return found


def client_of(req: falcon.Request) -> ClientIdentity | None:
    """The client identity a resource must restrict its answer to, if any."""
    identity = caller(req).identity
    return identity if isinstance(identity, ClientIdentity) else None


def bound_worker(who: Caller) -> str | None:
    """The worker id the caller's credential is bound to; None when it may
    act for any worker (admin, shared worker token, no authentication)."""
    identity = who.identity
    return identity.id if isinstance(identity, WorkerIdentity) else None


_VERBS = {
    "start": "start executions of",
    "signal": "signal executions of",
    "query": "query executions of",
    "read": "read executions of",
    "cancel": "cancel executions of",
    "schedule": "manage schedules of",
}


def require(client: ClientIdentity | None, action: str, workflow: str, what: str = "") -> None:
    """Refuses a client identity the `action` on `workflow`."""
    if client is None or client.may(action, workflow):
        return
    verb = "read the workflow" if what == "workflow" else _VERBS.get(action, action)
    raise OrbitError(f"client `{client.id}` may not {verb} `{workflow}`", "FORBIDDEN")


def check_register(who: Caller, worker_id: str, runtime: str, tasks: Iterable[str]) -> None:
    """A worker identity registers under its own id, with its runtime, for
    tasks its patterns allow; 403 FORBIDDEN otherwise."""
    identity = who.identity
    if not isinstance(identity, WorkerIdentity) or not worker_id.strip():
        return
    if worker_id != identity.id:
        raise OrbitError(
            f"this credential belongs to worker `{identity.id}`, not `{worker_id}`", "FORBIDDEN"
        )
    refused = [t for t in dict.fromkeys(tasks) if not identity.tasks.match(t)]
    if refused:
        raise OrbitError(
            f"worker `{identity.id}` may not serve: {', '.join(refused)} "
            f"(allowed: {identity.tasks})",
            "FORBIDDEN",
        )
    if identity.runtime is not None and runtime.lower() != identity.runtime:
        raise OrbitError(
            f"worker `{identity.id}` must announce runtime `{identity.runtime}`", "FORBIDDEN"
        )
