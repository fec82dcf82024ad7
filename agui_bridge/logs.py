"""The log formatters under their former class paths.

A gunicorn `logconfig_dict` written against an earlier release names `agui_bridge.logs.JsonFormatter` or
`agui_bridge.logs.TextFormatter` (the values `gunicorn_config.FORMATTERS` had): those paths keep working.
The formatters live in `agui_bridge.observability.logs`. Only stdlib at import (the unpatched master loads it).
"""

from agui_bridge.observability.logs import JsonFormatter as JsonFormatter
from agui_bridge.observability.logs import TextFormatter as TextFormatter

__all__ = ["JsonFormatter", "TextFormatter"]
