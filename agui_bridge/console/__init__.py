"""The web console's static files (`static/`: one HTML page, one stylesheet, one ES module; no build step).

Served by `agui_bridge.web.console_api` at `GET /console` when `Settings.console_enabled` is set.
"""
