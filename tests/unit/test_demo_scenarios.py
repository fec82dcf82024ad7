"""Scenario selection and scripts of the demo agent, as tables (no server)."""

from __future__ import annotations

import pytest

from agui_bridge.demo import scenarios as sc


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("say hi", "plain"),
        ("", "plain"),
        ("Create a VPC template", "iac"),
        ("give me a ROS TEMPLATE", "iac"),
        ("vpc please", "iac"),
        ("[THINK] q", "reasoning"),
        ("let me think about it", "reasoning"),
        ("use a tool", "tool"),
        ("List Files in the workspace", "tool"),
        ("a slow one", "slow"),
        ("slow [SLOW 3]", "slow"),
        ("please FAIL", "fail"),
        ("[LONG 500]", "long"),
        ("[long 7] slow fail", "long"),
        ("[LONG 0]", "long"),
        ("[LONG x]", "plain"),
        # first match wins: fail > slow > reasoning > tool > iac
        ("slow template that will fail", "fail"),
        ("think slowly", "slow"),
        ("think about a tool", "reasoning"),
        ("a tool for a vpc template", "tool"),
        ("please WRITE FILE x.yaml", "permission"),
        ("please write a file x.yaml", "permission"),
        ("Write a file named notes.txt", "permission"),
        ("ask for permission", "permission"),
        ("use two tools", "two_tools"),
        ("two tools that need a permission", "two_tools"),
        ("ask me a question", "question"),
        ("a Question about a tool", "question"),
        ("show me the candidates", "candidates"),
        ("choose a vpc", "candidates"),
        ("permission to fail", "fail"),
        ("[MARKDOWN] a vpc template", "markdown"),
        ("[echo] <script>slow fail template</script>", "echo"),
        ("[BIG TOOL] for a template", "big_tool"),
    ],
)
def test_select_scenario(text: str, expected: str) -> None:
    assert sc.select_scenario(text).name == expected


@pytest.mark.parametrize(
    ("text", "count"),
    [("[LONG 500]", 500), ("[long 1]", 1), ("[LONG 0]", 1), ("[LONG 999999999]", sc.LONG_MAX), ("hi", 0)],
)
def test_long_count(text: str, count: int) -> None:
    assert sc.long_count(text) == count


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("slow", sc.SLOW_TOTAL_SECONDS), ("slow [SLOW 3]", 3.0), ("slow [slow 0.6]", 0.6), ("[SLOW]", 24.0)],
)
def test_slow_total_seconds(text: str, seconds: float) -> None:
    assert sc.slow_total_seconds(text) == seconds


def _steps(text: str) -> list[sc.Step]:
    return list(sc.script_for(text))


@pytest.mark.parametrize("text", ["say hi", "vpc template", "think", "tool", "slow [SLOW 1]", "[LONG 3]"])
def test_successful_scripts_end_with_usage_then_final(text: str) -> None:
    steps = _steps(text)
    assert isinstance(steps[-1], sc.Final)
    assert isinstance(steps[-2], sc.Usage)
    assert sum(isinstance(s, sc.Final) for s in steps) == 1


def test_fail_script_is_a_single_fail_step() -> None:
    assert _steps("fail") == [sc.Fail("RetryableError: APIConnectionError: Connection error.")]


def test_long_script_has_n_text_deltas() -> None:
    assert sum(isinstance(s, sc.Text) for s in _steps("[LONG 500]")) == 500


def test_slow_script_spreads_six_deltas_over_the_total() -> None:
    steps = _steps("slow")
    sleeps = [s.seconds for s in steps if isinstance(s, sc.Sleep)]
    assert len(sleeps) == sc.SLOW_DELTAS
    assert sum(sleeps) == pytest.approx(24.0)
    assert sum(isinstance(s, sc.Text) for s in steps) == sc.SLOW_DELTAS
    assert sum(s.seconds for s in _steps("slow [SLOW 3]") if isinstance(s, sc.Sleep)) == pytest.approx(3.0)


def test_tool_script_status_order() -> None:
    statuses = [s.status for s in _steps("tool") if isinstance(s, sc.Tool)]
    assert statuses == ["started", "input_delta", "input_delta", "input_complete", "progress", "progress", "completed"]
    tools = [s for s in _steps("tool") if isinstance(s, sc.Tool)]
    assert {t.tool_use_id for t in tools} == {sc.DEMO_TOOL_USE_ID}
    assert tools[3].fields["toolInput"] == {"path": "."}
    assert isinstance(tools[-1].fields["result"], str)
    assert "mcpProgress" in tools[4].fields


def test_iac_script_streams_the_template_and_an_artifact() -> None:
    steps = _steps("Create a VPC template")
    text = "".join(s.delta for s in steps if isinstance(s, sc.Text))
    assert sc.VPC_TEMPLATE in text
    assert 10 <= sum(isinstance(s, sc.Text) for s in steps) <= 14
    (artifact,) = [s for s in steps if isinstance(s, sc.Artifact)]
    assert artifact.name == "vpc.ros.yaml"
    assert artifact.content == sc.VPC_TEMPLATE
    assert artifact.byte_size == len(sc.VPC_TEMPLATE.encode())
    assert len(artifact.sha256) == 64


def test_reasoning_script_thinks_before_text() -> None:
    kinds = [type(s).__name__ for s in _steps("[THINK] q")]
    assert kinds.index("Thinking") < kinds.index("Text")
    assert kinds.count("Thinking") == 2


@pytest.mark.parametrize("count", [1, 3, 10, 100])
def test_split_deltas_concatenates_back(count: int) -> None:
    parts = sc.split_deltas(sc.VPC_TEMPLATE, count)
    assert "".join(parts) == sc.VPC_TEMPLATE
    assert len(parts) <= max(count, 1) or count > len(sc.VPC_TEMPLATE.splitlines())


def test_every_scenario_keyword_is_lower_case() -> None:
    for scenario in sc.SCENARIOS:
        assert all(k == k.lower() for k in scenario.keywords)


def _drive(text: str, answers: list[tuple[str, ...]]) -> tuple[list[sc.Step], list[sc.Ask]]:
    """Run a script, answering its ``Ask`` steps in order with ``answers``."""
    script = sc.script_for(text)
    steps: list[sc.Step] = []
    asks: list[sc.Ask] = []
    outcome: object = None
    while True:
        try:
            step = script.send(outcome)
        except StopIteration:
            return steps, asks
        steps.append(step)
        outcome = None
        if isinstance(step, sc.Ask):
            asks.append(step)
            outcome = answers.pop(0)


def test_permission_script_allow_once() -> None:
    steps, (ask,) = _drive("write file", [("allow_once",)])
    (request,) = ask.requests
    assert request.kind == sc.PERMISSION
    assert request.prompt == "Write /workspace/x.yaml. Allow once?"
    assert request.tool_name == "write_file"
    assert [o["id"] for o in request.options] == ["allow_once", "deny"]
    after = steps[steps.index(ask) + 1 :]
    assert isinstance(after[0], sc.Artifact)
    assert after[0].tool_use_id == request.tool_use_id
    assert isinstance(after[1], sc.Tool)
    assert after[1].status == "completed"
    assert isinstance(steps[-1], sc.Final)
    before = [s.status for s in steps[: steps.index(ask)] if isinstance(s, sc.Tool)]
    assert before == ["started", "input_delta", "input_delta", "input_complete"]


def test_permission_script_deny() -> None:
    steps, _ = _drive("write file", [("deny",)])
    tools = [s for s in steps if isinstance(s, sc.Tool)]
    assert tools[-1].status == "failed"
    assert tools[-1].fields["result"] == sc.DENIED_RESULT
    assert not any(isinstance(s, sc.Artifact) for s in steps)


def test_two_tools_script_asks_both_at_once() -> None:
    steps, (ask,) = _drive("two tools", [("allow_once", "deny")])
    assert [r.tool_use_id for r in ask.requests] == [tid for tid, _ in sc.DEMO_TWO_TOOLS]
    outcome = {s.tool_use_id: s.status for s in steps if isinstance(s, sc.Tool) and s.status in ("completed", "failed")}
    assert outcome == {"call_demo_write_a": "completed", "call_demo_write_b": "failed"}
    assert "".join(s.delta for s in steps if isinstance(s, sc.Text)).endswith("Wrote 1 of 2 files; all done.")


def test_question_and_candidate_scripts_echo_the_answer() -> None:
    steps, (ask,) = _drive("ask me", [("Small (2 vCPU)",)])
    assert ask.requests[0].kind == sc.QUESTION
    assert ask.requests[0].fields["allowFreeText"] is True
    assert "".join(s.delta for s in steps if isinstance(s, sc.Text)).endswith("You chose: Small (2 vCPU).")
    steps, (ask,) = _drive("candidates", [("2",)])
    assert ask.requests[0].kind == sc.CANDIDATE_SELECTION
    assert "".join(s.delta for s in steps if isinstance(s, sc.Text)).endswith("Selected candidate: vpc-with-nat.")


@pytest.mark.parametrize(("answer", "name"), [("0", "vpc-single-zone"), ("vpc-with-nat", "vpc-with-nat"), ("x", "x")])
def test_candidate_name(answer: str, name: str) -> None:
    assert sc.candidate_name(answer) == name


def test_ask_needs_a_tuple_of_answers() -> None:
    with pytest.raises(TypeError):
        _drive("write file", [None])  # type: ignore[list-item]


def test_interrupt_scenarios_are_scenarios() -> None:
    assert {s.name for s in sc.SCENARIOS} >= sc.INTERRUPT_SCENARIOS


def test_pause_sleeps_once_right_before_the_first_ask() -> None:
    assert sc.pause_seconds("write file [PAUSE 2.5]") == 2.5
    assert sc.pause_seconds("write file") == 0.0
    script = sc.script_for("please write file [PAUSE 3]")
    steps: list[object] = []
    outcome: object = None
    while True:
        try:
            step = script.send(outcome)
        except StopIteration:
            break
        steps.append(step)
        outcome = (sc.ALLOW_ONCE,) if isinstance(step, sc.Ask) else None
    ask = next(i for i, step in enumerate(steps) if isinstance(step, sc.Ask))
    assert steps[ask - 1] == sc.Sleep(3.0)
    assert sum(isinstance(step, sc.Sleep) for step in steps) == 1
    assert isinstance(steps[-1], sc.Final)  # the answer still reaches the script through the wrapper


def test_mixed_script_streams_every_kind_in_one_turn() -> None:
    steps = _steps("a [MIXED] run")
    kinds = [type(s).__name__ for s in steps]
    # reasoning, then text, a tool call with progress, reasoning again, text, the artifact, text, usage, final
    collapsed = [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]
    assert collapsed == [
        "Thinking",
        "Text",
        "Tool",
        "Usage",
        "Tool",
        "Thinking",
        "Text",
        "Artifact",
        "Text",
        "Usage",
        "Final",
    ]
    tools = [s for s in steps if isinstance(s, sc.Tool)]
    assert {t.tool_use_id for t in tools} == {sc.MIXED_TOOL_USE_ID}
    assert [t.status for t in tools] == ["started", "input_delta", "input_delta", "input_complete"] + [
        "progress"
    ] * 4 + ["completed"]
    (artifact,) = [s for s in steps if isinstance(s, sc.Artifact)]
    assert artifact.name == "vpc.ros.yaml" and artifact.content == sc.VPC_TEMPLATE
    assert sum(isinstance(s, sc.Text) for s in steps) >= 30
    assert len(steps) >= 50  # ~60 AG-UI events once the bridge opens and closes messages and tool calls


@pytest.mark.parametrize("text", ["[mixed]", "[MIXED] a slow tool that may fail to think", "a [Mixed] template"])
def test_mixed_marker_wins_over_the_single_kind_keywords(text: str) -> None:
    assert sc.select_scenario(text).name == "mixed"


@pytest.mark.parametrize(
    ("text", "expected"), [("show a markdown answer", "markdown"), ("a Markdown template", "markdown")]
)
def test_markdown_is_picked_before_the_template_keywords(text: str, expected: str) -> None:
    assert sc.select_scenario(text).name == expected


def test_markdown_script_streams_the_answer_cut_mid_line_and_an_inline_artifact() -> None:
    steps = _steps("show a markdown answer")
    deltas = [s.delta for s in steps if isinstance(s, sc.Text)]
    assert "".join(deltas) == sc.MARKDOWN_ANSWER
    assert any(not delta.endswith("\n") for delta in deltas)
    assert "```yaml\n" + sc.VPC_TEMPLATE + "```\n" in sc.MARKDOWN_ANSWER
    (artifact,) = [s for s in steps if isinstance(s, sc.Artifact)]
    assert artifact.inline and artifact.content == sc.VPC_TEMPLATE and artifact.media_type == "application/yaml"
    assert isinstance(steps[-1], sc.Final) and isinstance(steps[-2], sc.Usage)


def _texts(text: str) -> str:
    return "".join(step.delta for step in sc.script_for(text) if isinstance(step, sc.Text))


def test_echo_writes_the_text_after_its_marker_verbatim() -> None:
    assert _texts("[ECHO] <b>x</b>\n```yaml\na: 1\n```") == "<b>x</b>\n```yaml\na: 1\n```"
    assert all(len(s.delta) <= 7 for s in sc.script_for("[echo] " + "y" * 50) if isinstance(s, sc.Text))


def test_the_console_marker_picks_the_same_markdown_answer() -> None:
    assert _texts("[markdown]") == sc.MARKDOWN_ANSWER
