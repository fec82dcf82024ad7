"""The JSON error envelope for every pre-stream error, localised (docs/design.md#error-envelope)."""

from __future__ import annotations

import json
import logging

from flask import Flask, Response, g, request
from werkzeug.exceptions import HTTPException

from agui_bridge.errors import BridgeError, ServiceUnavailable
from agui_bridge.i18n.language import language_from_accept, translate

log = logging.getLogger(__name__)


def error_response(error: BridgeError, language: str) -> Response:
    message = error.raw_message or translate(error.message_key, language, **error.params)
    body: dict[str, object] = {"code": str(error.code), "message": message}
    if error.field is not None:
        body["field"] = error.field
    response = Response(
        json.dumps({"error": body}, ensure_ascii=False, separators=(",", ":")),
        status=error.http_status,
        mimetype="application/json",
    )
    if isinstance(error, ServiceUnavailable):
        response.headers["Retry-After"] = "5"
    return response


def request_language(default: str) -> str:
    language = getattr(g, "agui_language", None)
    if isinstance(language, str):
        return language
    return language_from_accept(request.headers.get("Accept-Language"), default)


def register_error_handlers(app: Flask, default_language: str) -> None:
    @app.errorhandler(BridgeError)
    def handle_bridge_error(error: BridgeError) -> Response:
        return error_response(error, request_language(default_language))

    @app.errorhandler(HTTPException)
    def handle_http_exception(error: HTTPException) -> Response:
        """404/405 stay plain text, as the reference serves them (docs/design.md#routes)."""
        response = Response(f"{error.code} {error.name}", status=error.code or 500, mimetype="text/plain")
        if error.code == 405:
            allowed = error.get_response().headers.get("Allow")
            if allowed:
                response.headers["Allow"] = allowed
        return response

    @app.errorhandler(Exception)
    def handle_unexpected(error: Exception) -> Response:
        log.exception("unexpected error before the stream started")
        return error_response(ServiceUnavailable(), request_language(default_language))
