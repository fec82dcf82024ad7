"""The web console's static files (`static/`: one HTML page, one stylesheet, two ES modules and the vendored
libraries under `static/vendor/`, pinned by its `manifest.json`; no build step).

Served by `agui_bridge.web.console_api` at `GET /console` when `Settings.console_enabled` is set.
"""
