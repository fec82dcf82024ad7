"""The value converters of the serve options (docs/design.md#modules): each takes a raw flag, environment or
YAML value and returns the typed value or raises (TypeError/ValueError: the option's own one-line error;
ConfigError: a message of its own). Then the path rules that turn a set or unset path option into its
`Settings` value. stdlib only (this runs in the gunicorn master before fork).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agui_bridge.config.loopback import UpstreamUrlError, normalise_upstream_url


class ConfigError(ValueError):
    """One line for the user; the CLI exits with status 2."""


def string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def port(value: Any, *, lowest: int = 1) -> int:
    """A TCP port from `lowest` (1, or 0 where 0 means "off") to 65535."""
    if isinstance(value, bool):
        raise ValueError(value)
    number = int(value)
    if not lowest <= number <= 65535:
        raise ValueError(number)
    return number


def port_or_off(value: Any) -> int:
    """A port, or 0 for "off"."""
    return port(value, lowest=0)


def positive_int(value: Any) -> int:
    number = non_negative_int(value)
    if number < 1:
        raise ValueError(value)
    return number


def non_negative(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(value)
    number = float(value)
    if not number >= 0 or number == float("inf"):
        raise ValueError(value)
    return number


def non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(value)
    number = int(value)
    if number < 0:
        raise ValueError(value)
    return number


def positive(value: Any) -> float:
    number = non_negative(value)
    if number <= 0:
        raise ValueError(value)
    return number


def choice(*allowed: str) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        text = string(value).lower()
        if text not in allowed:
            raise ValueError(value)
        return text

    return convert


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = string(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(value)


def normalise_a2a_url(value: Any) -> str:
    """A loopback http(s) URL (agui_bridge.config.loopback); anything else stops the start with the failed rule."""
    try:
        return normalise_upstream_url(string(value))
    except UpstreamUrlError as exc:
        raise ConfigError(str(exc)) from None


def host(value: Any) -> str:
    host = string(value).strip()
    if not host or any(ch.isspace() for ch in host):
        raise ValueError(value)
    return host


def token(name: str) -> Callable[[Any], str]:
    """A token that is set must be usable: an empty or blank one is a mistake, never "auth off"."""

    def convert(value: Any) -> str:
        token = string(value)
        if not token.strip():
            raise ConfigError(f"{name} (IAC_CODE_AGUI_{name.upper()}) is set but empty: set a token or unset it.")
        return token

    return convert


def paths(value: Any) -> str:
    """allowed_cwds: a list in YAML, an os.pathsep-separated string elsewhere; kept as the string."""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return os.pathsep.join(value)
    return string(value)


def default_state_dir(environ: Mapping[str, str]) -> Path:
    """`<config-dir>/agui`, config-dir = IAC_CODE_CONFIG_DIR or ~/.iac-code (docs/design.md#state-location)."""
    config_dir = environ.get("IAC_CODE_CONFIG_DIR")
    base = Path(os.path.expandvars(os.path.expanduser(config_dir))) if config_dir else Path.home() / ".iac-code"
    return (base / "agui").resolve()


def expand_path(raw: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(raw))).resolve()


def allowed_roots(raw: str) -> tuple[Path, ...]:
    """Allowed workspace roots from an os.pathsep-separated list; entries that are not existing
    directories are ignored (docs/design.md#workspace-cwd)."""
    roots: list[Path] = []
    for entry in raw.split(os.pathsep):
        if not entry.strip():
            continue
        path = Path(os.path.expanduser(entry.strip())).resolve()
        if path.is_dir():
            roots.append(path)
    return tuple(roots)
