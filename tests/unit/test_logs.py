from __future__ import annotations

import logging

import pytest

from agui_bridge.logs import REDACTED, RedactingFilter, redact


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer abc.DEF-123", "abc.DEF-123"),
        ('{"llmApiKey": "sk-live-1"}', "sk-live-1"),
        ("iac_code_api_key=sk-live-2", "sk-live-2"),
        ("alibaba_cloud_access_key_secret='AKSECRET'", "AKSECRET"),
        ('"accessKeySecret":"hush"', "hush"),
        ('"securityToken": "sts-token"', "sts-token"),
    ],
)
def test_secrets_are_scrubbed(text: str, secret: str) -> None:
    scrubbed = redact(text)
    assert secret not in scrubbed and REDACTED in scrubbed


def test_ordinary_text_is_untouched() -> None:
    assert redact("run ended outcome=success") == "run ended outcome=success"


def test_filter_scrubs_args_before_formatting() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "headers %s", ({"Authorization": "Bearer t0k3n"},), None)
    RedactingFilter().filter(record)
    assert "t0k3n" not in record.getMessage()
