"""The version is written once, in `agui_bridge/__init__.py`; the package metadata and Settings read it."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import agui_bridge
from agui_bridge.config.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def test_the_distribution_and_settings_report_the_package_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", agui_bridge.__version__)
    assert version("agui-bridge") == agui_bridge.__version__
    assert Settings.__dataclass_fields__["server_version"].default == agui_bridge.__version__


def test_no_other_file_spells_the_version() -> None:
    spelled = re.escape(agui_bridge.__version__)
    offenders = [
        str(path.relative_to(REPO))
        for path in [REPO / "setup.cfg", *(REPO / "agui_bridge").rglob("*.py")]
        if path.name != "_version.py"
        if re.search(rf"['\"= ]{spelled}['\"\n]", path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
