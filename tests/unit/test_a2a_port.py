"""The real A2A client and the tests' scripted kernel both offer every method of `A2APort`."""

from __future__ import annotations

import inspect

import pytest

from agui_bridge.a2a.port import A2APort, UpstreamStream
from agui_bridge.kernel.client import A2AClient, A2AStream
from tests.support.fakes import ScriptedA2A, ScriptedStream, streaming_a2a


def _members(protocol: type) -> list[str]:
    return [name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_")]


def _parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


@pytest.mark.parametrize(("protocol", "implementation"), [(A2APort, A2AClient), (A2APort, ScriptedA2A)])
def test_the_client_and_the_fake_offer_every_port_method(protocol: type, implementation: type) -> None:
    for name in _members(protocol):
        assert _parameters(getattr(implementation, name)) == _parameters(getattr(protocol, name)), name


@pytest.mark.parametrize("implementation", [A2AStream, ScriptedStream])
def test_both_streams_offer_the_stream_methods(implementation: type) -> None:
    for name in _members(UpstreamStream):
        assert _parameters(getattr(implementation, name)) == _parameters(getattr(UpstreamStream, name)), name


def test_the_port_names_what_the_runs_call() -> None:
    assert sorted(_members(A2APort)) == [
        "cancel_task",
        "close",
        "ensure_restored",
        "get_task",
        "open_stream",
        "pipeline_state",
        "send_message",
    ]


def test_the_fake_records_calls_and_cancelled_tasks() -> None:
    fake = streaming_a2a([[]])
    stream = fake.open_stream("SendStreamingMessage", {"message": {}})
    assert list(stream.batches()) == [[]]
    fake.cancel_task("task-1")
    assert fake.methods() == ["SendStreamingMessage", "CancelTask"]
    assert fake.cancelled == ["task-1"]
