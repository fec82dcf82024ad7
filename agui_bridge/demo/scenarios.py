"""Deterministic scripts for the demo A2A agent, as plain data (no a2a imports).

The demo agent stands in for the iac-code kernel in tests and in the default run, so what it says
must be predictable from the user's text alone. This module picks a scenario from the text and
yields abstract *steps*; ``agui_bridge.demo.executor`` interprets the steps into A2A events. Keeping
the scripts pure lets them be tested as tables and lets a new behaviour be added as data.

Scenario selection: the user text is lower-cased and the rows below are tried top to bottom; the
first row whose keyword occurs anywhere in the text (substring match) wins.

=========  ======================================  =================================================
scenario   keywords (case-insensitive, substring)  what the turn does
=========  ======================================  =================================================
long       ``[LONG <n>]``                          n text deltas as fast as possible (1..100000),
                                                   usage, final echo, INPUT_REQUIRED
echo       ``[echo]``                              the user's text after the marker, verbatim, in
                                                   7-character deltas (for rendering tests), usage,
                                                   final
markdown   ``markdown`` (e.g. ``[markdown]``)      a Markdown answer (heading, bold, list, table,
                                                   inline code, a link, a fenced yaml template) as
                                                   9-character deltas cut mid-line, the template as
                                                   an inline ``artifactUpdate``, usage, final
big_tool   ``[big tool]``                          text, a ``read_template`` call with long JSON
                                                   arguments and the VPC template as its result,
                                                   text, usage, final
pipeline   ``pipeline`` (or the message metadata   the "selling" Pipeline: requirements, two parallel
           ``iac_code.run_mode == "pipeline"``,    candidates, a candidate_selection input, deploy
           which wins over every keyword)          with a sideband permission (task stays WORKING);
                                                   ``[FAIL_DEPLOY]`` makes deploy fail (FAILED)
mixed      ``[mixed]``                             one long turn of every streaming kind: reasoning,
                                                   text, a tool with progress, reasoning, the
                                                   template as text and as an artifact, text,
                                                   usage, final (~60 AG-UI events)
fail       ``fail``                                WORKING, then TASK_STATE_FAILED with a status
                                                   message and ``metadata.iac_code.error``
slow       ``slow`` (``[SLOW <seconds>]`` sets     6 text deltas spread over 24 s by default (or
           the total time)                         over <seconds>), usage, final, INPUT_REQUIRED;
                                                   stops at once when the task is cancelled
two_tools  ``two tools``                           text, two ``write_file`` calls (a.yaml, b.yaml),
                                                   usage, INPUT_REQUIRED waiting for both: first
                                                   in ``input``, second in ``pendingPermissions``
permission ``permission``, ``write file``,         text, ``write_file`` started/input_delta x2/
           ``write a file``                        input_complete, usage, INPUT_REQUIRED with a
                                                   permission ``input`` (Write /workspace/x.yaml)
question   ``question``, ``ask me``                ``ask_user_question`` tool, INPUT_REQUIRED with an
                                                   ``ask_user_question`` input; the text answer is
                                                   echoed ("You chose: <answer>.")
candidates ``candidates``, ``choose``              INPUT_REQUIRED with a ``candidate_selection``
                                                   input (3 options with ``candidate_index``/``name``)
reasoning  ``[think]``, ``think``                  raw_thinking deltas, then text, usage, final
tool       ``tool``, ``list files``                text, tool started, input_delta x2,
                                                   input_complete, usage, progress x2, completed,
                                                   text, usage, final
iac        ``template``, ``vpc``                   a ROS YAML template as ~10 text deltas, an
                                                   ``artifactUpdate`` (vpc.ros.yaml), usage, final
plain      (anything else)                         three text deltas, usage, final, INPUT_REQUIRED
=========  ======================================  =================================================

"final" is the full-text echo (``<taskId>-2``, ``assistantFinal``) and every successful turn ends
``TASK_STATE_INPUT_REQUIRED`` without ``input``, exactly as the real kernel ends a turn.

Interrupts: a script is a generator, and the interpreter ``send()``s each step's outcome back into
it. An ``Ask`` step makes the interpreter emit INPUT_REQUIRED with ``metadata.iac_code.input`` and
park the generator on the task; the answers (see docs/http-api.md#interrupts-and-resume) resume it, and the tuple of
answers is the value of the ``yield``. The turn after an answer is shaped like
``iac-c-resume-allow.sse``/``iac-d2-resume-deny.sse``. Text sent while only permissions are pending
is guidance: a normal turn (``plain`` if the text would pick an interrupt scenario) and the
permission stays pending.

Pipeline: ``PipelineEvent``/``PipelineBatch`` steps become ``metadata.iac_code.pipeline`` /
``pipelineBatch`` envelopes (the interpreter adds ids, sequence, run ids and timestamps); an ``Ask``
may carry a ``pipeline`` template for its ``input_required`` envelope; ``WaitSideband`` waits for a
permission while the task stays WORKING and the turn keeps running (answered by a unary
``SendMessage``). See docs/http-api.md#interrupts-and-resume.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

#: Defaults for the ``slow`` scenario: 6 deltas, 4 s apart (24 s, longer than the 15 s ping gap).
SLOW_DELTAS = 6
SLOW_TOTAL_SECONDS = 24.0
#: Upper bound for ``[LONG <n>]`` so a typo cannot make the agent stream forever.
LONG_MAX = 100_000


@dataclass(frozen=True)
class Text:
    """One assistant text delta (a WORKING status message ``<taskId>-message``)."""

    delta: str


@dataclass(frozen=True)
class Thinking:
    """One raw reasoning delta (``metadata.iac_code.thinking``)."""

    text: str


@dataclass(frozen=True)
class Tool:
    """One tool lifecycle event (``metadata.iac_code.tool``); ``fields`` are the tool object keys."""

    status: str
    tool_use_id: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Artifact:
    """A produced file, sent as an ``artifactUpdate`` with the kernel's artifact metadata.

    With ``tool_use_id`` the next ``completed`` event of that tool carries ``tool.artifact`` (as in
    ``iac-c-resume-allow.sse``). With ``inline`` the part carries the content itself (a ``text`` part)
    instead of the kernel's ``iac-code-artifact://`` URL, for clients that show artifacts inline.
    """

    name: str
    content: str
    media_type: str = "text/plain"
    tool_use_id: str | None = None
    #: the content travels in the part (``text``) instead of behind an ``iac-code-artifact://`` URL
    inline: bool = False

    @property
    def byte_size(self) -> int:
        """Size of the UTF-8 content, as the kernel reports it."""
        return len(self.content.encode("utf-8"))

    @property
    def sha256(self) -> str:
        """Hex digest of the UTF-8 content, as the kernel reports it."""
        return hashlib.sha256(self.content.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Usage:
    """Token usage at the end of a model message (``metadata.iac_code.usage``)."""

    input_tokens: int = 100
    output_tokens: int = 10
    cached_input_tokens: int = 0
    provider: str = "demo"
    model: str = "demo-scripted"

    def fields(self) -> dict[str, Any]:
        """The kernel's usage object (``metadata.iac_code.usage``, Pipeline ``usage`` data)."""
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "totalTokens": self.input_tokens + self.output_tokens,
            "cachedInputTokens": self.cached_input_tokens,
            "provider": self.provider,
            "model": self.model,
        }


@dataclass(frozen=True)
class Sleep:
    """Pause the turn; cancellation interrupts it."""

    seconds: float


@dataclass(frozen=True)
class Fail:
    """End the turn with TASK_STATE_FAILED (status message + ``metadata.iac_code.error``)."""

    message: str
    error_id: str = "demo00000001"
    retryable: bool = False


@dataclass(frozen=True)
class Final:
    """Echo the full text of the turn (``<taskId>-2``, ``assistantFinal``), then INPUT_REQUIRED."""


#: Input kinds the demo asks for (``metadata.iac_code.input.kind``).
PERMISSION = "permission"
QUESTION = "ask_user_question"
CANDIDATE_SELECTION = "candidate_selection"
#: The decisions a permission answer may carry.
ALLOW_ONCE = "allow_once"
DENY = "deny"
PERMISSION_OPTIONS: tuple[dict[str, Any], ...] = (
    {"id": ALLOW_ONCE, "label": "Allow once"},
    {"id": DENY, "label": "Deny"},
)


@dataclass(frozen=True)
class InputRequest:
    """One thing the user must answer; the interpreter turns it into the kernel's input projection.

    ``fields`` are extra projection keys copied verbatim (``purpose``, ``effect``, ``target``,
    ``isReadOnly``, ``safeSummary``, ``allowFreeText``...). The interpreter adds ``schemaVersion``,
    ``requestTaskId``, ``contextId``, ``inputId``, ``language`` and ``required``.
    """

    kind: str
    title: str
    prompt: str
    tool_use_id: str | None = None
    tool_name: str | None = None
    options: tuple[dict[str, Any], ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Ask:
    """Wait for the user: INPUT_REQUIRED with ``metadata.iac_code.input`` (the rest of a batch of
    permissions in ``pendingPermissions``); the turn is parked until *every* request is answered.

    The outcome sent back into the script is a tuple of answers in the order of ``requests``: the
    decision (``allow_once``/``deny``) for a permission, the answer text for anything else.
    """

    requests: tuple[InputRequest, ...]
    #: In a Pipeline: the ``input_required`` envelope sent (on WORKING) just before INPUT_REQUIRED;
    #: the interpreter adds the projection as ``input`` and answers with an ``input_received``.
    pipeline: PipelineEvent | None = None


@dataclass(frozen=True)
class PipelineStep:
    """The ``step`` coordinate of a Pipeline envelope (the interpreter adds ``runId``/``attempt``)."""

    id: str
    index: int
    total: int


@dataclass(frozen=True)
class PipelineEvent:
    """One Pipeline envelope (``metadata.iac_code.pipeline``).

    ``candidate``/``candidate_step`` are ids; the interpreter turns them into ``{id, runId}``
    coordinates, numbers the envelope and fills in the run, task and session ids. ``status``
    defaults to ``default_status(event_type)``.
    """

    event_type: str
    scope: str
    data: dict[str, Any] = field(default_factory=dict)
    step: PipelineStep | None = None
    candidate: str | None = None
    candidate_step: str | None = None
    status: str | None = None


@dataclass(frozen=True)
class PipelineBatch:
    """Several envelopes in one status update (``metadata.iac_code.pipelineBatch.events``)."""

    events: tuple[PipelineEvent, ...]


@dataclass(frozen=True)
class WaitSideband:
    """A Pipeline permission wait that does not end the turn: the task stays WORKING.

    The interpreter sends WORKING with ``pendingPermissions: [projection]`` and the ``event``
    envelope (``permission_requested``), then blocks the script until the permission is answered
    (a unary ``SendMessage``), and sends an ``input_received`` envelope. The outcome is a 1-tuple
    with the decision (``allow_once``/``deny``).
    """

    request: InputRequest
    event: PipelineEvent


Step = (
    Text
    | Thinking
    | Tool
    | Artifact
    | Usage
    | Sleep
    | Fail
    | Final
    | Ask
    | PipelineEvent
    | PipelineBatch
    | WaitSideband
)
#: A script yields steps; the value sent back is the step's outcome (``None`` for every step but
#: ``Ask`` and ``WaitSideband``, whose outcome is the tuple of answers).
Script = Generator[Step, object, None]


@dataclass(frozen=True)
class Scenario:
    """One row of the selection table."""

    name: str
    keywords: tuple[str, ...]
    build: Callable[[str], Script]
    description: str


def _plain(_text: str) -> Script:
    """Default turn, shaped like ``iac-a-text.sse``."""
    yield Text("Hello ")
    yield Text("from the ")
    yield Text("demo agent.")
    yield Usage()
    yield Final()


VPC_TEMPLATE = """ROSTemplateFormatVersion: '2015-09-01'
Description: Demo VPC with one VSwitch
Parameters:
  ZoneId:
    Type: String
    AssociationProperty: ALIYUN::ECS::Instance::ZoneId
Resources:
  Vpc:
    Type: ALIYUN::ECS::VPC
    Properties:
      VpcName: demo-vpc
      CidrBlock: 192.168.0.0/16
  VSwitch:
    Type: ALIYUN::ECS::VSwitch
    Properties:
      VpcId:
        Ref: Vpc
      ZoneId:
        Ref: ZoneId
      CidrBlock: 192.168.1.0/24
Outputs:
  VpcId:
    Value:
      Ref: Vpc
"""


def split_deltas(text: str, count: int) -> list[str]:
    """Split ``text`` into about ``count`` line-aligned deltas whose concatenation is ``text``."""
    lines = text.splitlines(keepends=True)
    per = max(1, -(-len(lines) // max(1, count)))
    return ["".join(lines[i : i + per]) for i in range(0, len(lines), per)]


MARKDOWN_ANSWER = f"""## A VPC template

This template creates:

- one **VPC** (`192.168.0.0/16`)
- one *VSwitch* in the zone you choose

| Resource | Type | CIDR |
|---|---|---:|
| Vpc | `ALIYUN::ECS::VPC` | 192.168.0.0/16 |
| VSwitch | `ALIYUN::ECS::VSwitch` | 192.168.1.0/24 |

```yaml
{VPC_TEMPLATE}```

Deploy it with `aliyun ros CreateStack`; see the [ROS documentation](https://www.alibabacloud.com/help/en/ros/).
"""


def split_every(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` characters, cut anywhere (a word, a line, a fence), as a model does."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def _markdown(_text: str) -> Script:
    """A Markdown answer as an IaC agent writes it, and its template as an inline artifact."""
    for delta in split_every(MARKDOWN_ANSWER, 9):
        yield Text(delta)
    yield Artifact(name="vpc.ros.yaml", content=VPC_TEMPLATE, media_type="application/yaml", inline=True)
    yield Usage(input_tokens=420, output_tokens=260)
    yield Final()


_ECHO_MARKER = "[echo]"


def _echo(text: str) -> Script:
    """The text after ``[echo]``, verbatim: lets a test choose what the agent writes."""
    at = text.lower().find(_ECHO_MARKER)
    answer = text[at + len(_ECHO_MARKER) :].lstrip(" ") if at >= 0 else text
    for delta in split_every(answer or "(nothing to echo)", 7):
        yield Text(delta)
    yield Usage()
    yield Final()


BIG_TOOL_USE_ID = "call_demo_big_1"


def _big_tool(_text: str) -> Script:
    """A tool call whose arguments and result are long (clients show them collapsed)."""
    tid, name = BIG_TOOL_USE_ID, "read_template"
    tool_input = {
        "path": "vpc.ros.yaml",
        "parameters": {f"Parameter{i}": {"Type": "String", "Default": f"value-{i}"} for i in range(1, 9)},
    }
    yield Text("Reading the template. ")
    yield Tool("started", tid, {"name": name})
    yield Tool("input_complete", tid, {"name": name, "toolInput": tool_input})
    yield Tool("completed", tid, {"name": name, "result": VPC_TEMPLATE})
    yield Text("It defines a VPC and a VSwitch.")
    yield Usage()
    yield Final()


def _iac(_text: str) -> Script:
    """IaC answer: the template streamed as text and handed over as an artifact."""
    yield Text("Here is a ROS template for a VPC:\n\n```yaml\n")
    for delta in split_deltas(VPC_TEMPLATE, 10):
        yield Text(delta)
    yield Text("```\n")
    yield Artifact(name="vpc.ros.yaml", content=VPC_TEMPLATE, media_type="application/yaml")
    yield Usage(input_tokens=420, output_tokens=180)
    yield Final()


def _reasoning(_text: str) -> Script:
    """Reasoning turn, shaped like ``iac-e2-thinking-exposed.sse``."""
    yield Thinking("Let me ")
    yield Thinking("think...")
    yield Text("Thought ")
    yield Text("about it. ")
    yield Text("Answer: 42.")
    yield Usage()
    yield Final()


DEMO_TOOL_USE_ID = "call_demo_1"
DEMO_TOOL_RESULT = "hello.txt\nmain.tf\nvpc.ros.yaml"


def _tool(_text: str) -> Script:
    """Tool turn, shaped like ``iac-b-tool-permission.sse`` + ``iac-c-resume-allow.sse`` (no permission)."""
    tid = DEMO_TOOL_USE_ID
    name = "list_files"
    tool_input = {"path": "."}
    yield Text("I will list the files. ")
    yield Tool("started", tid, {"name": name})
    yield Tool("input_delta", tid, {"partialJsonLength": 6})
    yield Tool("input_delta", tid, {"partialJsonLength": 13})
    yield Tool(
        "input_complete",
        tid,
        {
            "name": name,
            "toolInput": tool_input,
            "inputSummary": {"tool_name": name, "fields": {"path": {"type": "str"}}},
        },
    )
    yield Usage()
    yield Tool("progress", tid, {"name": name, "mcpProgress": {"progress": 0.5, "message": "Scanning"}})
    yield Tool("progress", tid, {"name": name, "mcpProgress": {"progress": 1.0, "total": 1.0, "message": "Done"}})
    yield Tool("completed", tid, {"name": name, "result": DEMO_TOOL_RESULT})
    yield Text("The workspace ")
    yield Text("has 3 files.")
    yield Usage()
    yield Final()


_SLOW_RE = re.compile(r"\[slow\s+(\d+(?:\.\d+)?)\s*\]")
_LONG_RE = re.compile(r"\[long\s+(\d+)\s*\]")


def slow_total_seconds(text: str) -> float:
    """Total duration of a slow turn: ``[SLOW <seconds>]`` or the 24 s default."""
    match = _SLOW_RE.search(text.lower())
    return float(match.group(1)) if match else SLOW_TOTAL_SECONDS


def _slow(text: str) -> Script:
    """Slow turn: spans more than one keep-alive interval, for timeouts and cancellation."""
    gap = slow_total_seconds(text) / SLOW_DELTAS
    for i in range(SLOW_DELTAS):
        yield Sleep(gap)
        yield Text(f"slow chunk {i + 1}. ")
    yield Usage()
    yield Final()


def _fail(_text: str) -> Script:
    """Failing turn, shaped like ``iac-x-llm-unreachable.sse`` (ends at FAILED, see README)."""
    yield Fail("RetryableError: APIConnectionError: Connection error.")


def long_count(text: str) -> int:
    """The ``n`` of ``[LONG <n>]``, clamped to 1..LONG_MAX (0 if there is no marker)."""
    match = _LONG_RE.search(text.lower())
    if not match:
        return 0
    return min(max(int(match.group(1)), 1), LONG_MAX)


_LONG_WORDS = ("alpha ", "beta ", "gamma ", "delta ")


def _long(text: str) -> Script:
    """Benchmark turn: many small deltas with no pauses."""
    for i in range(long_count(text)):
        yield Text(_LONG_WORDS[i % len(_LONG_WORDS)])
    yield Usage()
    yield Final()


MIXED_TOOL_USE_ID = "call_demo_mixed_1"


def _mixed(_text: str) -> Script:
    """One long turn of every streaming kind the kernel sends (for the reattach trials): reasoning,
    text, a tool call with progress, more reasoning, the template as text and as an artifact, text."""
    for thought in ("The user wants ", "a VPC. ", "First I should ", "look at the workspace."):
        yield Thinking(thought)
    for delta in ("Let me ", "check the ", "workspace first. "):
        yield Text(delta)
    tid, name = MIXED_TOOL_USE_ID, "list_files"
    yield Tool("started", tid, {"name": name})
    yield Tool("input_delta", tid, {"partialJsonLength": 6})
    yield Tool("input_delta", tid, {"partialJsonLength": 13})
    yield Tool(
        "input_complete",
        tid,
        {
            "name": name,
            "toolInput": {"path": "."},
            "inputSummary": {"tool_name": name, "fields": {"path": {"type": "str"}}},
        },
    )
    yield Usage()
    for progress, message in ((0.25, "Scanning"), (0.5, "Scanning"), (0.75, "Scanning")):
        yield Tool("progress", tid, {"name": name, "mcpProgress": {"progress": progress, "message": message}})
    yield Tool("progress", tid, {"name": name, "mcpProgress": {"progress": 1.0, "total": 1.0, "message": "Done"}})
    yield Tool("completed", tid, {"name": name, "result": DEMO_TOOL_RESULT})
    for thought in ("There is ", "no VPC yet, ", "so I will write one."):
        yield Thinking(thought)
    yield Text("The workspace has 3 files. ")
    yield Text("Here is a ROS template for a VPC:\n\n```yaml\n")
    for delta in split_deltas(VPC_TEMPLATE, 30):
        yield Text(delta)
    yield Text("```\n")
    yield Artifact(name="vpc.ros.yaml", content=VPC_TEMPLATE, media_type="application/yaml")
    for delta in ("I saved it ", "as vpc.ros.yaml. ", "Deploy it ", "when ready."):
        yield Text(delta)
    yield Usage(input_tokens=640, output_tokens=260)
    yield Final()


def answers_of(outcome: object, count: int) -> tuple[str, ...]:
    """The ``count`` answers an ``Ask`` step got back (a tuple of strings from the interpreter)."""
    if not isinstance(outcome, tuple) or len(outcome) != count or not all(isinstance(a, str) for a in outcome):
        raise TypeError(f"an Ask step expects a tuple of {count} answer strings, got {outcome!r}")
    return outcome


DEMO_WRITE_CONTENT = "name: demo\nregion: cn-hangzhou\nreplicas: 2\n"
DENIED_RESULT = (
    "The user explicitly denied this tool operation. This is not a cloud API or IAM permission error. "
    "Do not retry this operation or perform the same action with another tool unless the user asks again."
)


def _write_tool_events(tool_use_id: str, path: str) -> Iterator[Step]:
    """``write_file`` started, input_delta x2, input_complete (as ``iac-b-tool-permission.sse``)."""
    name = "write_file"
    yield Tool("started", tool_use_id, {"name": name})
    yield Tool("input_delta", tool_use_id, {"partialJsonLength": 38})
    yield Tool("input_delta", tool_use_id, {"partialJsonLength": 39})
    yield Tool(
        "input_complete",
        tool_use_id,
        {
            "name": name,
            "toolInput": {"path": path, "content": DEMO_WRITE_CONTENT},
            "inputSummary": {"tool_name": name, "fields": {"path": {"type": "str"}, "content": {"type": "str"}}},
        },
    )


def write_permission(tool_use_id: str, path: str) -> InputRequest:
    """The permission request for ``write_file`` of ``path`` (fields as the kernel's projection)."""
    content = DEMO_WRITE_CONTENT.encode("utf-8")
    fingerprint = hashlib.sha256(content).hexdigest()[:16]
    summary = (
        'write_file: {"content":{"fingerprint":"sha256:'
        + fingerprint
        + '","length":'
        + str(len(content))
        + ',"type":"str"},"path":"'
        + path
        + '"}'
    )
    return InputRequest(
        kind=PERMISSION,
        title="Change a workspace file",
        prompt=f"Write {path}. Allow once?",
        tool_use_id=tool_use_id,
        tool_name="write_file",
        options=PERMISSION_OPTIONS,
        fields={
            "purpose": "Write a file needed for the requested infrastructure task.",
            "effect": "file_change",
            "target": path,
            "isReadOnly": False,
            "safeSummary": summary,
        },
    )


def _run_write(tool_use_id: str, path: str, decision: str) -> Iterator[Step]:
    """The tool's outcome after the answer: artifact + completed, or failed with the denial text."""
    name = path.rsplit("/", 1)[-1]
    if decision == ALLOW_ONCE:
        lines = DEMO_WRITE_CONTENT.count("\n")
        yield Artifact(name=name, content=DEMO_WRITE_CONTENT, media_type="application/yaml", tool_use_id=tool_use_id)
        result = f"Successfully wrote {lines} lines to {path}"
        yield Tool("completed", tool_use_id, {"name": "write_file", "result": result})
    else:
        yield Tool("failed", tool_use_id, {"name": "write_file", "result": DENIED_RESULT})


DEMO_WRITE_PATH = "/workspace/x.yaml"
DEMO_WRITE_TOOL_USE_ID = "call_demo_write_1"


def _permission(_text: str) -> Script:
    """Permission turn, shaped like ``iac-b-tool-permission.sse`` + ``iac-c``/``iac-d2`` resumes."""
    tid = DEMO_WRITE_TOOL_USE_ID
    yield Text("I will write a file. ")
    yield from _write_tool_events(tid, DEMO_WRITE_PATH)
    yield Usage()
    (decision,) = answers_of((yield Ask((write_permission(tid, DEMO_WRITE_PATH),))), 1)
    yield from _run_write(tid, DEMO_WRITE_PATH, decision)
    if decision == ALLOW_ONCE:
        yield Text("The tool ")
        yield Text("ran; ")
        yield Text("all done.")
    else:
        yield Text("The write ")
        yield Text("was denied; ")
        yield Text("nothing changed.")
    yield Usage()
    yield Final()


DEMO_TWO_TOOLS: tuple[tuple[str, str], ...] = (
    ("call_demo_write_a", "/workspace/a.yaml"),
    ("call_demo_write_b", "/workspace/b.yaml"),
)


def _two_tools(_text: str) -> Script:
    """Two ``write_file`` calls in one model message, both waiting for approval at once."""
    yield Text("I will write two files. ")
    for tid, path in DEMO_TWO_TOOLS:
        yield from _write_tool_events(tid, path)
    yield Usage()
    requests = tuple(write_permission(tid, path) for tid, path in DEMO_TWO_TOOLS)
    decisions = answers_of((yield Ask(requests)), len(requests))
    for (tid, path), decision in zip(DEMO_TWO_TOOLS, decisions, strict=True):
        yield from _run_write(tid, path, decision)
    allowed = sum(d == ALLOW_ONCE for d in decisions)
    yield Text(f"Wrote {allowed} of {len(decisions)} files; ")
    yield Text("all done.")
    yield Usage()
    yield Final()


QUESTION_OPTIONS: tuple[dict[str, Any], ...] = (
    {"id": "small", "label": "Small (2 vCPU)"},
    {"id": "large", "label": "Large (8 vCPU)"},
)
QUESTION_TOOL_USE_ID = "call_demo_ask_1"


def _question(_text: str) -> Script:
    """The model asks the user (``ask_user_question`` tool); the answer is echoed in the final text."""
    tid = QUESTION_TOOL_USE_ID
    name = "ask_user_question"
    question = "Which instance size should I use?"
    yield Text("I need one detail first. ")
    yield Tool("started", tid, {"name": name})
    yield Tool(
        "input_complete",
        tid,
        {
            "name": name,
            "toolInput": {"question": question, "options": [o["label"] for o in QUESTION_OPTIONS]},
            "inputSummary": {"tool_name": name, "fields": {"question": {"type": "str"}, "options": {"type": "list"}}},
        },
    )
    yield Usage()
    request = InputRequest(
        kind=QUESTION,
        title="Question from the agent",
        prompt=question,
        tool_use_id=tid,
        tool_name=name,
        options=QUESTION_OPTIONS,
        fields={"allowFreeText": True, "freeTextPrompt": "Or type another size"},
    )
    (answer,) = answers_of((yield Ask((request,))), 1)
    yield Tool("completed", tid, {"name": name, "result": answer})
    yield Text("You chose: ")
    yield Text(f"{answer}.")
    yield Usage()
    yield Final()


CANDIDATES: tuple[dict[str, Any], ...] = (
    {"candidate_index": 0, "name": "vpc-single-zone", "summary": "One VPC, one VSwitch"},
    {"candidate_index": 1, "name": "vpc-multi-zone", "summary": "One VPC, two VSwitches in two zones"},
    {"candidate_index": 2, "name": "vpc-with-nat", "summary": "Multi-zone VPC with a NAT gateway"},
)


def candidate_name(answer: str) -> str:
    """The candidate ``name`` an answer designates (by name or ``candidate_index``), else the answer."""
    wanted = answer.strip()
    for candidate in CANDIDATES:
        if wanted in (candidate["name"], str(candidate["candidate_index"])):
            return str(candidate["name"])
    return wanted


def _candidates(_text: str) -> Script:
    """The agent offers candidate architectures and waits for the user to pick one."""
    yield Text("I found 3 candidate architectures. ")
    yield Usage()
    request = InputRequest(
        kind=CANDIDATE_SELECTION,
        title="Choose a candidate",
        prompt="Which candidate should I generate?",
        options=CANDIDATES,
        fields={"allowFreeText": False},
    )
    (answer,) = answers_of((yield Ask((request,))), 1)
    yield Text("Selected candidate: ")
    yield Text(f"{candidate_name(answer)}.")
    yield Usage()
    yield Final()


# ---- Pipeline ("selling") ---------------------------------------------------------------------

PIPELINE_NAME = "selling"
PIPELINE_STEPS: tuple[str, ...] = ("requirements", "candidates", "deploy")
#: ``metadata.iac_code.run_mode`` (the bridge forwards ``forwardedProps.iacCode.runMode``).
PIPELINE_RUN_MODE = "pipeline"
#: Marker in the text that starts a Pipeline whose deploy step fails (rollback, TASK_STATE_FAILED).
FAIL_DEPLOY_MARKER = "[fail_deploy]"
PIPELINE_CANDIDATES: tuple[dict[str, Any], ...] = (
    {"candidate_index": 0, "name": "web-single-ecs", "summary": "One ECS instance behind an EIP"},
    {"candidate_index": 1, "name": "web-ha-slb", "summary": "Two ECS instances in two zones behind an SLB"},
)
CANDIDATE_STEP = "template_generating"
DEPLOY_STEP = "stack_deploying"
DEPLOY_FAILURE = "Stack creation failed: ECS instance type ecs.g7.large is out of stock in cn-hangzhou-k."
#: Status of an envelope by eventType suffix (first match), else ``running``.
_STATUS_BY_SUFFIX: tuple[tuple[str, str], ...] = (
    ("_completed", "completed"),
    ("_failed", "failed"),
    ("_error", "failed"),
    ("input_required", "waiting_input"),
    ("permission_requested", "waiting_permission"),
    ("_selected", "completed"),
    ("rollback_triggered", "rolling_back"),
)


def default_status(event_type: str) -> str:
    """The envelope ``status`` of an event type: completed, failed, waiting_*, ... or running."""
    for suffix, status in _STATUS_BY_SUFFIX:
        if event_type.endswith(suffix):
            return status
    return "running"


def pipeline_step(step_id: str) -> PipelineStep:
    """The coordinate of one of ``PIPELINE_STEPS`` (1-based index)."""
    return PipelineStep(step_id, PIPELINE_STEPS.index(step_id) + 1, len(PIPELINE_STEPS))


def candidate_id(index: int) -> str:
    """``candidate-<index>``: the Pipeline id of a candidate."""
    return f"candidate-{index}"


def pipeline_candidate(answer: str) -> dict[str, Any] | None:
    """The Pipeline candidate an answer designates (its ``name`` or ``candidate_index``), else None."""
    wanted = answer.strip()
    for candidate in PIPELINE_CANDIDATES:
        if wanted in (candidate["name"], str(candidate["candidate_index"]), candidate_id(candidate["candidate_index"])):
            return candidate
    return None


def stack_name(candidate: dict[str, Any]) -> str:
    """The ROS stack a deployment of ``candidate`` creates."""
    return f"{PIPELINE_NAME}-{candidate['name']}"


def deploy_permission(candidate: dict[str, Any]) -> InputRequest:
    """The sideband permission of the deploy step (``scope: candidate`` + ``subPipelineId``)."""
    cid = candidate_id(candidate["candidate_index"])
    stack = stack_name(candidate)
    return InputRequest(
        kind=PERMISSION,
        title="Create cloud resources",
        prompt=f"Create ROS stack {stack} (5 resources) in cn-hangzhou. Allow once?",
        tool_use_id=f"call_{cid}_deploy",
        tool_name="create_stack",
        options=PERMISSION_OPTIONS,
        fields={
            "purpose": "Deploy the selected candidate architecture.",
            "effect": "cloud_change",
            "target": stack,
            "isReadOnly": False,
            "safeSummary": f'create_stack: {{"regionId":"cn-hangzhou","stackName":"{stack}"}}',
            "scope": "candidate",
            "subPipelineId": cid,
        },
    )


def _candidate_events(index: int, step: PipelineStep) -> list[list[PipelineEvent]]:
    """One candidate's template generation, as phases (the script interleaves the candidates)."""
    candidate = PIPELINE_CANDIDATES[index]
    cid = candidate_id(index)
    name = str(candidate["name"])
    path = f"/workspace/{name}.ros.yaml"
    tool_use_id = f"call_{cid}_write"

    def ev(event_type: str, data: dict[str, Any], scope: str = "candidate_step") -> PipelineEvent:
        return PipelineEvent(event_type, scope, data, step=step, candidate=cid, candidate_step=CANDIDATE_STEP)

    return [
        [ev("candidate_step_started", {"title": "Generate the ROS template"})],
        [ev("text_delta", {"text": f"Drafting {name}: "})],
        [ev("thinking_delta", {"text": f"{candidate['summary']} fits the requirements."})],
        [ev("text_delta", {"text": f"{candidate['summary']}. "})],
        [
            ev("tool_started", {"toolUseId": tool_use_id, "toolName": "write_file", "input": {"path": path}}),
            ev(
                "tool_result",
                {"toolUseId": tool_use_id, "result": f"Successfully wrote 24 lines to {path}", "isError": False},
            ),
        ],
        [ev("candidate_step_completed", {"artifact": path})],
    ]


def _pipeline(text: str) -> Script:
    """The iac-code "selling" Pipeline over three turns of one task (see docs/http-api.md#interrupts-and-resume)."""
    fail = FAIL_DEPLOY_MARKER in text.lower()
    yield PipelineEvent("pipeline_started", "pipeline", {"steps": list(PIPELINE_STEPS), "request": text})

    requirements = pipeline_step("requirements")
    yield PipelineEvent("step_started", "step", {"title": "Collect requirements"}, step=requirements)
    for delta in ("Requirements: ", "a web shop ", "for ~500 users, ", "budget-conscious."):
        yield PipelineEvent("text_delta", "step", {"text": delta}, step=requirements)
    yield PipelineEvent("usage", "step", Usage(input_tokens=320, output_tokens=40).fields(), step=requirements)
    yield PipelineEvent("step_completed", "step", {"summary": "web shop, ~500 users"}, step=requirements)

    candidates = pipeline_step("candidates")
    count = len(PIPELINE_CANDIDATES)
    yield PipelineEvent("step_started", "step", {"title": "Design candidate architectures"}, step=candidates)
    yield PipelineBatch(
        tuple(
            PipelineEvent(
                "candidate_started",
                "candidate",
                {"name": c["name"], "candidate_index": c["candidate_index"]},
                step=candidates,
                candidate=candidate_id(c["candidate_index"]),
            )
            for c in PIPELINE_CANDIDATES
        )
    )
    phases = [_candidate_events(i, candidates) for i in range(count)]
    for phase in range(len(phases[0])):
        # Parallel candidates: one phase of every candidate, then the next phase.
        events = tuple(event for per_candidate in phases for event in per_candidate[phase])
        if phase == 0:
            yield PipelineBatch(events)
        else:
            yield from events
    yield PipelineBatch(
        tuple(
            PipelineEvent(
                "candidate_completed",
                "candidate",
                {"name": c["name"]},
                step=candidates,
                candidate=candidate_id(c["candidate_index"]),
            )
            for c in PIPELINE_CANDIDATES
        )
    )
    yield PipelineEvent("usage", "step", Usage(input_tokens=900, output_tokens=260).fields(), step=candidates)
    request = InputRequest(
        kind=CANDIDATE_SELECTION,
        title="Choose a candidate",
        prompt="Which candidate architecture should I deploy?",
        options=PIPELINE_CANDIDATES,
        fields={"allowFreeText": False},
    )
    asked = PipelineEvent("input_required", "step", {"kind": CANDIDATE_SELECTION}, step=candidates)
    (answer,) = answers_of((yield Ask((request,), pipeline=asked)), 1)
    chosen = pipeline_candidate(answer)
    if chosen is None:
        chosen = PIPELINE_CANDIDATES[0]
        warning = f"Unknown candidate {answer.strip()!r}; using {chosen['name']}."
        yield PipelineEvent("pipeline_warning", "pipeline", {"message": warning})
    cid = candidate_id(chosen["candidate_index"])
    yield PipelineEvent(
        "candidate_selected",
        "candidate",
        {"name": chosen["name"], "candidate_index": chosen["candidate_index"], "answer": answer},
        step=candidates,
        candidate=cid,
    )
    yield PipelineEvent("step_completed", "step", {"selected": chosen["name"]}, step=candidates)

    deploy = pipeline_step("deploy")
    stack = stack_name(chosen)

    def dev(event_type: str, data: dict[str, Any]) -> PipelineEvent:
        return PipelineEvent(event_type, "candidate_step", data, step=deploy, candidate=cid, candidate_step=DEPLOY_STEP)

    def progress(status: str, done: int) -> PipelineEvent:
        return dev(
            "stack_progress",
            {
                "stackName": stack,
                "status": status,
                "completedResources": done,
                "totalResources": 5,
                "progress": done / 5,
            },
        )

    yield PipelineEvent("step_started", "step", {"title": "Deploy the stack", "candidate": chosen["name"]}, step=deploy)
    yield dev("candidate_step_started", {"title": f"Create stack {stack}"})
    yield progress("CREATE_IN_PROGRESS", 1)
    if fail:
        yield progress("CREATE_FAILED", 2)
        yield dev("candidate_step_failed", {"error": DEPLOY_FAILURE})
        yield PipelineEvent("step_failed", "step", {"error": DEPLOY_FAILURE}, step=deploy)
        yield PipelineEvent("rollback_triggered", "step", {"stackName": stack, "reason": DEPLOY_FAILURE}, step=deploy)
        yield PipelineEvent("rollback_completed", "step", {"stackName": stack, "deletedResources": 2}, step=deploy)
        yield PipelineEvent("pipeline_error", "pipeline", {"error": DEPLOY_FAILURE, "stepId": "deploy"})
        yield Fail(f"PipelineError: {DEPLOY_FAILURE}", error_id="demopipe0001")
        return
    asked_permission = dev("permission_requested", {"kind": PERMISSION})
    (decision,) = answers_of((yield WaitSideband(deploy_permission(chosen), asked_permission)), 1)
    if decision == ALLOW_ONCE:
        yield progress("CREATE_IN_PROGRESS", 3)
        yield progress("CREATE_COMPLETE", 5)
        yield dev("candidate_step_completed", {"stackName": stack, "status": "CREATE_COMPLETE"})
        yield PipelineEvent("step_completed", "step", {"stackName": stack}, step=deploy)
        yield PipelineEvent("pipeline_completed", "pipeline", {"selected": chosen["name"], "stackName": stack})
        yield Text(f"Deployed {chosen['name']} ")
        yield Text(f"as stack {stack}.")
    else:
        yield dev("candidate_step_completed", {"stackName": stack, "status": "SKIPPED"})
        yield PipelineEvent("step_completed", "step", {"stackName": stack, "skipped": True}, step=deploy)
        yield PipelineEvent("pipeline_completed", "pipeline", {"selected": chosen["name"], "deployed": False})
        yield Text("Deployment skipped: ")
        yield Text("the permission was denied.")
    yield Usage(input_tokens=1200, output_tokens=80)
    yield Final()


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("long", ("[long ",), _long, "[LONG <n>]: n text deltas as fast as possible"),
    Scenario("echo", ("[echo]",), _echo, "the text after [echo], verbatim, in small deltas"),
    Scenario("markdown", ("markdown",), _markdown, "a Markdown answer with a yaml template, and the template inline"),
    Scenario("big_tool", ("[big tool]",), _big_tool, "a tool call with long JSON arguments and a long result"),
    Scenario("pipeline", ("pipeline",), _pipeline, "the selling Pipeline with a selection and a sideband permission"),
    Scenario("mixed", ("[mixed]",), _mixed, "reasoning, text, a tool with progress, an artifact, more text"),
    Scenario("fail", ("fail",), _fail, "WORKING then TASK_STATE_FAILED with metadata.iac_code.error"),
    Scenario("slow", ("slow",), _slow, "6 deltas over 24 s, or [SLOW <seconds>]; cancellable"),
    Scenario("two_tools", ("two tools",), _two_tools, "two write_file calls, both waiting for a permission"),
    Scenario(
        "permission", ("permission", "write file", "write a file"), _permission, "write_file waiting for a permission"
    ),
    Scenario("question", ("question", "ask me"), _question, "an ask_user_question input, answered as text"),
    Scenario("candidates", ("candidates", "choose"), _candidates, "a candidate_selection input, answered as text"),
    Scenario("reasoning", ("[think]", "think"), _reasoning, "raw_thinking deltas, then text"),
    Scenario("tool", ("tool", "list files"), _tool, "a tool call with progress and a string result"),
    Scenario("iac", ("template", "vpc"), _iac, "a ROS YAML template as text and as an artifact"),
)
PLAIN = Scenario("plain", (), _plain, "a few text deltas (default)")
#: Scenarios that wait for the user; text sent while a turn is parked runs ``plain`` instead.
INTERRUPT_SCENARIOS = frozenset({"two_tools", "permission", "question", "candidates", "pipeline"})


def select_scenario(text: str, run_mode: str | None = None) -> Scenario:
    """``pipeline`` for ``run_mode == "pipeline"``; else the first scenario whose keyword occurs in
    the lower-cased text, else ``plain``."""
    if run_mode == PIPELINE_RUN_MODE:
        return next(s for s in SCENARIOS if s.name == "pipeline")
    lowered = text.lower()
    for scenario in SCENARIOS:
        if scenario.name == "long":
            if long_count(lowered):
                return scenario
            continue
        if any(keyword in lowered for keyword in scenario.keywords):
            return scenario
    return PLAIN


_PAUSE_RE = re.compile(r"\[pause\s+(\d+(?:\.\d+)?)\s*\]")


def pause_seconds(text: str) -> float:
    """``[PAUSE <seconds>]``: how long an interrupt scenario waits before it asks (0 without it)."""
    match = _PAUSE_RE.search(text.lower())
    return float(match.group(1)) if match else 0.0


def paused(script: Script, seconds: float) -> Script:
    """``script`` with a ``Sleep`` before its first ``Ask`` (lets a test act while a turn runs)."""
    outcome: object = None
    while True:
        try:
            step = script.send(outcome)
        except StopIteration:
            return
        if seconds > 0 and isinstance(step, Ask):
            yield Sleep(seconds)
            seconds = 0.0
        outcome = yield step


def script_for(text: str, run_mode: str | None = None) -> Script:
    """The step generator for one user turn."""
    return paused(select_scenario(text, run_mode).build(text), pause_seconds(text))
