"""Ask a bridge's agent-check port as HAProxy does (docs/design.md#agent-check)."""

from __future__ import annotations

import socket


def ask_agent(port: int, send: bytes = b"", host: str = "127.0.0.1", timeout_s: float = 5.0) -> bytes:
    """Connect, send `agent-send` (if any), read everything up to the responder's close."""
    with socket.create_connection((host, port), timeout=timeout_s) as connection:
        if send:
            connection.sendall(send)
        received = b""
        while chunk := connection.recv(4096):
            received += chunk
        return received
