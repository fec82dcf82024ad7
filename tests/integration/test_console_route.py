"""`GET /console`: off by default; when on, its static files and vendored libraries with a strict CSP and no CORS."""

from __future__ import annotations

import re
from importlib import resources

import pytest
from flask.testing import FlaskClient

from agui_bridge.app import create_app
from agui_bridge.config import load_settings
from agui_bridge.config.settings import Settings

PAGES = {
    "/console": "text/html; charset=utf-8",
    "/console/static/console.css": "text/css; charset=utf-8",
    "/console/static/console.js": "text/javascript; charset=utf-8",
    "/console/static/markdown.js": "text/javascript; charset=utf-8",
    "/console/static/vendor/markdown-it.esm.min.mjs": "text/javascript; charset=utf-8",
    "/console/static/vendor/purify.es.mjs": "text/javascript; charset=utf-8",
    "/console/static/vendor/highlight.min.js": "text/javascript; charset=utf-8",
    "/console/static/vendor/highlight-github.min.css": "text/css; charset=utf-8",
}


@pytest.fixture
def console(settings: Settings) -> FlaskClient:
    return create_app(settings.replace(console_enabled=True)).test_client()


@pytest.mark.parametrize("path", [*PAGES, "/console/static/nope.js"])
def test_the_console_is_404_unless_enabled(client: FlaskClient, path: str) -> None:
    answer = client.get(path)
    assert answer.status_code == 404
    assert answer.mimetype == "text/plain"


@pytest.mark.parametrize(("path", "content_type"), PAGES.items())
def test_files_and_security_headers(console: FlaskClient, path: str, content_type: str) -> None:
    answer = console.get(path, headers={"Origin": "https://evil.example"})
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == content_type
    csp = answer.headers["Content-Security-Policy"]
    assert "default-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert answer.headers["Referrer-Policy"] == "no-referrer"
    assert not [name for name, _ in answer.headers if name.lower().startswith("access-control-")]


@pytest.mark.parametrize(
    "path",
    [
        "/console/static/index.htm",
        "/console/static/..%2F__init__.py",
        "/console/static/",
        "/console/static/x/../x",
        "/console/static/vendor/manifest.json",
        "/console/static/vendor/LICENSE.dompurify.txt",
        "/console/static/vendor/nope.js",
        "/console/static/vendor/..%2Fconsole.js",
        "/console/static/vendor/",
    ],
)
def test_only_the_allow_listed_files_are_served(console: FlaskClient, path: str) -> None:
    assert console.get(path).status_code == 404


def test_the_page_has_no_inline_script_or_style(console: FlaskClient) -> None:
    html = console.get("/console").get_data(as_text=True)
    assert re.search(r"<script[^>]*>\s*[^<\s]", html) is None  # every script is an external file
    assert " style=" not in html and "<style" not in html and "javascript:" not in html
    assert '<script type="module" src="console/static/console.js"></script>' in html
    assert 'href="console/static/console.css"' in html
    assert 'href="console/static/vendor/highlight-github.min.css"' in html


@pytest.mark.parametrize("module", ["console.js", "markdown.js"])
def test_the_modules_write_no_html_strings_into_the_dom(console: FlaskClient, module: str) -> None:
    js = console.get(f"/console/static/{module}").get_data(as_text=True)
    assert "innerHTML" not in js and "outerHTML" not in js and "insertAdjacentHTML" not in js
    assert "document.write" not in js and "DOMParser" not in js


def test_rendered_markdown_reaches_the_dom_only_through_the_sanitizer(console: FlaskClient) -> None:
    js = console.get("/console/static/markdown.js").get_data(as_text=True)
    assert "RETURN_DOM_FRAGMENT: true" in js and "html: false" in js
    assert "fragment = sanitize(markdown.render(text))" in js
    assert "code.append(sanitize(html))" in js


def test_the_module_keeps_the_token_out_of_urls_and_the_dom(console: FlaskClient) -> None:
    js = console.get("/console/static/console.js").get_data(as_text=True)
    assert "innerHTML" not in js and "outerHTML" not in js and "insertAdjacentHTML" not in js
    assert "localStorage" not in js and "document.cookie" not in js
    assert "sessionStorage.setItem(TOKEN_KEY" in js
    assert "Authorization = `Bearer ${token}`" in js
    write_query = js.split("function writeQuery()", 1)[1].split("\n}\n", 1)[0]
    assert 'query.set("threadId"' in write_query and "token" not in write_query.lower()


def test_the_files_are_package_data() -> None:
    static = resources.files("agui_bridge.console").joinpath("static")
    assert sorted(p.name for p in static.iterdir() if not p.name.startswith(".")) == [
        "console.css",
        "console.js",
        "index.html",
        "markdown.js",
        "vendor",
    ]


@pytest.mark.parametrize(
    ("value", "enabled"),
    [(None, False), ("1", True), ("true", True), ("YES", True), ("on", True), ("0", False), ("false", False)],
)
def test_console_setting_from_the_environment(value: str | None, enabled: bool) -> None:
    environ = {} if value is None else {"IAC_CODE_AGUI_CONSOLE": value}
    assert load_settings(environ).console_enabled is enabled
