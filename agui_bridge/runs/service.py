"""Use cases behind the HTTP surface (no Flask here): health, start a run, cancel, status, reattach admission.

The service owns the process-wide collaborators (store, A2A client, runtime) that `create_app`
builds once per worker, after fork. The worker's loops (beacon, retention and idle shutdown, the drain
wait) live in `worker/maintenance.py` and ask the service through the plain methods at the end of the
class.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from agui_bridge.a2a.errors import A2AError, A2ARpcError
from agui_bridge.a2a.port import A2APort
from agui_bridge.config.settings import Settings
from agui_bridge.errors import A2AUnavailable, ServiceUnavailable
from agui_bridge.runs.admission import admit_guidance, admit_run
from agui_bridge.runs.cancel import cancel_execution
from agui_bridge.runs.capabilities import reattach_supported, reattach_window_s
from agui_bridge.runs.deps import StreamDeps
from agui_bridge.runs.failures import bridge_error
from agui_bridge.runs.guidance import GuidanceStream
from agui_bridge.runs.observer import NULL_OBSERVER, RunObserver
from agui_bridge.runs.registry import PROCESS_RUNS, Cancellable, RunRegistry
from agui_bridge.runs.request import RunRequest
from agui_bridge.runs.retention import busy_since, prune, prune_options
from agui_bridge.runs.stream import RunStream
from agui_bridge.runs.workspace import resolve_cwd
from agui_bridge.store.lease import lease_is_live, lease_key
from agui_bridge.store.model import RunLease
from agui_bridge.store.owner import current_owner, owner_is_alive
from agui_bridge.store.store import ThreadStore
from agui_bridge.worker.beacon import Beacons, beacon_fresh_ms
from agui_bridge.worker.runtime import Runtime

PROTOCOL_PACKAGE_VERSION = "1.0.0"

log = logging.getLogger(__name__)


class BridgeService:
    def __init__(
        self,
        settings: Settings,
        store: ThreadStore,
        client: A2APort,
        runtime: Runtime,
        observer: RunObserver = NULL_OBSERVER,
        *,
        registry: RunRegistry = PROCESS_RUNS,
    ) -> None:
        self.settings = settings
        self.store = store
        self.client = client
        self.runtime = runtime
        self.owner = current_owner()
        self.draining = False
        #: The one registry of this process's streams: capacity, drain, idleness, beacon and cancel read it;
        #: a stream gives its place back itself when its body closes (docs/design.md#run-built-once).
        self.registry = registry
        registry.touch()  # idleness counts from the worker's start
        self.beacons = Beacons(settings.state_dir)
        self._deps = StreamDeps(
            settings, store, client, runtime, observer=observer, registry=registry, cancel_markers=self.beacons
        )
        self.observer = observer  # what the web layer reports through too (reattaches)

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "protocol": "ag-ui",
            "protocolPackageVersion": PROTOCOL_PACKAGE_VERSION,
            "executionKernel": "a2a-1.0",
            "serverVersion": self.settings.server_version,
            "reattach": {
                "supported": reattach_supported(self.settings),
                "windowSeconds": reattach_window_s(self.settings),
            },
        }

    @property
    def active_runs(self) -> int:
        return self.registry.active

    @property
    def followers(self) -> int:
        return self.registry.followers

    @property
    def last_activity(self) -> float:
        return self.registry.last_activity

    def _stream_limit(self) -> int:
        """Runs, admissions under way and followers share the worker's stream cap (`runtime.stream_limit`)."""
        return self.runtime.stream_limit(
            self.settings.max_active_runs_per_worker, self.settings.max_thread_streams_per_worker
        )

    def admit_follower(self) -> Callable[[], None]:
        """Take a reattach follower's place in the worker's stream cap (docs/design.md#reattach): a follower
        holds a connection (and, on the thread back-end, a host thread) for as long as the run it follows,
        so it counts with runs against `runtime.stream_limit`; past it, or draining, 503 + Retry-After.
        Returns the release, to call once when the body ends."""
        release = None if self.draining else self.registry.admit_follower(self._stream_limit())
        if release is None:
            raise ServiceUnavailable()
        return release

    def holds_run(self, owner: str, run_key: str) -> bool:
        """Lease liveness after the grace period: the owner's beacon (this process answers from memory)."""
        if owner == self.owner:
            return self.registry.holds(run_key)
        # Fresh = published within three intervals; a dead owner on this host is caught by its pid first.
        return self.beacons.holds(
            owner, run_key, self.runtime.now_ms(), beacon_fresh_ms(self.settings.beacon_interval_s)
        )

    def lease_live(self, lease: RunLease, now: int) -> bool:
        """`state.lease.lease_is_live` with this worker's view: admission, status, cancel, retention
        and idle shutdown all decide through this one check."""
        return lease_is_live(lease, now, is_alive=owner_is_alive, holds_run=self.holds_run)

    def start_run(self, request: RunRequest, client_socket: Any = None) -> RunStream | GuidanceStream:
        """Admit a validated request durably and hand back the stream (headers go out with RUN_STARTED).

        A refused body's validation error is raised here, after the capacity check
        (docs/design.md#pre-stream-checks).

        `client_socket` (gunicorn's `environ["gunicorn.socket"]`) gets the client write deadline. The capacity
        check and a reservation are one step under the lock, so a burst of requests on the thread back-end
        cannot overshoot the cap while their admissions wait on file locks."""
        began = time.monotonic()
        if self.draining or not self.registry.reserve(self._stream_limit()):
            raise ServiceUnavailable()
        try:
            return self._admit(request, client_socket, began)
        except BaseException:
            self.registry.unreserve()  # an admitted stream took the reservation over; this one failed
            raise

    def _admit(self, request: RunRequest, client_socket: Any, began: float) -> RunStream | GuidanceStream:
        run, language = request.run_input(), request.language
        cwd = resolve_cwd(run.props.cwd, self.settings.allowed_cwds)
        if run.props.active_guidance:
            guidance = admit_guidance(self.store, run, cwd=cwd, digest=request.digest, now_ms=self.runtime.now_ms())
            guidance_stream = GuidanceStream(self._deps, guidance, run, language, client_socket=client_socket)
            self.registry.open(guidance_stream)  # the stream closes itself there when its body ends
            return guidance_stream
        ticket = admit_run(
            self.store,
            run,
            cwd=cwd,
            digest=request.digest,
            owner=self.owner,
            now_ms=self.runtime.now_ms(),
            lease_ttl_ms=int(self.settings.lease_ttl_s * 1000),
            is_alive=owner_is_alive,
            holds_run=self.holds_run,
        )
        # Time to RUN_STARTED counts validation and admission: `began`.
        stream = RunStream(self._deps, ticket, run, language, client_socket=client_socket, began_at=began)
        self.registry.open_leased(stream.key, stream)  # the stream closes itself there when its body ends
        return stream

    def cancel(self, execution_id: str, thread_id: str, ros_invocation_id: str) -> dict[str, str]:
        """The cancellation extension; A2A failures are a 503, never a 500 (docs/design.md#decision-no-500)."""

        def cancel_task(task_id: str) -> None:
            try:
                self.client.cancel_task(task_id)
            except A2ARpcError as exc:
                if not exc.task_not_cancelable:
                    raise A2AUnavailable() from exc
                # Already ended kernel-side: the owner's own cancel (its client went away) landed first.
            except A2AError as exc:  # down, or refusing our token: the same words as a run's RUN_ERROR
                raise bridge_error(exc) from exc

        status = cancel_execution(
            self.store,
            cancel_task,
            execution_id,
            thread_id,
            ros_invocation_id,
            self.runtime.now_ms(),
            self,
            self.lease_live,
        )
        return {"executionId": execution_id, "status": status}

    def notify(self, thread_id: str, lease: RunLease) -> None:
        """runs.cancel.OwnerChannel: a cancelled run is live somewhere; tell its worker (this one
        directly, another by a cancel marker named by the run key)."""
        key = lease_key(lease)
        stream = self.registry.get(key)
        if stream is not None:
            stream.request_cancel()
            return
        try:
            self.beacons.request_cancel(key, thread_id)
        except OSError:
            log.warning("cancel request could not be passed on", exc_info=True)

    def withdraw(self, lease: RunLease) -> None:
        """runs.cancel.OwnerChannel: the run is no longer live, so its marker must not stay behind."""
        self.beacons.discard_cancel(lease_key(lease))

    def close(self) -> None:
        self.client.close()

    # ---- what the worker's loops ask (worker/maintenance.py) ----------------------------------

    def held_runs(self) -> Mapping[str, Cancellable]:
        """The runs this process streams, by run key: what its beacon lists (docs/design.md#leases-and-beacons)."""
        return self.registry.snapshot()

    def stream_load(self) -> tuple[int, int, bool]:
        """Places taken in the worker's stream cap, the cap, and whether the worker drains: what it reports for
        HAProxy's agent check (docs/design.md#agent-check)."""
        return self.registry.taken, self._stream_limit(), self.draining

    def is_idle(self) -> bool:
        """Idle for `idle_shutdown_s` here and in every thread file (runs of other workers count)."""
        idle_s = self.settings.idle_shutdown_s
        registry = self.registry
        if (
            idle_s <= 0
            or registry.active
            or registry.followers
            or self.runtime.monotonic() - registry.last_activity < idle_s
        ):
            return False
        now = self.runtime.now_ms()
        latest = busy_since(self.store, now, self.lease_live, self._yield_turn)
        return latest is not None and now - latest >= idle_s * 1000

    def _yield_turn(self) -> None:
        """Between two thread files of a sweep: under gevent the other greenlets run (docs/design.md#retention)."""
        self.runtime.sleep(0)

    def sweep_retention(self) -> None:
        """One retention sweep (docs/design.md#retention): thread files under their locks, run records (off the
        hub) by whichever worker takes the records' sweep lock first."""
        report = prune(
            self.store, lease_live=self.lease_live, yield_turn=self._yield_turn, **prune_options(self.settings)
        )
        if report.removed or report.problems or report.markers_removed or report.records_expired:
            log.info(
                "retention sweep removed %d thread file(s), %d cancel marker(s) of ended runs and %d run "
                "record(s) (%d of them over the replay budget)",
                len(report.removed), report.markers_removed,
                report.records_expired + report.records_evicted, report.records_evicted,
            )  # fmt: skip

    def begin_drain(self) -> None:
        """Refuse new runs from now on (503 + Retry-After) and stop the detached runs at once: nobody is
        reading them, so there is no reason to wait (docs/design.md#shutdown-drain)."""
        self.draining = True
        detached = [run for run in self.registry.streams() if isinstance(run, RunStream) and run.detached]
        for run in detached:
            run.request_stop()

    def stop_streams(self) -> int:
        """Ask every stream still open to stop (RUN_ERROR, its A2A task cancelled); how many there were."""
        remaining = self.registry.streams()
        for stream in remaining:
            stream.request_stop()
        return len(remaining)
