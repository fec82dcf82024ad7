"""A `POST /` body read once: the run input, the language of every answer and the request digest.

`read_run_request` is the CPU-bound step of `POST /` (validation and the canonical JSON of the digest),
run once, off the gevent hub for large bodies (`web/request_body.py`). The service takes its result and
never parses the body again (docs/design.md#pre-stream-checks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agui_bridge.errors import InvalidInput
from agui_bridge.i18n.language import select_language
from agui_bridge.protocol.digest import request_digest
from agui_bridge.validation.results import RunInput
from agui_bridge.validation.run_input import parse_run_input, raw_preferred_language


@dataclass(frozen=True)
class RunRequest:
    """A decoded `POST /` body after validation.

    A body that failed validation keeps its refusal instead of raising it at once: the capacity check
    (503) comes before validation errors (docs/design.md#pre-stream-checks), so the service raises it
    from `run_input()` after that check.
    """

    #: The validated input, or the first rule it broke.
    validated: RunInput | InvalidInput
    #: The language of every answer to this request (`i18n.select_language`).
    language: str
    #: `protocol/digest.request_digest` of the body ("" for a refused body: no run is admitted).
    digest: str = ""

    def run_input(self) -> RunInput:
        """The validated input, or the body's validation error raised."""
        if isinstance(self.validated, InvalidInput):
            raise self.validated
        return self.validated


def read_run_request(raw: dict[str, Any], accept_language: str | None, default_language: str) -> RunRequest:
    """Validate `raw` once and pick the language of the answers (docs/design.md#language-selection).

    The language is `select_language`'s: a valid body's `preferredLanguage` comes from the validated
    input; a refused body's from the body as sent, so even its envelope error is in the client's language.
    """
    try:
        run = parse_run_input(raw)
    except InvalidInput as refusal:
        language = select_language(accept_language, raw_preferred_language(raw), default_language)
        return RunRequest(refusal, language)
    language = select_language(accept_language, run.props.preferred_language, default_language)
    return RunRequest(run, language, request_digest(raw))
