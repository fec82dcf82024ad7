"""Workspace (`cwd`) resolution and allowed roots (docs/design.md#workspace-cwd); touches the filesystem.

The client's path is taken literally: `~`, `$VAR` and `%VAR%` are never expanded, so nothing of the
server's environment (secrets, account names) can end up in a directory name, the thread file or
the kernel's request. Length limits are checked before the filesystem is asked anything, so an
over-long path is the client's INVALID_INPUT, never an OSError; OSError texts are never shown.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from agui_bridge.config import limits
from agui_bridge.errors import InvalidInput

CWD_POINTER = "/forwardedProps/iacCode/cwd"
_CWD_FIELD = "forwardedProps.iacCode.cwd"


def default_roots() -> tuple[Path, ...]:
    return (Path.cwd().resolve(), Path(tempfile.gettempdir()).resolve())


def _fail(key: str, **params: object) -> InvalidInput:
    values = {"field": CWD_POINTER, **{name: str(value) for name, value in params.items()}}
    return InvalidInput(key, field=CWD_POINTER, params=values)


def _too_long() -> InvalidInput:
    return InvalidInput(
        "cwd_too_long",
        field=CWD_POINTER,
        params={
            "field": _CWD_FIELD,
            "max_component": str(limits.MAX_PATH_COMPONENT_BYTES),
            "max_path": str(limits.MAX_PATH_BYTES),
        },
    )


def literal_absolute_path(raw: str) -> str:
    """`raw` normalised lexically (`.`/`..`/`//`), with no expansion; INVALID_INPUT if unusable."""
    if not raw or not os.path.isabs(raw):
        raise _fail("cwd_not_absolute")
    if "\x00" in raw:
        raise _fail("cwd_invalid")
    try:
        encoded = raw.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail("cwd_invalid") from None
    if len(encoded) > limits.MAX_PATH_BYTES:
        raise _too_long()
    if any(len(part) > limits.MAX_PATH_COMPONENT_BYTES for part in encoded.split(b"/")):
        raise _too_long()
    return os.path.normpath(raw)


def resolve_cwd(raw: str, roots: Sequence[Path] | None) -> str:
    """The resolved workspace path bound to the thread; created if missing (as the reference)."""
    logical = literal_absolute_path(raw)
    try:
        resolved = Path(logical).resolve(strict=False)
    except (OSError, ValueError, RuntimeError):
        raise _fail("cwd_invalid") from None
    if len(str(resolved).encode("utf-8", "surrogateescape")) > limits.MAX_PATH_BYTES:
        raise _too_long()  # a symlink inside a root may point somewhere longer
    allowed = roots if roots is not None else default_roots()
    if not any(resolved == root or resolved.is_relative_to(root) for root in allowed):
        raise _fail("cwd_outside_roots")
    try:
        exists = resolved.exists()
        if exists and not resolved.is_dir():
            raise _fail("cwd_not_directory")
        if not exists:
            resolved.mkdir(parents=True, exist_ok=True)
    except OSError:
        raise _fail("cwd_cannot_create") from None
    return str(resolved)
