"""Workspace (`cwd`) resolution and allowed roots (behaviour.md 2.3); touches the filesystem."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from agui_bridge.errors import InvalidInput

CWD_POINTER = "/forwardedProps/iacCode/cwd"


def default_roots() -> tuple[Path, ...]:
    return (Path.cwd().resolve(), Path(tempfile.gettempdir()).resolve())


def _fail(key: str) -> InvalidInput:
    return InvalidInput(key, field=CWD_POINTER, params={"field": CWD_POINTER})


def resolve_cwd(raw: str, roots: Sequence[Path] | None) -> str:
    """The resolved workspace path bound to the thread; created if missing (as the reference)."""
    expanded_user = os.path.expanduser(raw)
    if not raw or not os.path.isabs(expanded_user):
        raise _fail("cwd_not_absolute")
    try:
        logical = os.path.normpath(os.path.expandvars(expanded_user))
        resolved = Path(logical).resolve(strict=False)
    except (OSError, ValueError, RuntimeError):
        raise _fail("cwd_invalid") from None
    allowed = roots if roots is not None else default_roots()
    if not any(resolved == root or resolved.is_relative_to(root) for root in allowed):
        raise _fail("cwd_outside_roots")
    if resolved.exists():
        if not resolved.is_dir():
            raise _fail("cwd_not_directory")
    else:
        try:
            resolved.mkdir(parents=True, exist_ok=True)
        except OSError:
            raise _fail("cwd_cannot_create") from None
    return str(resolved)
