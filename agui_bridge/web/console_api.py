"""`GET /console`: the optional web console, a static page registered only when enabled.

Four files from the `agui_bridge.console` package (`static/index.html`, `console.css`, `console.js`,
`markdown.js`) and the vendored libraries they load (`static/vendor/`: the scripts and stylesheets its
`manifest.json` lists, see docs/design.md#web-console), served from an allow-list with a strict
Content-Security-Policy (no inline script or style, every fetch same-origin), `X-Content-Type-Options:
nosniff` and no CORS headers. The page talks to the same routes as any AG-UI client; the bearer token
the user pastes stays in `sessionStorage`.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from flask import Blueprint, Response, abort

bp = Blueprint("console", __name__)

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

#: name under static/ -> Content-Type; nothing else is ever served.
STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "markdown.js": "text/javascript; charset=utf-8",
}

#: suffix of a vendored file -> Content-Type; licences and the manifest are package data, not served.
VENDOR_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}

SECURITY_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
)


@cache
def _load(*path: str) -> bytes:
    return resources.files("agui_bridge.console").joinpath("static", *path).read_bytes()


@cache
def vendor_files() -> dict[str, str]:
    """Vendored name -> Content-Type: the scripts and stylesheets the manifest lists, nothing else."""
    manifest = json.loads(_load("vendor", "manifest.json"))
    names = (name for package in manifest["packages"] for name in package["files"])
    return {name: VENDOR_TYPES[suffix] for name in names if (suffix := "." + name.rsplit(".", 1)[-1]) in VENDOR_TYPES}


def _serve(*path: str, content_type: str | None) -> Response:
    if content_type is None:
        abort(404)
    response = Response(_load(*path), status=200, content_type=content_type)
    for header, value in SECURITY_HEADERS:
        response.headers[header] = value
    response.headers["Cache-Control"] = "no-cache"
    return response


@bp.get("/console")
def console_page() -> Response:
    return _serve("index.html", content_type=STATIC_FILES["index.html"])


@bp.get("/console/static/<name>")
def console_static(name: str) -> Response:
    return _serve(name, content_type=STATIC_FILES.get(name))


@bp.get("/console/static/vendor/<name>")
def console_vendor(name: str) -> Response:
    return _serve("vendor", name, content_type=vendor_files().get(name))
