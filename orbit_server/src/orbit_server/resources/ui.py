"""`/` and `/ui/`. The web UI itself arrives in a later release; until then
`/ui/` serves a one-page placeholder with the UI's security headers, so the
redirect from `/` and `--no-ui` already behave as chapter 47 describes."""

from __future__ import annotations

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
PLACEHOLDER = (
    "<!doctype html>\n<html lang=en><head><meta charset=utf-8><title>ORBIT</title></head>\n"
    "<body><h1>ORBIT</h1><p>The web UI is not part of this build yet. "
    "The HTTP API is served under <code>/v1/</code>.</p></body></html>\n"
)


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
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_headers(HEADERS)
        resp.content_type = falcon.MEDIA_HTML
        resp.text = PLACEHOLDER
