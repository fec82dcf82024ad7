"""Settings declared once; `load_settings` is the one parse and validation that every entry point uses."""

from agui_bridge.config.settings import load_settings as load_settings
from agui_bridge.config.values import ConfigError as ConfigError

__all__ = ["ConfigError", "load_settings"]
