"""`build_run`: one admitted run's parts, each built once with everything it needs (docs/design.md#run-built-once).

A run is made of a ledger (its commit points), a projector with its Pipeline mapper, an ending, a turn, an
emitter whose sink is the run's record, a mailbox, a pacer and a detacher. They refer to one another, so the
order below is the order of their needs: each is given, at construction, the parts built before it (the
projector its envelope mapper, the ledger its Pipeline-state reader, the emitter its record, the pacer the
detacher's answer to "does a departure detach?"). Nothing is set on a part after it is built, and the
`RunContext` that holds them is frozen: the run stream (`runs/stream.py`) only sequences them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agui_bridge.a2a.port import A2APort
from agui_bridge.config.settings import Settings
from agui_bridge.projection.pipeline import PipelineMapper, run_projection
from agui_bridge.projection.projector import RunProjector
from agui_bridge.runs.admission import RunTicket
from agui_bridge.runs.deps import StreamDeps
from agui_bridge.runs.detach import Detacher, new_record
from agui_bridge.runs.emit import Emitter
from agui_bridge.runs.ending import RunEnd
from agui_bridge.runs.ledger import RunLedger
from agui_bridge.runs.mailbox import Mailbox
from agui_bridge.runs.observer import RunObserver
from agui_bridge.runs.pump import Pacer
from agui_bridge.runs.registry import RunRegistry
from agui_bridge.runs.turn import RunTurn
from agui_bridge.validation.run_input import RunInput
from agui_bridge.worker.beacon import Beacons
from agui_bridge.worker.runtime import Runtime


@dataclass(frozen=True, slots=True)
class RunContext:
    """One admitted run: who it is, what the worker lends it, and the parts it is made of."""

    ticket: RunTicket
    run: RunInput
    language: str
    settings: Settings
    client: A2APort
    runtime: Runtime
    observer: RunObserver
    registry: RunRegistry
    cancel_markers: Beacons | None
    ledger: RunLedger
    pipeline: PipelineMapper
    projector: RunProjector
    end: RunEnd
    turn: RunTurn
    emitter: Emitter
    mailbox: Mailbox
    detacher: Detacher
    pacer: Pacer


def build_run(deps: StreamDeps, ticket: RunTicket, run: RunInput, language: str) -> RunContext:
    """Every part of one run, in the order of their needs; each gets what it needs in its constructor."""
    settings, client, runtime, observer = deps.settings, deps.client, deps.runtime, deps.observer
    pipeline = run_projection(
        ticket.thread_id, ticket.run_id, ticket.text_digests, ticket.pipeline_open_steps, ticket.pipeline_sequence
    )
    projector = pipeline.projector

    def pipeline_state() -> tuple[int, Iterable[str]]:
        return pipeline.sequence, pipeline.durable_steps

    ledger = RunLedger(deps.store, ticket, pipeline_state)
    end = RunEnd(ticket, ledger, projector, client=client, runtime=runtime, observer=observer, language=language)
    turn = RunTurn(
        ticket, ledger, end, projector, pipeline,
        client=client, observer=observer, interrupt_ttl_s=settings.interrupt_ttl_s, now_ms=runtime.now_ms,
    )  # fmt: skip
    record = new_record(settings, ticket.thread_id, ticket.run_id, ticket.ros_invocation_id, ticket.owner)
    emitter = Emitter(observer, sink=record)  # every event this run shows passes through it, into the record
    mailbox = Mailbox(runtime)
    detacher = Detacher(
        settings.reattach_window_s, record, run_id=ticket.run_id, end=end, mailbox=mailbox,
        emitter=emitter, runtime=runtime, observer=observer,
    )  # fmt: skip
    pacer = Pacer(
        runtime, settings.heartbeat_interval_s, emitter.heartbeat,
        mailbox=mailbox, detaches_on_departure=detacher.can_detach,
    )  # fmt: skip
    return RunContext(
        ticket=ticket, run=run, language=language, settings=settings, client=client, runtime=runtime,
        observer=observer, registry=deps.registry, cancel_markers=deps.cancel_markers, ledger=ledger,
        pipeline=pipeline, projector=projector, end=end, turn=turn, emitter=emitter, mailbox=mailbox,
        detacher=detacher, pacer=pacer,
    )  # fmt: skip


__all__ = ["RunContext", "build_run"]
