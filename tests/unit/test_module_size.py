"""Every module of agui_bridge/ stays small enough to read in one sitting (docs/design.md#modules)."""

from __future__ import annotations

from pathlib import Path

import agui_bridge

MAX_LINES = 400
PACKAGE = Path(agui_bridge.__file__).resolve().parent
#: The demo's scenario scripts are data, not logic: exempt.
EXEMPT = {Path("demo/scenarios.py")}


def _line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def oversized(root: Path, limit: int = MAX_LINES, exempt: set[Path] = EXEMPT) -> dict[str, int]:
    """The modules under `root` (relative path -> lines) longer than `limit`, exempt ones left out."""
    return {
        str(path.relative_to(root)): lines
        for path in sorted(root.rglob("*.py"))
        if path.relative_to(root) not in exempt and (lines := _line_count(path)) > limit
    }


def test_no_module_of_the_package_is_over_400_lines() -> None:
    modules = list(PACKAGE.rglob("*.py"))
    assert len(modules) > 50  # the package itself was found, not an empty directory
    too_long = oversized(PACKAGE)
    assert too_long == {}, f"split these into modules that each do one thing: {too_long}"


def test_the_check_finds_an_oversized_module_and_honours_the_exemption(tmp_path: Path) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "small.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "demo" / "scenarios.py").write_text("x = 1\n" * (MAX_LINES * 3))
    assert oversized(tmp_path) == {"big.py": MAX_LINES + 1}
