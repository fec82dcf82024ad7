"""The `--config` YAML file of `serve` (docs/design.md#modules): one mapping, kebab-case keys read as snake_case.
PyYAML is imported only when a file is given.
"""

from __future__ import annotations

from typing import Any

from agui_bridge.config.values import ConfigError


def load_yaml_config(path: str | None) -> dict[str, Any]:
    """The file's keys and values; {} without a file or for an empty one; ConfigError when unreadable."""
    if path is None:
        return {}
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError):
        raise ConfigError("Unable to load the AG-UI config file.") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("AG-UI config file must contain a YAML mapping.")
    return {str(k).replace("-", "_"): v for k, v in data.items()}
