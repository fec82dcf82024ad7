"""The capabilities document: what this server supports, built from the running settings.

Pure: the route (`web.capabilities_api`) only serialises it. The shape is AG-UI's `AgentCapabilities`
(camelCase wire names) wherever that model has a field for the fact; everything AG-UI has no field
for yet lives under `custom.iacCode`, so a client reading only the standard categories is not misled.
"""

from __future__ import annotations

from typing import Any

from agui_bridge.config.settings import Settings
from agui_bridge.i18n.language import SUPPORTED
from agui_bridge.protocol.events import PROTOCOL_VERSION
from agui_bridge.validation.content import ALLOWED_IMAGE_TYPES, MAX_IMAGE_BYTES, MAX_TOTAL_IMAGE_BYTES

#: The AG-UI protocol version the events follow (the one RUN_STARTED declares), and the A2A dialect upstream.
AGUI_PROTOCOL_VERSION = PROTOCOL_VERSION
A2A_PROTOCOL_VERSION = "1.0"
CAPABILITIES_SCHEMA_VERSION = 1


def reattach_supported(settings: Settings) -> bool:
    """Runs are recorded (docs/design.md#reattach) unless the per-run bound is 0."""
    return settings.reattach_max_bytes > 0


def reattach_window_s(settings: Settings) -> int | float:
    return _seconds(settings.reattach_window_s) if reattach_supported(settings) else 0


def _seconds(value: float) -> int | float:
    """Whole seconds print as integers (540, not 540.0)."""
    return int(value) if float(value).is_integer() else value


def build_capabilities(settings: Settings) -> dict[str, Any]:
    """The document for `settings`: the same values `serve` runs with, so it cannot drift from them."""
    input_types = ["text/plain", *sorted(ALLOWED_IMAGE_TYPES)]
    return {
        "identity": {
            "name": "agui-bridge",
            "type": "a2a-bridge",
            "description": "AG-UI server in front of an A2A 1.0 agent kernel (iac-code).",
            "version": settings.server_version,
        },
        "transport": {
            "streaming": True,
            "websocket": False,
            "httpBinary": False,
            "pushNotifications": False,
            "resumable": reattach_supported(settings),
        },
        "tools": {"supported": True, "clientProvided": False},
        "output": {"structuredOutput": False, "supportedMimeTypes": ["text/plain"]},
        "state": {"snapshots": False, "deltas": False, "persistentState": True},
        "reasoning": {"supported": True, "streaming": True, "encrypted": False},
        "multimodal": {
            "input": {"image": True, "audio": False, "video": False, "pdf": False, "file": False},
            "output": {"image": False, "audio": False},
        },
        "humanInTheLoop": {
            "supported": True,
            "approvals": True,
            "interrupts": True,
            "approveWithEdits": False,
        },
        "custom": {
            "iacCode": {
                "schemaVersion": CAPABILITIES_SCHEMA_VERSION,
                "protocol": {
                    "agui": AGUI_PROTOCOL_VERSION,
                    "a2a": A2A_PROTOCOL_VERSION,
                    "serverVersion": settings.server_version,
                },
                "interrupts": {
                    "ttlSeconds": _seconds(settings.interrupt_ttl_s),
                    "responseSchemas": True,
                    "expiresAt": True,
                },
                "reattach": {
                    "supported": reattach_supported(settings),
                    "windowSeconds": reattach_window_s(settings),
                    "retentionSeconds": _seconds(settings.reattach_retention_s),
                    "maxRecordBytes": settings.reattach_max_bytes,
                },
                "input": {
                    "contentTypes": input_types,
                    "maxImageBytes": MAX_IMAGE_BYTES,
                    "maxTotalImageBytes": MAX_TOTAL_IMAGE_BYTES,
                },
                "limits": {
                    "maxRequestBytes": settings.max_request_bytes,
                    "maxExtensionRequestBytes": min(settings.max_request_bytes, settings.max_cancel_bytes),
                    "maxActiveRunsPerWorker": settings.max_active_runs_per_worker,
                    "heartbeatIntervalSeconds": _seconds(settings.heartbeat_interval_s),
                },
                "languages": {"supported": list(SUPPORTED), "default": settings.default_language},
                "extensions": {
                    "cancel": "/extensions/iac-code/v1/executions/{executionId}/cancel",
                    "status": "/extensions/iac-code/v1/threads/{threadId}/status",
                    "capabilities": "/extensions/iac-code/v1/capabilities",
                    "reattach": "/extensions/iac-code/v1/threads/{threadId}/runs/{runId}/events",
                },
            }
        },
    }
