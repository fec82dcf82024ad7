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
fail       ``fail``                                WORKING, then TASK_STATE_FAILED with a status
                                                   message and ``metadata.iac_code.error``
slow       ``slow`` (``[SLOW <seconds>]`` sets     6 text deltas spread over 24 s by default (or
           the total time)                         over <seconds>), usage, final, INPUT_REQUIRED;
                                                   stops at once when the task is cancelled
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

Extension point (interrupts): a script is a generator, and the interpreter ``send()``s each step's
outcome back into it. A future ``AskPermission``/``AskQuestion`` step makes the interpreter emit
INPUT_REQUIRED with ``metadata.iac_code.input`` and park the generator on the task; the next
message on that task resumes it with the user's answer as the value of the ``yield``. Pipeline
events can be a ``Pipeline(envelope)`` step emitted like ``Thinking``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Generator
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
    """A produced file, sent as an ``artifactUpdate`` with the kernel's artifact metadata."""

    name: str
    content: str
    media_type: str = "text/plain"

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


Step = Text | Thinking | Tool | Artifact | Usage | Sleep | Fail | Final
#: A script yields steps; the value sent back is the step's outcome (``None`` for every step today,
#: an interrupt answer for future ``Ask*`` steps).
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


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("long", ("[long ",), _long, "[LONG <n>]: n text deltas as fast as possible"),
    Scenario("fail", ("fail",), _fail, "WORKING then TASK_STATE_FAILED with metadata.iac_code.error"),
    Scenario("slow", ("slow",), _slow, "6 deltas over 24 s, or [SLOW <seconds>]; cancellable"),
    Scenario("reasoning", ("[think]", "think"), _reasoning, "raw_thinking deltas, then text"),
    Scenario("tool", ("tool", "list files"), _tool, "a tool call with progress and a string result"),
    Scenario("iac", ("template", "vpc"), _iac, "a ROS YAML template as text and as an artifact"),
)
PLAIN = Scenario("plain", (), _plain, "a few text deltas (default)")


def select_scenario(text: str) -> Scenario:
    """First scenario whose keyword occurs in the lower-cased text, else ``plain``."""
    lowered = text.lower()
    for scenario in SCENARIOS:
        if scenario.name == "long":
            if long_count(lowered):
                return scenario
            continue
        if any(keyword in lowered for keyword in scenario.keywords):
            return scenario
    return PLAIN


def script_for(text: str) -> Script:
    """The step generator for one user turn."""
    return select_scenario(text).build(text)
