"""`agui-bridge chat`: a terminal AG-UI client for the bridge (issue 7).

One user message goes out as a `RunAgentInput`; the SSE answer is printed as it arrives (text as it
streams, reasoning dimmed, tool calls, steps and artifacts as compact lines). An interrupt is asked at
the prompt (enum values and `oneOf` options numbered, free text where the schema allows it) and
answered with a resume run (same threadId and rosInvocationId, new runId) until the run ends.
`--json` prints every AG-UI event as one JSON line on stdout instead (prompts then go to stderr).

Exit status: 0 success, 1 RUN_ERROR, 2 usage or HTTP errors, 3 cancelled (RUN_ERROR CANCELLED, Ctrl-C,
or end of input at a prompt; the last two cancel the execution through the cancellation extension).

Layering: this module sits with `cli` at the top. It talks HTTP with `requests`, imported lazily so
that building the CLI parser in the gunicorn master stays stdlib-only, and nothing below the CLI
(web, service, runs, ...) may import it. The token is read from the environment and only ever sent
in the Authorization header; it is never printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote, urljoin, urlsplit

from agui_bridge.a2a.sse_parser import SseParser

if TYPE_CHECKING:
    import requests

EXIT_OK = 0
EXIT_RUN_ERROR = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 3

DEFAULT_URL = "http://127.0.0.1:8000/"
DEFAULT_TOKEN_ENV = "IAC_CODE_AGUI_AUTH_TOKEN"  # noqa: S105 - the name of a variable, not a secret
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 300.0  # far above the heartbeat interval: a silent connection this long is dead
PREVIEW_CHARS = 240

_DIM, _BOLD, _RED, _GREEN, _YELLOW, _CYAN, _RESET = "2", "1", "31", "32", "33", "36", "0"


class ChatUsageError(Exception):
    """A bad option or an HTTP-level failure: one line on stderr, exit status 2."""


# --------------------------------------------------------------------------------------------- options


@dataclass(frozen=True)
class ChatOptions:
    url: str
    token: str | None
    thread_id: str
    cwd: str
    ros_invocation_id: str
    json_mode: bool
    message: str


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The `chat` subcommand's arguments; `cli.build_parser` calls this."""
    parser.add_argument("--url", help=f"the bridge's base URL (default {DEFAULT_URL})")
    parser.add_argument(
        "--token-env",
        metavar="NAME",
        help=f"environment variable that holds the bearer token (default {DEFAULT_TOKEN_ENV}, if set)",
    )
    parser.add_argument("--thread", metavar="ID", help="continue this threadId (default: a new thread)")
    parser.add_argument("--cwd", metavar="DIR", help="workspace directory (default: the current directory)")
    parser.add_argument("--ros", metavar="ID", help="rosInvocationId of this execution (default: a new one)")
    parser.add_argument("--json", action="store_true", help="print each AG-UI event as one JSON line")
    parser.add_argument("message", help="the user message")
    parser.set_defaults(handler=main_from_args)


def options_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> ChatOptions:
    url = args.url or DEFAULT_URL
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ChatUsageError("--url must be an http(s) URL such as http://127.0.0.1:8000/")
    if not url.endswith("/"):
        url += "/"
    token_env = args.token_env or DEFAULT_TOKEN_ENV
    token = environ.get(token_env) or None
    if args.token_env and token is None:
        raise ChatUsageError(f"the environment variable {args.token_env} is not set")
    message = args.message
    if not isinstance(message, str) or not message.strip():
        raise ChatUsageError("the message must not be empty")
    thread_id = args.thread if args.thread else str(uuid.uuid4())
    ros = args.ros if args.ros else f"chat-{uuid.uuid4().hex}"
    cwd = os.path.abspath(os.path.expanduser(args.cwd)) if args.cwd else os.getcwd()
    return ChatOptions(url, token, thread_id, cwd, ros, bool(args.json), message)


# --------------------------------------------------------------------------------------------- interrupts


@dataclass(frozen=True)
class Choice:
    label: str
    payload: dict[str, Any]
    aliases: tuple[str, ...]  # what may be typed instead of the number (lower-cased)


@dataclass(frozen=True)
class Question:
    """How one interrupt is asked at the prompt, derived from its responseSchema (pure)."""

    interrupt_id: str
    title: str
    text: str
    facts: tuple[tuple[str, str], ...]
    choices: tuple[Choice, ...]
    free_text: bool
    free_text_prompt: str | None
    raw_json: bool
    expires_at: str | None


def _option_titles(interrupt: Mapping[str, Any]) -> dict[str, str]:
    metadata = interrupt.get("metadata")
    options = metadata.get("standardOptions") if isinstance(metadata, dict) else None
    titles: dict[str, str] = {}
    if isinstance(options, list):
        for option in options:
            if isinstance(option, dict) and isinstance(option.get("id"), str):
                titles[option["id"]] = str(option.get("title") or option["id"])
    return titles


def _enum_property(schema: Mapping[str, Any]) -> tuple[str, list[Any]] | None:
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, prop in properties.items():
            if isinstance(prop, dict) and isinstance(prop.get("enum"), list) and prop["enum"]:
                return str(name), list(prop["enum"])
    return None


def question_for(interrupt: Mapping[str, Any]) -> Question:
    """Choices from the schema: enum values, or `oneOf` selectedId consts plus a freeText branch."""
    raw_schema = interrupt.get("responseSchema")
    schema: Mapping[str, Any] = raw_schema if isinstance(raw_schema, dict) else {}
    raw_metadata = interrupt.get("metadata")
    metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    titles = _option_titles(interrupt)
    choices: list[Choice] = []
    free_text = False
    raw_json = False
    enumeration = _enum_property(schema)
    branches = schema.get("oneOf", schema.get("anyOf"))
    if enumeration is not None:
        name, values = enumeration
        for value in values:
            label = titles.get(str(value)) or str(value).replace("_", " ")
            choices.append(Choice(label, {name: value}, (str(value).lower(), label.lower())))
    elif isinstance(branches, list):
        for branch in branches:
            props = branch.get("properties") if isinstance(branch, dict) else None
            if not isinstance(props, dict):
                continue
            selected = props.get("selectedId")
            if isinstance(selected, dict) and "const" in selected:
                value = str(selected["const"])
                label = str(selected.get("title") or titles.get(value) or value)
                choices.append(Choice(label, {"selectedId": value}, (value.lower(), label.lower())))
            elif "freeText" in props:
                free_text = True
    else:
        raw_json = True
    message = str(interrupt.get("message") or "")
    prompt = metadata.get("prompt")
    text = prompt if choices and isinstance(prompt, str) and prompt else message
    facts = tuple(
        (label, str(metadata[key]))
        for label, key in (("tool", "toolName"), ("target", "target"), ("summary", "safeSummary"))
        if isinstance(metadata.get(key), str | int | float) and metadata.get(key) != ""
    )
    title = metadata.get("title")
    default_title = "Permission required" if interrupt.get("reason") == "tool_call" else "Input required"
    free_prompt = metadata.get("freeTextPrompt")
    expires_at = interrupt.get("expiresAt")
    return Question(
        interrupt_id=str(interrupt.get("id") or ""),
        title=title if isinstance(title, str) and title else default_title,
        text=text,
        facts=facts,
        choices=tuple(choices),
        free_text=free_text,
        free_text_prompt=free_prompt if isinstance(free_prompt, str) and free_prompt else None,
        raw_json=raw_json,
        expires_at=expires_at if isinstance(expires_at, str) else None,
    )


def answer_payload(question: Question, typed: str) -> dict[str, Any] | None:
    """The payload for what the user typed, or None if it is not an answer (ask again)."""
    text = typed.strip()
    if not text:
        return None
    if question.raw_json:
        try:
            value = json.loads(text)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None
    if text.isdigit() and 1 <= int(text) <= len(question.choices):
        return dict(question.choices[int(text) - 1].payload)
    for choice in question.choices:
        if text.lower() in choice.aliases:
            return dict(choice.payload)
    if question.free_text:
        return {"freeText": text}
    return None


def expires_in(expires_at: str | None, now: datetime | None = None) -> str | None:
    """`"8m59s"` until an RFC 3339 expiry, `"expired"` after it, None if absent or unparsable."""
    if not expires_at:
        return None
    try:
        moment = datetime.fromisoformat(expires_at)
    except ValueError:
        return None
    seconds = int((moment - (now or datetime.now(UTC))).total_seconds())
    if seconds <= 0:
        return "expired"
    return f"{seconds // 60}m{seconds % 60:02d}s"


# --------------------------------------------------------------------------------------------- output


def _one_line(text: str, limit: int = PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _compact_json(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return raw


class Printer:
    """Human output: text as it arrives, compact lines for everything else, ANSI only on a tty."""

    def __init__(self, out: TextIO, err: TextIO, *, color: bool) -> None:
        self.out = out
        self.err = err
        self.color = color
        self._at_line_start = True

    def style(self, text: str, *codes: str) -> str:
        if not self.color or not codes:
            return text
        return f"\x1b[{';'.join(codes)}m{text}\x1b[{_RESET}m"

    def write(self, text: str, *codes: str) -> None:
        if not text:
            return
        self.out.write(self.style(text, *codes))
        self.out.flush()
        self._at_line_start = text.endswith("\n")

    def end_line(self) -> None:
        if not self._at_line_start:
            self.write("\n")

    def line(self, text: str, *codes: str) -> None:
        self.end_line()
        self.write(text + "\n", *codes)

    def error(self, text: str) -> None:
        self.end_line()
        self.err.write(text + "\n")
        self.err.flush()


@dataclass
class RunResult:
    kind: str  # "success" | "interrupt" | "error"
    interrupts: list[dict[str, Any]]
    exit_code: int


# --------------------------------------------------------------------------------------------- the client


class ChatClient:
    def __init__(
        self, options: ChatOptions, http: requests.Session, stdin: TextIO, stdout: TextIO, stderr: TextIO
    ) -> None:
        self.options = options
        self.http = http
        self.stdin = stdin
        self.json_mode = options.json_mode
        color = not options.json_mode and stdout.isatty() and "NO_COLOR" not in os.environ
        self.printer = Printer(stdout, stderr, color=color)
        #: where questions and prompts go: the terminal, or stderr when stdout carries JSON lines
        self.prompt_out = stderr if options.json_mode else stdout
        self.execution_id: str | None = None
        self.execution_ros: str | None = None
        self._tool_names: dict[str, str] = {}
        self._tool_args: dict[str, str] = {}

    # ---- requests

    def _headers(self, *, sse: bool = False) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if sse:
            headers["Accept"] = "text/event-stream"
        if self.options.token:
            headers["Authorization"] = f"Bearer {self.options.token}"
        return headers

    def _body(self) -> dict[str, Any]:
        return {
            "threadId": self.options.thread_id,
            "runId": f"run-{uuid.uuid4()}",
            "state": {},
            "messages": [],
            "tools": [],
            "context": [],
            "forwardedProps": {
                "iacCode": {
                    "schemaVersion": 1,
                    "rosInvocationId": self.options.ros_invocation_id,
                    "cwd": self.options.cwd,
                }
            },
        }

    @staticmethod
    def _describe_http_error(response: requests.Response) -> str:
        try:
            error = response.json()["error"]
            return f"HTTP {response.status_code} {error['code']}: {error['message']}"
        except (ValueError, KeyError, TypeError):
            return f"HTTP {response.status_code}: {_one_line(response.text, 200)}"

    def _events(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        import requests

        try:
            response = self.http.post(
                self.options.url,
                json=body,
                headers=self._headers(sse=True),
                stream=True,
                timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
            )
        except requests.RequestException as exc:
            raise ChatUsageError(f"cannot reach {self.options.url} ({type(exc).__name__})") from None
        with response:
            if response.status_code != 200:
                raise ChatUsageError(self._describe_http_error(response))
            parser = SseParser()
            try:
                for chunk in response.iter_content(chunk_size=None):
                    for message in parser.feed(chunk):
                        yield self._decode(message.data)
            except requests.RequestException as exc:
                raise ChatUsageError(f"the stream broke off ({type(exc).__name__})") from None
            for message in parser.close():
                yield self._decode(message.data)

    @staticmethod
    def _decode(data: bytes) -> dict[str, Any]:
        try:
            event = json.loads(data)
        except ValueError:
            raise ChatUsageError("the server sent an event that is not JSON") from None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise ChatUsageError("the server sent an event without a type")
        return event

    # ---- one run

    def stream(self, body: dict[str, Any]) -> RunResult:
        for event in self._events(body):
            if self.json_mode:
                self.printer.out.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
                self.printer.out.flush()
            result = self._on_event(event)
            if result is not None:
                return result
        raise ChatUsageError("the stream ended without a terminal event")

    def _on_event(self, event: dict[str, Any]) -> RunResult | None:
        kind = event["type"]
        if kind == "CUSTOM" and event.get("name") == "iac-code.session.v1" and isinstance(event.get("value"), dict):
            value = event["value"]
            self.execution_id = value.get("executionId") or self.execution_id
            self.execution_ros = value.get("rosInvocationId") or self.execution_ros
        if kind == "RUN_FINISHED":
            if not self.json_mode:
                self._print_usage(event.get("usage"))
            outcome = event.get("outcome")
            if isinstance(outcome, dict) and outcome.get("type") == "interrupt":
                interrupts = [i for i in outcome.get("interrupts") or [] if isinstance(i, dict)]
                return RunResult("interrupt", interrupts, EXIT_OK)
            self.printer.end_line()
            return RunResult("success", [], EXIT_OK)
        if kind == "RUN_ERROR":
            code = str(event.get("code") or "RUN_ERROR")
            self.printer.error(self.printer.style(f"error {code}: {event.get('message', '')}", _RED))
            return RunResult("error", [], EXIT_CANCELLED if code == "CANCELLED" else EXIT_RUN_ERROR)
        if not self.json_mode:
            self._print_event(kind, event)
        return None

    def _print_usage(self, usage: object) -> None:
        if not isinstance(usage, list):
            return
        for entry in usage:
            if isinstance(entry, dict):
                model = "/".join(str(entry[k]) for k in ("provider", "model") if entry.get(k)) or "usage"
                counts = f"in {entry.get('inputTokens', 0)} out {entry.get('outputTokens', 0)}"
                self.printer.line(f"[usage] {model}: {counts} total {entry.get('totalTokens', 0)}", _DIM)

    def _print_event(self, kind: str, event: dict[str, Any]) -> None:
        p = self.printer
        match kind:
            case "TEXT_MESSAGE_CONTENT":
                p.write(str(event.get("delta", "")))
            case "TEXT_MESSAGE_END":
                p.end_line()
            case "REASONING_MESSAGE_START":
                p.end_line()
                p.write("[reasoning] ", _DIM)
            case "REASONING_MESSAGE_CONTENT":
                p.write(str(event.get("delta", "")), _DIM)
            case "REASONING_MESSAGE_END":
                p.end_line()
            case "TOOL_CALL_START":
                call_id = str(event.get("toolCallId", ""))
                self._tool_names[call_id] = str(event.get("toolCallName") or "tool")
                self._tool_args[call_id] = ""
            case "TOOL_CALL_ARGS":
                call_id = str(event.get("toolCallId", ""))
                self._tool_args[call_id] = self._tool_args.get(call_id, "") + str(event.get("delta", ""))
            case "TOOL_CALL_END":
                call_id = str(event.get("toolCallId", ""))
                name = self._tool_names.get(call_id, "tool")
                args = _one_line(_compact_json(self._tool_args.get(call_id, "")))
                p.line(f"[tool] {name} {args}".rstrip(), _CYAN)
            case "TOOL_CALL_RESULT":
                call_id = str(event.get("toolCallId", ""))
                name = self._tool_names.get(call_id, "tool")
                p.line(f"[result] {name}: {_one_line(str(event.get('content', '')))}", _CYAN)
            case "STEP_STARTED":
                p.line(f"[step] {event.get('stepName', '')} started", _YELLOW)
            case "STEP_FINISHED":
                p.line(f"[step] {event.get('stepName', '')} finished", _YELLOW)
            case "CUSTOM":
                self._print_custom(str(event.get("name", "")), event.get("value"))
            case _:
                pass

    def _print_custom(self, name: str, value: object) -> None:
        if not isinstance(value, dict):
            return
        if name == "iac-code.artifact.v1":
            parts = value.get("parts") or []
            links = [str(part["url"]) for part in parts if isinstance(part, dict) and part.get("url")]
            self.printer.line(f"[artifact] {value.get('name', 'artifact')} {' '.join(links)}".rstrip(), _GREEN)
        elif name == "iac-code.tool-progress.v1":
            progress = value.get("mcpProgress", value.get("status", ""))
            text = progress if isinstance(progress, str) else json.dumps(progress, ensure_ascii=False)
            self.printer.line(f"[progress] {value.get('name', 'tool')}: {_one_line(text)}", _DIM)
        elif name == "iac-code.pipeline.v1":
            self.printer.line(f"[pipeline] {value.get('eventType', 'event')}", _DIM)

    # ---- interrupts

    def _say(self, text: str, *codes: str) -> None:
        styled = self.printer.style(text, *codes) if self.prompt_out is self.printer.out else text
        self.prompt_out.write(styled + "\n")
        self.prompt_out.flush()

    def ask(self, interrupts: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """One answer per interrupt, in order; None when the input ends (the caller cancels)."""
        self.printer.end_line()
        answers: list[dict[str, Any]] = []
        for interrupt in interrupts:
            question = question_for(interrupt)
            self._say(f"[interrupt] {question.title}", _BOLD, _YELLOW)
            self._say(question.text)
            for label, value in question.facts:
                self._say(f"  {label}: {value}", _DIM)
            for number, choice in enumerate(question.choices, start=1):
                self._say(f"  {number}) {choice.label}")
            if question.free_text:
                extra = f" ({question.free_text_prompt})" if question.free_text_prompt else ""
                self._say(f"  or type an answer{extra}")
            if question.raw_json:
                self._say(f"  answer with a JSON object matching {json.dumps(interrupt.get('responseSchema'))}")
            remaining = expires_in(question.expires_at)
            if remaining:
                self._say(f"  (expires in {remaining})" if remaining != "expired" else "  (expired)", _DIM)
            hint = f"[1-{len(question.choices)}]" if question.choices else ""
            while True:
                self.prompt_out.write(f"answer{hint}> ")
                self.prompt_out.flush()
                line = self.stdin.readline()
                if not line:
                    self.prompt_out.write("\n")
                    return None
                if not self.stdin.isatty():  # a terminal echoes the answer itself; a pipe does not
                    self.prompt_out.write(line if line.endswith("\n") else line + "\n")
                payload = answer_payload(question, line)
                if payload is not None:
                    break
                or_text = " or some text" if question.free_text else ""
                self._say(f"  not an answer: type a number from the list{or_text}")
            answers.append({"interruptId": question.interrupt_id, "status": "resolved", "payload": payload})
        return answers

    def cancel(self) -> str | None:
        """The cancellation extension for the current execution; its status, or None if it failed."""
        import requests

        if self.execution_id is None:
            return None
        url = urljoin(self.options.url, f"extensions/iac-code/v1/executions/{quote(self.execution_id, safe='')}/cancel")
        ros = self.execution_ros or self.options.ros_invocation_id
        body = {"threadId": self.options.thread_id, "rosInvocationId": ros}
        try:
            response = self.http.post(url, json=body, headers=self._headers(), timeout=(CONNECT_TIMEOUT_S, 30))
        except requests.RequestException:
            return None
        if response.status_code != 200:
            self.printer.error(f"cancel failed: {self._describe_http_error(response)}")
            return None
        status = response.json().get("status")
        return str(status) if status else None

    # ---- the conversation

    def run(self) -> int:
        body = self._body()
        body["messages"] = [{"id": f"message-{uuid.uuid4()}", "role": "user", "content": self.options.message}]
        try:
            while True:
                result = self.stream(body)
                if result.kind != "interrupt":
                    break
                answers = self.ask(result.interrupts)
                if answers is None:
                    return self._cancelled("no answer")
                body = self._body()
                body["resume"] = answers
        except KeyboardInterrupt:
            return self._cancelled("interrupted")
        self.printer.error(self.printer.style(f"thread {self.options.thread_id}", _DIM))
        return result.exit_code

    def _cancelled(self, why: str) -> int:
        status = self.cancel()
        self.printer.error(f"{why}: execution {status or 'not cancelled'}")
        return EXIT_CANCELLED


def run_chat(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    err = stderr or sys.stderr
    try:
        options = options_from_args(args, environ)
    except ChatUsageError as exc:
        err.write(f"agui-bridge chat: {exc}\n")
        return EXIT_USAGE
    import requests

    with requests.Session() as http:
        client = ChatClient(options, http, stdin or sys.stdin, stdout or sys.stdout, err)
        try:
            return client.run()
        except ChatUsageError as exc:
            client.printer.error(f"agui-bridge chat: {exc}")
            return EXIT_USAGE


def main_from_args(args: argparse.Namespace) -> int:
    return run_chat(args, os.environ)
