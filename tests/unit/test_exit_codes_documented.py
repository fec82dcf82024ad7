"""docs/configuration.md#exit-codes states, per entry point, the status that entry point really uses for an invalid
value or a missing A2A URL (tests/integration/test_entry_points_need_an_a2a_url.py runs them), and the code's
docstrings point to that one table instead of stating a status of their own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agui_bridge.cli.state_init import EXIT_REFUSED
from agui_bridge.config.settings import require_a2a_upstream

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "configuration.md"

#: (a fragment of the entry point's cell, how its "invalid value or no A2A URL" cell begins)
DOCUMENTED_STATUS = [
    ("`agui-bridge serve`", "2"),
    ("`gunicorn -c deploy/gunicorn.conf.py wsgi:app`", "2"),
    ("`wsgi.py` under gunicorn", "3"),
    ("uWSGI", "22"),
    ("Apache mod_wsgi", "no exit"),
    ("`deploy/waitress_serve.py`", "2"),
    ("`agui-bridge state init`", "2"),
    ("`agui-bridge doctor`", "2"),
]


def exit_code_rows() -> dict[str, list[str]]:
    """The rows of the exit-code table, by their first cell."""
    text = CONFIGURATION.read_text(encoding="utf-8")
    start = text.index('<a id="exit-codes"></a>')
    end = text.find("\n## ", text.index("## Exit codes", start) + 1)
    section = text[start : end if end >= 0 else len(text)]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]  # after the header
    cells = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]
    return {row[0]: row[1:] for row in cells}


@pytest.mark.parametrize(("entry_point", "status"), DOCUMENTED_STATUS, ids=[e for e, _ in DOCUMENTED_STATUS])
def test_the_exit_code_table_gives_each_entry_points_status(entry_point: str, status: str) -> None:
    (row,) = [cells for first, cells in exit_code_rows().items() if entry_point in first]
    assert re.match(rf"{re.escape(status)}\b", row[0]), row


def test_the_exit_code_table_has_one_row_per_entry_point() -> None:
    assert len(exit_code_rows()) == len(DOCUMENTED_STATUS)


def test_state_init_refusal_status_is_the_documented_one() -> None:
    (row,) = [cells for first, cells in exit_code_rows().items() if "state init" in first]
    assert row[1].startswith(f"{EXIT_REFUSED}:")


def test_wsgi_py_leaves_with_the_documented_host_statuses() -> None:
    assert 'BOOT_FAILED = 22 if "uwsgi" in sys.modules else 3' in (ROOT / "wsgi.py").read_text(encoding="utf-8")


def test_the_upstream_checks_docstring_points_to_the_table() -> None:
    assert "docs/configuration.md#exit-codes" in (require_a2a_upstream.__doc__ or "")
