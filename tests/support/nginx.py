"""A private nginx on 127.0.0.1 serving the shipped site (deploy/nginx/agui-bridge.conf), for e2e tests.

The site is used as shipped except for what ties it to a machine: its listen port, its upstream's address and
its access log path (all under a temporary prefix). One process (`master_process off`), in the foreground.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agui_bridge.demo.testing import free_port
from tests.support.ci import skip_or_fail_in_ci
from tests.support.eventually import eventually
from tests.support.harness import REPO_ROOT

SITE = REPO_ROOT / "deploy" / "nginx" / "agui-bridge.conf"
ENGLISH_CATALOG = REPO_ROOT / "agui_bridge" / "i18n" / "catalog" / "en.json"


def bridge_error_envelope(code: str, catalog_key: str) -> dict[str, Any]:
    """The bridge's error envelope (docs/http-api.md) with the catalog's English message: what the site's own
    JSON answers copy, so they must match it word for word."""
    catalog = json.loads(ENGLISH_CATALOG.read_text(encoding="utf-8"))
    return {"error": {"code": code, "message": catalog[catalog_key]}}


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    return found or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def require_nginx() -> None:
    """Skip a test that needs nginx when it is absent (fail it when CI is set: scripts/test installs it)."""
    if nginx_binary() is None:
        skip_or_fail_in_ci("nginx is not installed (run: bash scripts/install-host-tools)")


def adapted_site(port: int, upstream: str, prefix: Path) -> str:
    """The shipped site with only its port, upstream and access log path changed."""
    text = SITE.read_text(encoding="utf-8")
    text, listens = re.subn(
        r"^(\s*)listen 80;\n\s*listen \[::\]:80;\n", rf"\1listen 127.0.0.1:{port};\n", text, count=1, flags=re.M
    )
    text, upstreams = re.subn(r"^(\s*)server 127\.0\.0\.1:8000;", rf"\1server {upstream};", text, count=1, flags=re.M)
    text, logs = re.subn(r"access_log /var/log/nginx/access\.log", f"access_log {prefix}/access.log", text, count=1)
    assert (listens, upstreams, logs) == (1, 1, 1), "the shipped site no longer has the lines this adapts"
    return text


def main_config(prefix: Path, site: Path) -> str:
    """A minimal nginx.conf around the site, as scripts/lint-deploy builds it, every path under `prefix`."""
    temp_paths = "\n".join(
        f"    {kind}_temp_path {prefix}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"pid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;\ndaemon off;\nmaster_process off;\n"
        f"events {{}}\nhttp {{\n{temp_paths}\n    include {site};\n}}\n"
    )


@contextlib.contextmanager
def private_nginx(upstream_port: int, prefix: Path) -> Iterator[str]:
    """Run the site in front of 127.0.0.1:`upstream_port`; yields its base URL."""
    binary = nginx_binary()
    assert binary, "nginx is not installed (scripts/install-host-tools installs it)"
    prefix.mkdir(parents=True, exist_ok=True)
    port = free_port()
    site = prefix / "agui-bridge.conf"
    site.write_text(adapted_site(port, f"127.0.0.1:{upstream_port}", prefix), encoding="utf-8")
    config = prefix / "nginx.conf"
    config.write_text(main_config(prefix, site), encoding="utf-8")
    process = subprocess.Popen(
        [binary, "-p", str(prefix), "-c", str(config), "-e", str(prefix / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> None:
        assert process.poll() is None, (prefix / "error.log").read_text(errors="replace")[-2000:]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError as exc:
            raise AssertionError(f"nginx not listening yet: {exc}") from None

    try:
        eventually(listening, timeout_s=15, interval_s=0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
