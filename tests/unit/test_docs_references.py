"""The repository explains itself: code and tests cite the project's own docs/design.md, by anchors that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    p for d in ("agui_bridge", "tests") for p in (ROOT / d).rglob("*") if p.suffix in {".py", ".md", ".mjs", ".js"}
]
SOURCES = [p for p in SOURCES if "node_modules" not in p.parts and p.name != Path(__file__).name]
#: Documents outside the repository that comments once cited (now replaced by docs/design.md anchors).
OUTSIDE = re.compile(r"behaviour\.md|\.\./shared|stack-notes|a2a-wire-notes")
CITED_ANCHOR = re.compile(r"design\.md#([a-z0-9-]+)")


def test_no_source_cites_a_document_outside_the_repository() -> None:
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in SOURCES for n, line in enumerate(p.read_text().splitlines(), 1)
                 if OUTSIDE.search(line)]  # fmt: skip
    assert offenders == []


def test_every_cited_design_anchor_exists() -> None:
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', (ROOT / "docs" / "design.md").read_text()))
    cited = {
        (p.relative_to(ROOT), a) for p in [*SOURCES, ROOT / "README.md"] for a in CITED_ANCHOR.findall(p.read_text())
    }
    assert cited, "the code cites the design document"
    assert sorted((str(p), a) for p, a in cited if a not in anchors) == []
