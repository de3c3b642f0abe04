"""`/`, `/ui/` and `/ui/{asset}`: the web UI of chapter 47.

The UI is three static files in `orbit_server/ui/` (index.html, app.css,
app.js: plain JavaScript, no build step), read once from the package and
served without authentication, since they hold no data; everything they
show is fetched from /v1/* with the signed-in token. Every answer carries the
chapter's security headers (a CSP that allows only this server's own
scripts, styles and requests, no framing). `--no-ui` leaves these routes out."""

from __future__ import annotations

import importlib.resources

import falcon

from orbit_core.errors import NotFoundError

HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=()",
    "cache-control": "no-cache",
}
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
}


def load_assets() -> dict[str, bytes]:
    """The UI's files, from the package (also inside a wheel or a zip)."""
    folder = importlib.resources.files("orbit_server") / "ui"
    return {name: (folder / name).read_bytes() for name in ASSETS}


class Root:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if "text/html" in (req.get_header("accept") or ""):
            resp.status = 302
            resp.location = "/ui/"
            return
        # The book's message: it points a client that guessed the root at both.
        raise NotFoundError(
            "no such endpoint; the API is under /v1/ and the web UI under /ui/", "NOT_FOUND"
        )


class Ui:
    def __init__(self) -> None:
        self._assets = load_assets()

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._send(resp, "index.html")

    def on_get_asset(self, req: falcon.Request, resp: falcon.Response, asset: str) -> None:
        if asset not in ASSETS or asset == "index.html":
            raise NotFoundError(f"no such file in the web UI: {asset}", "NOT_FOUND")
        self._send(resp, asset)

    # HEAD answers what GET would, without the body (`curl -I`, link checkers,
    # load balancers' health probes); Falcon drops the body of a HEAD reply.
    def on_head(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.on_get(req, resp)

    def on_head_asset(self, req: falcon.Request, resp: falcon.Response, asset: str) -> None:
        self.on_get_asset(req, resp, asset)

    def _send(self, resp: falcon.Response, name: str) -> None:
        resp.set_headers(HEADERS)
        resp.content_type = ASSETS[name]
        resp.data = self._assets[name]
