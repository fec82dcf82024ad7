"""The console's vendored libraries (agui_bridge/console/static/vendor/) are exactly what the manifest pins.

scripts/vendor-console fetches them from npm and records each file's sha256 in vendor/manifest.json; these
checks make any change of a vendored file deliberate (a new manifest with it) and keep every file shipped
in the wheel with its licence beside it.
"""

from __future__ import annotations

import configparser
import hashlib
import json
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from agui_bridge.web.console_api import vendor_files

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "agui_bridge" / "console" / "static"
VENDOR = STATIC / "vendor"


def _manifest() -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((VENDOR / "manifest.json").read_text(encoding="utf-8"))
    return manifest


def _pinned() -> dict[str, str]:
    """Vendored file name -> sha256 the manifest records."""
    return {name: entry["sha256"] for package in _manifest()["packages"] for name, entry in package["files"].items()}


@pytest.mark.parametrize("name", sorted(_pinned()))
def test_a_vendored_file_matches_the_hash_in_the_manifest(name: str) -> None:
    assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == _pinned()[name]


def test_vendor_holds_only_the_files_the_manifest_lists() -> None:
    assert sorted(p.name for p in VENDOR.iterdir()) == sorted([*_pinned(), "manifest.json"])


@pytest.mark.parametrize("package", _manifest()["packages"], ids=lambda package: package["name"])
def test_every_package_is_pinned_with_its_integrity_and_licence(package: dict[str, Any]) -> None:
    assert package["version"][0].isdigit() and not set(package["version"]) & set("^~*<>| ")
    assert package["integrity"].startswith("sha512-")
    assert [name for name in package["files"] if name.startswith("LICENSE")]


def test_the_served_vendor_files_are_the_scripts_and_stylesheets() -> None:
    served = vendor_files()
    assert set(served) == {name for name in _pinned() if name.endswith((".js", ".mjs", ".css"))}
    assert "manifest.json" not in served and not [name for name in served if name.startswith("LICENSE")]


def test_every_console_file_ships_in_the_wheel() -> None:
    """setup.cfg's package_data globs match every file under static/: a file ships when the globs of its own
    package (its directory) or of a package above it, relative to that package, match it."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    package_data = config["options.package_data"]
    files = [p.relative_to(ROOT).as_posix() for p in STATIC.rglob("*") if p.is_file()]
    assert files
    assert [f for f in files if not _shipped(f, package_data)] == []


def _shipped(path: str, package_data: configparser.SectionProxy) -> bool:
    """setuptools' package_data semantics: globs are relative to their package; `*` stays in one directory."""
    parts = PurePosixPath(path).parts
    for depth in range(len(parts) - 1, 0, -1):
        package, inside = ".".join(parts[:depth]), PurePosixPath(*parts[depth:])
        globs = [g.strip() for g in package_data.get(package, "").split(",") if g.strip()]
        if any(len(inside.parts) == len(PurePosixPath(g).parts) and inside.match(g) for g in globs):
            return True
    return False


def test_the_console_imports_the_vendored_modules_by_relative_url() -> None:
    js = (STATIC / "markdown.js").read_text(encoding="utf-8")
    for name in ("markdown-it.esm.min.mjs", "purify.es.mjs", "highlight.min.js", "highlightjs-terraform.js"):
        assert f'from "./vendor/{name}"' in js
    assert not [line for line in js.splitlines() if line.startswith("import") and "./vendor/" not in line]  # no CDN
