"""No test module imports another: what tests share lives in tests/support/ (or a conftest for fixtures).

Importing a test module runs its collection-time side effects and re-collects its tests under another
name; a helper hidden in a test module is also found by nobody who looks for it.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]


def _is_test_module(dotted: str) -> bool:
    return any(part.startswith(("test_", "conftest")) for part in dotted.split("."))


def imported_test_modules(source: str) -> list[str]:
    """The test modules (a name part starting with test_ or conftest) that `source` imports."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            if _is_test_module(base):
                found.append(base)
            else:  # `from tests.unit import test_x`
                found += [f"{base}.{alias.name}" for alias in node.names if _is_test_module(alias.name)]
    return found


def test_the_scan_finds_every_form_of_import() -> None:
    source = (
        "import tests.unit.test_a\n"
        "from tests.e2e.test_b import helper\n"
        "from tests.unit import test_c\n"
        "from .test_d import x\n"
        "from tests.conftest import fixture\n"
        "from tests.support.harness import run_body\n"
        "def f():\n    from tests.unit.test_e import y\n"
    )
    assert imported_test_modules(source) == [
        "tests.unit.test_a",
        "tests.e2e.test_b",
        "tests.unit.test_c",
        ".test_d",
        "tests.conftest",
        "tests.unit.test_e",
    ]


def test_no_module_under_tests_imports_a_test_module() -> None:
    offenders = {
        str(path.relative_to(TESTS_DIR)): imported
        for path in sorted(TESTS_DIR.rglob("*.py"))
        if "node_modules" not in path.parts and (imported := imported_test_modules(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, "move what they share into tests/support/"
