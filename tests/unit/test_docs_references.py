"""The repository explains itself: code and tests cite the project's own docs/design.md, by anchors that exist."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    p for d in ("agui_bridge", "tests") for p in (ROOT / d).rglob("*") if p.suffix in {".py", ".md", ".mjs", ".js"}
]
SOURCES = [p for p in SOURCES if "node_modules" not in p.parts and p.name != Path(__file__).name]
#: Documents outside the repository: a reader of the repository cannot open them, so code cites docs/design.md.
OUTSIDE = re.compile(r"behaviour\.md|\.\./shared|stack-notes|a2a-wire-notes")
CITED_ANCHOR = re.compile(r"design\.md#([a-z0-9-]+)")
#: The reader's documents: the README (the front door) and the reference it links to.
DOCUMENTS = [
    ROOT / "README.md",
    ROOT / "bench" / "README.md",
    ROOT / "deploy" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
]
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCED_BLOCK = re.compile(r"```.*?```", re.S)


def test_no_source_cites_a_document_outside_the_repository() -> None:
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in SOURCES for n, line in enumerate(p.read_text().splitlines(), 1)
                 if OUTSIDE.search(line)]  # fmt: skip
    assert offenders == []


def test_every_cited_design_anchor_exists() -> None:
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', (ROOT / "docs" / "design.md").read_text()))
    cited = {(p.relative_to(ROOT), a) for p in [*SOURCES, *DOCUMENTS] for a in CITED_ANCHOR.findall(p.read_text())}
    assert cited, "the code cites the design document"
    assert sorted((str(p), a) for p, a in cited if a not in anchors) == []


#: Code the repository runs or ships: the package, its tests, the benchmarks, scripts, deployment files and
#: clients. The benchmark reports (bench/results/) and guide (bench/README.md) are documents, not code.
CODE_ROOTS = ("agui_bridge", "tests", "bench", "scripts", "deploy", "clients", "wsgi.py")
SKIPPED_DIRS = {"node_modules", "__pycache__", ".pytest_cache", ".mypy_cache", "results"}
#: A tracker's issue or a review's finding by number, or a numbered section of some other document: none of
#: them can be read from the repository, so a comment says the why itself (or cites a docs/design.md anchor).
UNREADABLE_REFERENCE = re.compile(r"\b(issue|finding)[ _-]?#?\d|\btest_finding_|§ ?\d", re.IGNORECASE)


def _code_files() -> list[Path]:
    files: list[Path] = []
    for name in CODE_ROOTS:
        root = ROOT / name
        if root.is_file():
            files.append(root)
            continue
        for directory, subdirs, names in os.walk(root):
            subdirs[:] = [d for d in subdirs if d not in SKIPPED_DIRS and not d.startswith(".")]
            files += [Path(directory) / n for n in names if not n.endswith((".pyc", ".png", ".ico"))]
    return [p for p in files if p != Path(__file__) and p != ROOT / "bench" / "README.md"]


def test_no_code_or_test_names_an_issue_a_finding_or_a_numbered_section() -> None:
    offenders = []
    for path in _code_files():
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue  # a binary file holds no comment
        offenders += [
            f"{path.relative_to(ROOT)}:{n}" for n, line in enumerate(lines, 1) if UNREADABLE_REFERENCE.search(line)
        ]
    assert _code_files(), "the code roots exist"
    assert offenders == []


def test_no_document_names_an_issue_a_finding_or_a_numbered_section() -> None:
    """The reader's documents and the benchmark reports say what changed in their own words, too."""
    reports = sorted((ROOT / "bench" / "results").glob("*.md"))
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in [*DOCUMENTS, *reports]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if UNREADABLE_REFERENCE.search(line)
    ]
    assert reports, "the benchmark reports exist"
    assert offenders == []


def markdown_anchors(path: Path) -> set[str]:
    """The anchors a link into `path` may name: explicit `<a id>`s and GitHub's slugs of its headings."""
    text = path.read_text(encoding="utf-8")
    headings = re.findall(r"^#+ (.*)$", text, re.M)
    slugs = {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}
    return slugs | set(re.findall(r'<a id="([^"]+)"', text))


def test_every_relative_link_in_the_docs_resolves() -> None:
    """The README sends readers into docs/, bench/ and deploy/: a moved section must not leave a dead link."""
    dead = []
    for document in DOCUMENTS:
        prose = FENCED_BLOCK.sub("", document.read_text(encoding="utf-8"))
        for target in MARKDOWN_LINK.findall(prose):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            destination = (document.parent / path).resolve() if path else document
            if not destination.exists():
                dead.append(f"{document.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and destination.suffix == ".md" and anchor not in markdown_anchors(destination):
                dead.append(f"{document.relative_to(ROOT)}: {target} (no such anchor)")
    assert dead == []


def test_the_readme_is_a_front_door_whose_first_commands_are_the_two_set_up_commands() -> None:
    """At most 200 lines (the reference lives in docs/), opening with the two commands a fresh machine needs."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    first_blocks = [block.strip("`\n").removeprefix("sh\n").strip() for block in FENCED_BLOCK.findall(text)[:2]]
    assert first_blocks == ["bash scripts/serve", "bash scripts/test"]
