"""A scripted OpenAI-compatible chat-completions server on loopback, the LLM of the real-kernel tier.

The kernel (`iac-code a2a`) asks it for every turn; the script is chosen by a marker in the last user
message, so one server serves every test:

* ``[REASON]`` reasoning (``reasoning_content``) then text;
* ``[WRITE]`` a ``write_file`` tool call (the kernel asks for a permission first);
* ``[BASH]`` a ``bash`` tool call;
* ``[SLOW]`` text in many chunks with a pause between them (a turn that runs long enough to cancel);
* ``[SILENT]`` nothing for ``SILENT_S`` seconds, then text (longer than the bridge's heartbeat);
* ``[ASK]`` in a Pipeline turn: the kernel's ``ask_user_question`` tool (only Pipeline steps offer it;
  this script never concludes a step with ``complete_step``, so the kernel fails the step afterwards);
* anything else: plain text.

After a tool ran, the conversation's last message has role ``tool``: the answer is text that ends the turn.
Every request is recorded (``requests``) so a test can check what the kernel sent.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "scripted-model"
PLAIN_TEXT = "Hello from the scripted model."
TOOL_DONE_TEXT = "The tool finished."
SLOW_CHUNKS = 40
SLOW_PAUSE_S = 0.25
SILENT_S = 3.0
QUESTION = "Which instance size?"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _usage() -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def _text(text: str, pieces: int = 3, pause_s: float = 0.0) -> Iterator[dict[str, Any]]:
    words = text.split(" ")
    size = max(1, len(words) // pieces)
    for start in range(0, len(words), size):
        if pause_s:
            time.sleep(pause_s)
        piece = " ".join(words[start : start + size])
        yield _chunk({"role": "assistant", "content": piece + (" " if start + size < len(words) else "")})
    yield _chunk({}, "stop")


def _tool_call(name: str, arguments: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield _chunk({"role": "assistant", "content": f"I will call {name}. "})
    encoded = json.dumps(arguments)
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    half = len(encoded) // 2
    yield _chunk(
        {
            "tool_calls": [
                {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": encoded[:half]}}
            ]
        }
    )
    yield _chunk({"tool_calls": [{"index": 0, "function": {"arguments": encoded[half:]}}]})
    yield _chunk({}, "tool_calls")


def _working_directory(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        text = _text_of(message.get("content"))
        marker = "Working directory: `"
        if marker in text:
            return text.split(marker, 1)[1].split("`", 1)[0]
    return "."


def _tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in body.get("tools") or [] if "function" in t}


def script(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The chunks of one streamed answer."""
    messages = body.get("messages") or []
    tools = _tools(body)
    if messages and messages[-1].get("role") == "tool":
        yield from _text(TOOL_DONE_TEXT)
        return
    text = last_user_text(messages)
    if "[ASK]" in text and "ask_user_question" in tools:
        question = {"question": QUESTION, "options": [{"id": "s", "label": "Small"}, {"id": "m", "label": "Medium"}]}
        yield from _tool_call("ask_user_question", question)
        return
    if "[REASON]" in text:
        for piece in ("Let me think ", "about this ", "carefully."):
            yield _chunk({"role": "assistant", "reasoning_content": piece})
        yield from _text("Thought it through: the answer is 42.")
    elif "[WRITE]" in text:
        path = f"{_working_directory(messages)}/hello.txt"
        yield from _tool_call("write_file", {"path": path, "content": "hello from the kernel tier\n"})
    elif "[BASH]" in text:
        yield from _tool_call("bash", {"command": "echo kernel-tier-bash"})
    elif "[SLOW]" in text:
        yield from _text(" ".join(f"word{i}" for i in range(SLOW_CHUNKS)), pieces=SLOW_CHUNKS, pause_s=SLOW_PAUSE_S)
    elif "[SILENT]" in text:
        time.sleep(SILENT_S)
        yield from _text("Back after a silence.")
    else:
        yield from _text(PLAIN_TEXT)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ScriptedLLM

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        return

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "tests"}]})
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.record(self.path, body)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": "not found"}})
            return
        if not body.get("stream"):
            self._send_json(
                200,
                {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": MODEL,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "Scripted title"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
                },
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for chunk in itertools.chain(script(body), [_usage()]):  # lazily: the pauses are the point
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return


class ScriptedLLM(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def record(self, path: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append((path, body))

    def __enter__(self) -> ScriptedLLM:
        self._thread = threading.Thread(target=self.serve_forever, name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
