"""Checks of the state directory shared by the e2e tests: documented keys only, no secret anywhere."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The schemaVersion 1 document (docs/design.md#state-document), plus the lease and the prune clock.
DOCUMENTED_KEYS = frozenset(
    {
        "schemaVersion",
        "threadId",
        "contextId",
        "cwd",
        "userId",
        "iacCodeSessionId",
        "execution",
        "runDigests",
        "appliedResumeDigests",
        "terminalExecutionIds",
    }
)
OPTIONAL_KEYS = frozenset({"activeRun", "lastActivityAt"})
EXECUTION_KEYS = frozenset(
    {
        "executionId",
        "rosInvocationId",
        "taskId",
        "pipelineSequence",
        "pipelineOpenSteps",
        "textSnapshotDigests",
        "pending",
    }
)


class Secrets:
    """Distinctive values that cannot occur by chance (hex only, so no demo scenario keyword)."""

    def __init__(self) -> None:
        tag = secrets.token_hex(6)
        self.llm_api_key = f"llmkey0{tag}{secrets.token_hex(8)}"
        self.header = f"hdrsecret0{tag}{secrets.token_hex(8)}"
        self.access_key_id = f"akid0{tag}{secrets.token_hex(8)}"
        self.access_key_secret = f"aksecret0{tag}{secrets.token_hex(8)}"
        self.security_token = f"ststoken0{tag}{secrets.token_hex(8)}"
        self.message = f"private note 0{tag}{secrets.token_hex(8)} about the payroll"
        self.model = f"model0{tag}{secrets.token_hex(4)}"
        self.bearer = f"bridgebearer0{tag}{secrets.token_hex(8)}"

    def props(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "llmApiKey": self.llm_api_key,
            "llmHeaders": {"X-Secret": self.header},
            "thinking": {"enabled": True, "effort": "high", "budget": 1024},
            "alibabaCloud": {
                "accessKeyId": self.access_key_id,
                "accessKeySecret": self.access_key_secret,
                "securityToken": self.security_token,
                "regionId": "cn-hangzhou",
            },
        }

    def credentials(self) -> dict[str, str]:
        """Strings that may appear nowhere: not in state, not in any log."""
        return {
            "llmApiKey": self.llm_api_key,
            "llmHeaders.X-Secret": self.header,
            "accessKeyId": self.access_key_id,
            "accessKeySecret": self.access_key_secret,
            "securityToken": self.security_token,
            "message text": self.message,
            "bridge bearer token": self.bearer,
        }

    def never_stored(self) -> dict[str, str]:
        """8.2 additionally keeps model options out of the state file."""
        return {**self.credentials(), "model": self.model}


def leaks(blob: bytes, needles: dict[str, str]) -> list[str]:
    """Names of the needles found in ``blob`` as UTF-8 or as JSON ``\\u`` escapes of it."""
    found = []
    for name, needle in needles.items():
        forms = {needle.encode(), json.dumps(needle).strip('"').encode()}
        if any(form in blob for form in forms):
            found.append(name)
    return found


def files_under(root: Path) -> Iterator[Path]:
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            if path.is_file() and not path.is_symlink():
                yield path


def assert_state_clean(state_dir: Path, needles: dict[str, str]) -> list[Path]:
    files = list(files_under(state_dir))
    assert files, f"nothing was written under {state_dir}"
    for path in files:
        found = leaks(path.read_bytes(), needles)
        assert not found, f"{found} found in {path}"
    return files


def assert_documented_document(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    keys = set(document)
    assert keys >= DOCUMENTED_KEYS, f"missing {sorted(DOCUMENTED_KEYS - keys)}"
    assert keys <= DOCUMENTED_KEYS | OPTIONAL_KEYS, (
        f"undocumented keys {sorted(keys - DOCUMENTED_KEYS - OPTIONAL_KEYS)}"
    )
    assert document["schemaVersion"] == 1
    assert set(document["execution"]) == EXECUTION_KEYS, sorted(document["execution"])
    return document
