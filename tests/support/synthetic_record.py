"""A run record written directly in the record format: tens of MiB in well under a second, for the tests
of reattach's bounds (a real run of that size would take minutes)."""

from __future__ import annotations

from pathlib import Path

from agui_bridge.protocol.sse import encode_numbered
from agui_bridge.reattach.format import RecordHead, ensure_replay_dir, record_paths, ros_digest

OWNER = "host:1:1"


def text_frame(position: int, delta_bytes: int) -> bytes:
    return encode_numbered(position, {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x" * delta_bytes})


def write_synthetic_record(
    state_dir: Path,
    thread_id: str,
    run_id: str,
    ros_invocation_id: str,
    *,
    size_bytes: int,
    frame_bytes: int = 4096,
    finished: bool = True,
    owner: str = OWNER,
) -> int:
    """Write a record of about `size_bytes` (text frames of about `frame_bytes`, a terminal frame when
    `finished`) and return its last event id."""
    ensure_replay_dir(state_dir)
    record = record_paths(state_dir, thread_id, run_id)[0]
    head = RecordHead(thread_id, run_id, ros_digest(ros_invocation_id), owner, 1)
    position = 0
    with open(record, "wb") as handle:
        handle.write(head.encode())
        written = 0
        batch: list[bytes] = []
        while written < size_bytes:
            position += 1
            frame = text_frame(position, max(1, frame_bytes - 80))
            batch.append(frame)
            written += len(frame)
            if len(batch) >= 256:
                handle.write(b"".join(batch))
                batch = []
        if finished:
            position += 1
            batch.append(encode_numbered(position, {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id}))
        handle.write(b"".join(batch))
    record.chmod(0o600)
    return position
