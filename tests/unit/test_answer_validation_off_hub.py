"""A resume answer's schema validation runs off the gevent hub (docs/design.md#answer-validation).

The largest answer the bound lets through still takes a schema validation of tenths of a second; on the hub
that would stall every stream of the worker, so the script runs it under the hub watchdog (a stall fails
the test) while a greenlet counts the hub's turns.
"""

from __future__ import annotations

import json
from pathlib import Path

from agui_bridge.runs.preflight import prepare_off_hub
from agui_bridge.runs.resume_plan import PreparedAnswer
from agui_bridge.store.model import PendingInterrupt
from agui_bridge.validation.run_input import ResumeAnswer
from tests.support.hub_guard import run_patched

REPO = Path(__file__).resolve().parents[2]

#: A question whose schema checks every entry of a long list against the `uri` format.
SCHEMA = {
    "type": "object",
    "required": ["freeText"],
    "properties": {
        "freeText": {"type": "string"},
        "links": {"type": "array", "items": {"type": "string", "format": "uri"}},
    },
}
QUESTION = {"kind": "ask_user_question", "inputId": "q1", "required": True}
LINKS = 40_000  # about 240 K characters of JSON: under the answer bound, and slow to validate


def _chosen(links: int) -> list[tuple[ResumeAnswer, PendingInterrupt]]:
    payload = {"freeText": "ok", "links": ["a:b"] * links}
    entry = PendingInterrupt(value=QUESTION, sideband=False, expires_at_ms=10**13, announced={"responseSchema": SCHEMA})
    return [(ResumeAnswer("q1", "resolved", payload, True), entry)]


_VALIDATE_A_LARGE_ANSWER = f"""
import json
import gevent
from tests.unit.test_answer_validation_off_hub import _chosen
from agui_bridge.runs.preflight import prepare_off_hub

ticks = []
def ticker():
    while True:
        ticks.append(1)
        gevent.sleep(0.001)
chosen = _chosen({LINKS})
spinning = gevent.spawn(ticker)
gevent.sleep(0)
ticks.clear()
(prepared,) = prepare_off_hub(chosen)
during = len(ticks)
spinning.kill()
print(json.dumps({{"text": prepared.text, "ticks_during_validation": during}}))
"""


def test_a_large_valid_answer_is_validated_while_the_hub_keeps_running() -> None:
    done = run_patched(_VALIDATE_A_LARGE_ANSWER, cwd=REPO)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["text"] == "ok"
    assert result["ticks_during_validation"] > 0


def test_off_hub_validation_runs_in_place_without_gevent() -> None:
    """The thread back-end: no pool, the stream's own thread validates (and refusals still raise)."""
    prepared: list[PreparedAnswer] = prepare_off_hub(_chosen(3))
    assert [answer.text for answer in prepared] == ["ok"]
