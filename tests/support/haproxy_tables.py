"""The shipped placement refresher (deploy/haproxy/agui_haproxy_tables.py), a standalone script, as a module."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.haproxy import REPO_ROOT

TOOL_PATH = REPO_ROOT / "deploy" / "haproxy" / "agui_haproxy_tables.py"
_NAME = "agui_haproxy_tables"


def load_tool() -> ModuleType:
    """Import the script once (deploy/ is no package); dataclasses need it registered in sys.modules."""
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    spec = importlib.util.spec_from_file_location(_NAME, TOOL_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    spec.loader.exec_module(module)
    return module
