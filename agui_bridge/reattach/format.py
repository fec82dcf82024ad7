"""The run record's on-disk layout, shared by its writer, its readers and retention (docs/design.md#reattach).

Where a run's files live (`<state-dir>/replay/<name>.sse`, `.gone`, `.readers/`), how a name is made from
(threadId, runId) without letting client text reach a path, and the header that says who the run belongs to.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from agui_bridge.protocol.sse import COMMENT_PREFIX, encode_comment

REPLAY_DIR = "replay"
RECORD_SUFFIX = ".sse"
TOMBSTONE_SUFFIX = ".gone"
READERS_SUFFIX = ".readers"
HEADER_PREFIX = COMMENT_PREFIX + b"record "
TRUNCATED_FRAME = encode_comment(b"truncated")
TERMINAL_TYPES = frozenset({"RUN_FINISHED", "RUN_ERROR"})
#: The header line is bounded: ids are bounded by admission, the rest is fixed-size.
MAX_HEADER_BYTES = 4096


def record_name(thread_id: str, run_id: str) -> str:
    """A fixed-length file name for a run: no client text reaches the file system. The pair is hashed as a
    JSON array, so no two pairs share a name (`("a\\0b", "c")` and `("a", "b\\0c")` did when joined by NUL)."""
    return hashlib.sha256(json.dumps([thread_id, run_id]).encode("ascii")).hexdigest()


def legacy_record_name(thread_id: str, run_id: str) -> str:
    """The name before record_name hashed a JSON array: records written by an older release (kept at most
    --reattach-retention after they end, then swept like any other) are still found by their runs."""
    return hashlib.sha256(f"{thread_id}\x00{run_id}".encode("utf-8", "surrogatepass")).hexdigest()


def ros_digest(ros_invocation_id: str) -> str:
    return hashlib.sha256(ros_invocation_id.encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=16)
def replay_dir(state_dir: Path) -> Path:
    """The records' directory of a state directory, built once per worker: the path arithmetic would be a fifth
    of a run record's set-up on the hub before RUN_STARTED (docs/design.md#record-dir-once)."""
    return Path(state_dir) / REPLAY_DIR


def ensure_replay_dir(state_dir: Path) -> Path:
    directory = replay_dir(state_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return directory


def record_paths(state_dir: Path, thread_id: str, run_id: str) -> tuple[Path, Path, Path]:
    """(record, tombstone, readers directory) of a run."""
    return _paths(replay_dir(state_dir) / record_name(thread_id, run_id))


def _paths(base: Path) -> tuple[Path, Path, Path]:
    return (
        base.with_name(base.name + RECORD_SUFFIX),
        base.with_name(base.name + TOMBSTONE_SUFFIX),
        base.with_name(base.name + READERS_SUFFIX),
    )


def existing_record_paths(state_dir: Path, thread_id: str, run_id: str) -> tuple[Path, Path, Path]:
    """A reader's `record_paths`: the record (or tombstone) under its current name, else one an older
    release wrote under the legacy name, else the current name (nothing there). The header check that
    follows still compares threadId and runId, so a legacy name shared by two runs finds neither's
    record for the other."""
    current = record_paths(state_dir, thread_id, run_id)
    if current[0].exists() or current[1].exists():
        return current
    legacy = _paths(replay_dir(state_dir) / legacy_record_name(thread_id, run_id))
    return legacy if legacy[0].exists() or legacy[1].exists() else current


@dataclass(frozen=True)
class RecordHead:
    """Who the run belongs to: checked before a reader sees anything."""

    thread_id: str
    run_id: str
    ros: str
    owner: str
    started_ms: int

    def encode(self) -> bytes:
        body = {"v": 1, "threadId": self.thread_id, "runId": self.run_id, "ros": self.ros}
        body |= {"owner": self.owner, "startedMs": self.started_ms}
        return encode_comment(b"record " + json.dumps(body, separators=(",", ":")).encode("utf-8"))


def parse_head(block: bytes) -> RecordHead | None:
    if not block.startswith(HEADER_PREFIX):
        return None
    try:
        body = json.loads(block[len(HEADER_PREFIX) :].strip())
        return RecordHead(
            str(body["threadId"]), str(body["runId"]), str(body["ros"]), str(body["owner"]), int(body["startedMs"])
        )
    except (ValueError, KeyError, TypeError):
        return None


__all__ = [
    "HEADER_PREFIX",
    "MAX_HEADER_BYTES",
    "READERS_SUFFIX",
    "RECORD_SUFFIX",
    "REPLAY_DIR",
    "TERMINAL_TYPES",
    "TOMBSTONE_SUFFIX",
    "TRUNCATED_FRAME",
    "RecordHead",
    "ensure_replay_dir",
    "parse_head",
    "record_name",
    "record_paths",
    "replay_dir",
    "ros_digest",
]
