"""`GET /extensions/iac-code/v1/capabilities` through the Flask test client.

The document validates against `ag-ui-protocol`'s `AgentCapabilities` with no field the model does not
declare (our own facts live under `custom.iacCode`), follows the settings the app runs with, and is
behind the bearer token like the other extensions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ag_ui.core import AgentCapabilities
from pydantic import BaseModel

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.i18n.language import SUPPORTED, translate
from agui_bridge.protocol import events as ev

PATH = "/extensions/iac-code/v1/capabilities"


def undeclared_fields(model: BaseModel, where: str = "") -> list[str]:
    """Every key the model kept as an extra (a name AG-UI does not declare), at any depth."""
    found = [f"{where}/{key}" for key in (model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            found += undeclared_fields(value, f"{where}/{name}")
    return found


def get(settings: Settings, **headers: str) -> Any:
    return create_app(settings).test_client().get(PATH, headers=headers)


def test_document_validates_against_the_ag_ui_model(settings: Settings) -> None:
    response = get(settings)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    document = response.get_json()
    model = AgentCapabilities.model_validate(document)
    assert undeclared_fields(model) == []
    # Serialising the model back gives exactly the document: every value has its declared type.
    assert model.model_dump(mode="json", by_alias=True, exclude_none=True) == document
    assert model.transport is not None and model.transport.streaming is True
    assert model.transport.resumable is True  # runs are recorded: a dropped stream can be reattached
    assert model.tools is not None and model.tools.client_provided is False
    assert model.human_in_the_loop is not None and model.human_in_the_loop.interrupts is True
    assert model.reasoning is not None and model.reasoning.supported is True
    assert model.multimodal is not None and model.multimodal.input is not None
    assert model.multimodal.input.image is True and model.multimodal.input.audio is False


def test_document_follows_the_running_settings(settings: Settings, tmp_path: Path) -> None:
    custom = settings.replace(
        interrupt_ttl_s=123.0,
        max_active_runs_per_worker=7,
        heartbeat_interval_s=2.5,
        max_request_bytes=1_000_000,
        default_language="de",
        server_version="9.8.7",
        reattach_window_s=45.0,
        reattach_retention_s=600.0,
        reattach_max_bytes=1_000,
    )
    document = get(custom).get_json()
    iac = document["custom"]["iacCode"]
    assert iac["interrupts"] == {"ttlSeconds": 123, "responseSchemas": True, "expiresAt": True}
    assert iac["limits"] == {
        "maxRequestBytes": 1_000_000,
        "maxExtensionRequestBytes": 64 * 1024,
        "maxActiveRunsPerWorker": 7,
        "heartbeatIntervalSeconds": 2.5,
    }
    assert iac["languages"] == {"supported": list(SUPPORTED), "default": "de"}
    assert iac["protocol"]["serverVersion"] == "9.8.7" == document["identity"]["version"]
    assert iac["protocol"]["agui"] == "1.0" == ev.run_started("t", "r")["protocolVersion"]  # what RUN_STARTED declares
    assert iac["reattach"] == {
        "supported": True, "windowSeconds": 45, "retentionSeconds": 600, "maxRecordBytes": 1_000,
    }  # fmt: skip
    assert iac["extensions"]["reattach"] == "/extensions/iac-code/v1/threads/{threadId}/runs/{runId}/events"
    assert "text/plain" in iac["input"]["contentTypes"] and "image/png" in iac["input"]["contentTypes"]


def test_without_a_record_nothing_is_resumable(settings: Settings) -> None:
    document = get(settings.replace(reattach_max_bytes=0, reattach_window_s=30.0)).get_json()
    assert document["transport"]["resumable"] is False
    assert document["custom"]["iacCode"]["reattach"]["supported"] is False
    assert document["custom"]["iacCode"]["reattach"]["windowSeconds"] == 0


def test_token_is_required_when_configured_and_the_401_is_localised(settings: Settings) -> None:
    guarded = settings.replace(auth_token="capabilities-token")
    refused = get(guarded, **{"Accept-Language": "fr"})
    assert refused.status_code == 401
    assert refused.get_json() == {"error": {"code": "UNAUTHORIZED", "message": translate("unauthorized", "fr")}}
    assert get(guarded, Authorization="Bearer wrong").status_code == 401
    accepted = get(guarded, Authorization="Bearer capabilities-token")
    assert accepted.status_code == 200
    assert "capabilities-token" not in accepted.get_data(as_text=True)


def test_other_methods_are_refused(settings: Settings) -> None:
    response = create_app(settings).test_client().post(PATH, json={})
    assert response.status_code == 405
