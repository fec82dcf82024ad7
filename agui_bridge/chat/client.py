"""`agui-bridge chat`: a terminal AG-UI client for the bridge (issues 7 and 15).

One user message goes out as a `RunAgentInput`; the SSE answer is printed as it arrives
(`chat/output.py`), its Markdown rendered when stdout is a terminal (`chat/render.py`). An interrupt is
asked at the prompt (`chat/questions.py`) and answered with a resume run (same threadId and
rosInvocationId, new runId) until the run ends.
`--json` prints every AG-UI event as one JSON line on stdout instead (prompts then go to stderr).
A dropped connection is not a lost run: chat reattaches (`chat/attach.py`); `--attach` follows a run.

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
import signal
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote, urljoin, urlsplit

from agui_bridge.chat import attach as attaching
from agui_bridge.chat.attach import DEFAULT_RETRIES, RetryPolicy, RunFollower, RunRef
from agui_bridge.chat.output import BOLD, DIM, RED, YELLOW, EventView, Printer, escape_terminal, markdown_renderer
from agui_bridge.chat.questions import answer_payload, expires_in, question_for
from agui_bridge.chat.sse import ChatUsageError, describe_http_error
from agui_bridge.config import limits
from agui_bridge.protocol.control import ID_CONTROL, encodes_as_utf8
from agui_bridge.protocol.events import SESSION_EVENT

if TYPE_CHECKING:
    import requests

__all__ = [
    "DEFAULT_URL",
    "ChatClient",
    "ChatOptions",
    "ChatUsageError",
    "Printer",
    "answer_payload",
    "configure_parser",
    "expires_in",
    "options_from_args",
    "question_for",
    "run_chat",
]

EXIT_OK = 0
EXIT_RUN_ERROR = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 3

DEFAULT_URL = "http://127.0.0.1:8000/"
DEFAULT_TOKEN_ENV = "IAC_CODE_AGUI_AUTH_TOKEN"  # noqa: S105 - the name of a variable, not a secret
MAX_ID_CHARS = 256


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
    attach_run_id: str | None = None  # --attach THREAD/RUN: follow this run instead of sending a message
    reattach_retries: int = DEFAULT_RETRIES


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
    parser.add_argument(
        "--attach",
        metavar="THREAD/RUN",
        help="follow a run started elsewhere (needs --ros) instead of sending a message",
    )
    parser.add_argument(
        "--reattach-retries",
        metavar="N",
        type=int,
        default=DEFAULT_RETRIES,
        help=f"reattach attempts after a dropped connection, 0 to 20 (default {DEFAULT_RETRIES}; 0 turns it off)",
    )
    parser.add_argument("message", nargs="?", help="the user message (not with --attach)")
    parser.set_defaults(handler=main_from_args)


def _checked_id(value: str, what: str) -> str:
    if not value or len(value) > MAX_ID_CHARS or not value.isprintable() or any(c.isspace() for c in value):
        raise ChatUsageError(f"{what} must be 1 to {MAX_ID_CHARS} printable characters without spaces")
    return value


def _checked_thread_id(value: str) -> str:
    """`--thread` as `POST /` admits a threadId (docs/http-api.md#limits): argv under a non-UTF-8
    locale can carry a lone surrogate, which names no thread. Unlike `_checked_id`, spaces stay allowed: the
    server takes them, and a thread named with one must stay reachable."""
    if (
        not value
        or len(value) > limits.MAX_ID_CHARS
        or value.startswith("/")
        or ID_CONTROL.search(value) is not None
        or not encodes_as_utf8(value)
    ):
        raise ChatUsageError(
            f"--thread must be 1 to {limits.MAX_ID_CHARS} characters of valid Unicode,"
            " without control characters or a leading /"
        )
    return value


def _attach_target(args: argparse.Namespace) -> tuple[str, str] | None:
    if args.attach is None:
        return None
    thread_id, slash, run_id = str(args.attach).partition("/")
    if not slash or "/" in run_id:
        raise ChatUsageError("--attach takes THREAD/RUN, the threadId and runId separated by one slash")
    if not args.ros:
        raise ChatUsageError("--attach needs --ros ID, the rosInvocationId of the run's execution")
    if args.thread and args.thread != thread_id:
        raise ChatUsageError("--thread and the thread of --attach differ")
    if args.message is not None:
        raise ChatUsageError("give a message or --attach, not both")
    return _checked_id(thread_id, "the threadId of --attach"), _checked_id(run_id, "the runId of --attach")


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
    retries = getattr(args, "reattach_retries", DEFAULT_RETRIES)
    if not isinstance(retries, int) or not 0 <= retries <= attaching.MAX_RETRIES:
        raise ChatUsageError(f"--reattach-retries must be 0 to {attaching.MAX_RETRIES}")
    target = _attach_target(args) if getattr(args, "attach", None) is not None else None
    message = args.message
    if target is None and (not isinstance(message, str) or not message.strip()):
        raise ChatUsageError("the message must not be empty")
    thread_id = target[0] if target else (_checked_thread_id(args.thread) if args.thread else str(uuid.uuid4()))
    ros = args.ros if args.ros else f"chat-{uuid.uuid4().hex}"
    cwd = os.path.abspath(os.path.expanduser(args.cwd)) if args.cwd else os.getcwd()
    return ChatOptions(
        url,
        token,
        thread_id,
        cwd,
        ros,
        bool(args.json),
        message or "",
        attach_run_id=target[1] if target else None,
        reattach_retries=retries,
    )


@dataclass
class RunResult:
    kind: str  # "success" | "interrupt" | "error"
    interrupts: list[dict[str, Any]]
    exit_code: int


def json_body(body: Mapping[str, Any]) -> bytes:
    """UTF-8 JSON, non-ASCII written as itself: requests' `json=` escapes it (`\\u00e9`), which the shipped
    HAProxy config refuses in a threadId because it would key the thread differently from its path
    (docs/http-api.md#errors-of-the-shipped-haproxy-config-several-hosts).

    Text with a lone surrogate (argv under a non-UTF-8 locale, a prompt's answer) has no UTF-8: the body is then
    ASCII-escaped JSON, so the server answers it with its documented error instead of chat failing unhandled.
    """
    try:
        return json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body).encode("ascii")


# --------------------------------------------------------------------------------------------- the client


class ChatClient:
    def __init__(
        self, options: ChatOptions, http: requests.Session, stdin: TextIO, stdout: TextIO, stderr: TextIO
    ) -> None:
        self.options = options
        self.http = http
        self.stdin = stdin
        self.json_mode = options.json_mode
        terminal = not options.json_mode and stdout.isatty()
        color = terminal and "NO_COLOR" not in os.environ
        # A terminal gets the agent's Markdown rendered (rich honours NO_COLOR itself); a pipe, or a terminal
        # that cannot move its cursor (TERM=dumb: an editor's shell buffer), gets it as written.
        rendered = terminal and os.environ.get("TERM") != "dumb"
        markdown = markdown_renderer(stdout) if rendered else None
        self.printer = Printer(stdout, stderr, color=color, markdown=markdown)
        self.view = EventView(self.printer)
        #: where questions and prompts go: the terminal, or stderr when stdout carries JSON lines
        self.prompt_out = stderr if options.json_mode else stdout
        self.execution_id: str | None = None
        self.execution_ros: str | None = None
        self.retry_policy = RetryPolicy(attempts=options.reattach_retries)

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

    def _follower(self, run_id: str) -> RunFollower:
        ref = RunRef(self.options.thread_id, run_id, self.options.ros_invocation_id)
        notify = lambda text: self.printer.error(f"agui-bridge chat: {text}")  # noqa: E731
        return RunFollower(self.http, self.options.url, ref, self._headers, notify, self.retry_policy)

    # ---- one run

    def stream(self, body: dict[str, Any]) -> RunResult:
        """POST a run and follow it to its terminal event, reattaching if the connection drops."""
        import requests

        try:
            response = self.http.post(
                self.options.url,
                data=json_body(body),
                headers=self._headers(sse=True),
                stream=True,
                timeout=(attaching.CONNECT_TIMEOUT_S, attaching.READ_TIMEOUT_S),
            )
        except requests.RequestException as exc:
            raise ChatUsageError(f"cannot reach {self.options.url} ({type(exc).__name__})") from None
        if response.status_code != 200:
            with response:
                raise ChatUsageError(describe_http_error(response))
        return self._consume(self._follower(str(body["runId"])), response)

    def attach(self, run_id: str) -> RunResult:
        """Follow a run started elsewhere, from its first event."""
        return self._consume(self._follower(run_id), None)

    def _consume(self, follower: RunFollower, response: requests.Response | None) -> RunResult:
        for event in follower.follow(response):
            if self.json_mode:
                self.printer.out.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
                self.printer.out.flush()
            result = self._on_event(event)
            if result is not None:
                return result
        raise ChatUsageError("the stream ended without a terminal event")

    def _on_event(self, event: dict[str, Any]) -> RunResult | None:
        kind = event["type"]
        if kind == "CUSTOM" and event.get("name") == SESSION_EVENT and isinstance(event.get("value"), dict):
            value = event["value"]
            self.execution_id = value.get("executionId") or self.execution_id
            self.execution_ros = value.get("rosInvocationId") or self.execution_ros
        if kind == "RUN_FINISHED":
            if not self.json_mode:
                self.view.usage(event.get("usage"))
            outcome = event.get("outcome")
            if isinstance(outcome, dict) and outcome.get("type") == "interrupt":
                interrupts = [i for i in outcome.get("interrupts") or [] if isinstance(i, dict)]
                return RunResult("interrupt", interrupts, EXIT_OK)
            self.printer.end_line()
            return RunResult("success", [], EXIT_OK)
        if kind == "RUN_ERROR":
            code = str(event.get("code") or "RUN_ERROR")
            self.printer.error(f"error {code}: {event.get('message', '')}", RED)
            return RunResult("error", [], EXIT_CANCELLED if code == "CANCELLED" else EXIT_RUN_ERROR)
        if not self.json_mode:
            self.view.event(kind, event)
        return None

    # ---- interrupts

    def _say(self, text: str, *codes: str) -> None:
        text = escape_terminal(text)
        styled = self.printer.style(text, *codes) if self.prompt_out is self.printer.out else text
        self.prompt_out.write(styled + "\n")
        self.prompt_out.flush()

    def ask(self, interrupts: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """One answer per interrupt, in order; None when the input ends (the caller cancels)."""
        self.printer.end_line()
        answers: list[dict[str, Any]] = []
        for interrupt in interrupts:
            question = question_for(interrupt)
            self._say(f"[interrupt] {question.title}", BOLD, YELLOW)
            self._say(question.text)
            for label, value in question.facts:
                self._say(f"  {label}: {value}", DIM)
            for number, choice in enumerate(question.choices, start=1):
                self._say(f"  {number}) {choice.label}")
            if question.free_text:
                extra = f" ({question.free_text_prompt})" if question.free_text_prompt else ""
                self._say(f"  or type an answer{extra}")
            if question.raw_json:
                self._say(f"  answer with a JSON object matching {json.dumps(interrupt.get('responseSchema'))}")
            remaining = expires_in(question.expires_at)
            if remaining:
                self._say(f"  (expires in {remaining})" if remaining != "expired" else "  (expired)", DIM)
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
            response = self.http.post(
                url, data=json_body(body), headers=self._headers(), timeout=(attaching.CONNECT_TIMEOUT_S, 30.0)
            )
        except requests.RequestException:
            return None
        if response.status_code != 200:
            self.printer.error(f"cancel failed: {describe_http_error(response)}")
            return None
        status = response.json().get("status")
        return str(status) if status else None

    # ---- the conversation

    def run(self) -> int:
        body = self._body()
        body["messages"] = [{"id": f"message-{uuid.uuid4()}", "role": "user", "content": self.options.message}]
        attach_run_id = self.options.attach_run_id
        try:
            while True:
                if attach_run_id is not None:
                    result, attach_run_id = self.attach(attach_run_id), None
                else:
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
        finally:
            self.printer.settle()  # never leave a live region (and a hidden cursor) behind
        self.printer.error(f"thread {self.options.thread_id}", DIM)
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
    from agui_bridge.kernel.outgoing import direct_session

    with direct_session() as http:
        client = ChatClient(options, http, stdin or sys.stdin, stdout or sys.stdout, err)
        try:
            return client.run()
        except ChatUsageError as exc:
            client.printer.error(f"agui-bridge chat: {exc}")
            return EXIT_USAGE


def main_from_args(args: argparse.Namespace) -> int:
    restore_ctrl_c(sys.stdin)
    return run_chat(args, os.environ)


def restore_ctrl_c(stdin: TextIO) -> None:
    """Ctrl-C stops a run (its execution cancelled) even when chat was started with SIGINT ignored.

    A program started in the background of a non-interactive shell inherits SIGINT ignored, and Python then
    installs no KeyboardInterrupt handler: a person at the terminal would have no way to stop the run. Only
    when stdin is a terminal (someone can press Ctrl-C); a pipeline keeps what it was given.
    """
    if stdin.isatty() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
