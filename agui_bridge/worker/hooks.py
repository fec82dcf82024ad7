"""gunicorn settings and hooks shared by `agui-bridge serve` and `deploy/gunicorn.conf.py`.

Only stdlib at module level: this runs in the unpatched master, and anything imported here would be
inherited by workers before gevent patches them (docs/design.md#process-model). Hooks import inside their body.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agui_bridge.worker.agent_check import master_agent_check, publish_worker_load, reload_warning
from agui_bridge.worker.readiness import WORKER_READY_LOG, WorkerReadyNotice

if TYPE_CHECKING:
    from agui_bridge.config.settings import Settings
    from agui_bridge.worker.host import WorkerHost

#: gunicorn's own settings that are not a choice of the operator.
TIMEOUT_S = 30
KEEPALIVE_S = 5


#: The formatter of each log format; both redact and escape control characters (agui_bridge.observability.logs).
FORMATTERS = {
    "json": "agui_bridge.observability.logs.JsonFormatter",
    "text": "agui_bridge.observability.logs.TextFormatter",
}


def logconfig(loglevel: str, log_format: str) -> dict[str, Any]:
    """gunicorn's own error log uses our formatter too: a request line or header value it quotes in an
    error cannot forge a log line or carry a token out (the classes are stdlib-only)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"bridge": {"()": FORMATTERS[log_format]}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "bridge", "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": "WARNING"},
        "loggers": {
            "gunicorn.error": {"handlers": ["stderr"], "level": loglevel.upper(), "propagate": False},
            "gunicorn.access": {"handlers": ["stderr"], "level": loglevel.upper(), "propagate": False},
        },
    }


#: Descriptors a worker needs besides its connections: state files, locks, logs, the A2A pool's spares.
OPEN_FILES_SPARE = 256


def open_files_needed(worker_connections: int) -> int:
    """Every stream holds two sockets (the client's and the kernel's) plus the worker's own files."""
    return 2 * worker_connections + OPEN_FILES_SPARE


def raise_open_files_limit(needed: int) -> int:
    """Raise the soft RLIMIT_NOFILE toward `needed` (inherited by the workers forked after this, in the
    master); returns the limit left if it is still too low, else 0. A default soft limit of 1024 would
    make `accept` fail with EMFILE long before `--max-active-runs`."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return 0
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        target = soft
    return 0 if target >= needed else target


def gunicorn_settings(settings: Settings) -> dict[str, Any]:
    """gunicorn's settings and hooks for validated `Settings` (the CLI and deploy/gunicorn.conf.py)."""
    from agui_bridge.config.settings import unauthenticated_warning

    warning = unauthenticated_warning(settings)
    # READY=1 once a worker answers, not when the master listens (docs/operations.md#readiness).
    ready_notice = WorkerReadyNotice()
    # HAProxy's agent check, answered by a thread of this master (docs/design.md#agent-check); after a reload
    # (HUP) the one already started, whatever the option now says.
    agent = master_agent_check(settings.host, settings.agent_check_port, settings.max_active_runs_per_worker)

    def on_starting(server: Any) -> None:
        ready_notice.arm()
        if warning:
            server.log.warning("agui-bridge: %s", warning)
        short = raise_open_files_limit(open_files_needed(settings.worker_connections))
        if short:
            server.log.warning(
                "agui-bridge: the open-files limit (%d) is below the %d a full worker needs; raise LimitNOFILE "
                "or ulimit -n, or lower --max-active-runs",
                short,
                open_files_needed(settings.worker_connections),
            )

    def init_worker(worker: Any) -> None:
        from agui_bridge.worker.process import configure_process

        # Again (idempotent): an app module of the operator's own that skipped it still gets the bridge's
        # logging and switch interval (docs/design.md#process-setup).
        configure_process(settings)
        post_worker_init(worker)
        if agent is not None:
            publish_load(worker)
        if settings.hub_watchdog_ms > 0:
            from agui_bridge.worker.hub_watchdog import count_and_log_report, log_report, start_hub_watchdog

            # In the worker, on the hub's thread, after patching (docs/design.md#hub-watchdog).
            start_hub_watchdog(
                settings.hub_watchdog_ms, count_and_log_report if settings.metrics_enabled else log_report
            )
        # Before the notice, so a READY=1 always finds this line already written (docs/operations.md#readiness).
        worker.log.info("%s %s", WORKER_READY_LOG, worker.pid)
        ready_notice.worker_ready()  # last: the accept loop starts next

    def when_ready(server: Any) -> None:
        if agent is not None and agent.responder is None:
            agent.start(server)  # before the first fork: every worker gets its slot

    def on_reload(server: Any) -> None:
        change = reload_warning(settings.host, settings.agent_check_port)
        if change:
            server.log.warning("agui-bridge: %s", change)

    def pre_fork(server: Any, worker: Any) -> None:
        if agent is not None:
            agent.pre_fork(worker)

    def on_child_exit(server: Any, worker: Any) -> None:
        try:
            child_exit(server, worker)
        finally:  # whatever the metrics' clean-up does, a reaped worker's streams are gone, SIGKILL included
            if agent is not None:
                agent.child_exit(worker)

    return {
        "bind": [f"{settings.host}:{settings.port}"],
        "workers": settings.workers,
        "worker_class": WORKER_CLASS,
        "worker_connections": settings.worker_connections,
        "timeout": TIMEOUT_S,
        "graceful_timeout": settings.graceful_timeout_s,
        "keepalive": KEEPALIVE_S,
        "preload_app": False,
        #: gunicorn's worker heartbeat files; point it at a tmpfs when / is read-only (containers).
        "worker_tmp_dir": settings.worker_tmp_dir,
        "max_requests": 0,
        "control_socket_disable": True,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": settings.log_level,
        "logconfig_dict": logconfig(settings.log_level, settings.log_format),
        "on_starting": on_starting,
        "post_worker_init": init_worker,
        "worker_abort": worker_abort,
        "worker_exit": worker_exit,
        "child_exit": on_child_exit,
        "when_ready": when_ready,
        "pre_fork": pre_fork,
        "on_reload": on_reload,
    }


def config_from_environment(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """deploy/gunicorn.conf.py: validate the IAC_CODE_AGUI_* environment exactly as `serve` does.

    An invalid value or a missing A2A URL stops gunicorn before it binds, with one line and status 2 (SystemExit passes
    through gunicorn's config loader, which would print a traceback for any other exception).
    """
    from agui_bridge.config import ConfigError, load_settings
    from agui_bridge.config.settings import require_a2a_upstream

    try:
        settings = load_settings(environ)
        require_a2a_upstream(settings)  # no managed child here: no URL, no start
    except ConfigError as exc:
        sys.stderr.write(f"agui-bridge: {exc}\n")
        sys.stderr.flush()
        raise SystemExit(2) from None
    return gunicorn_settings(settings)


#: Seconds of `graceful_timeout` kept for stopping the runs still active after the drain wait.
DRAIN_MARGIN_S = 10
#: How long a worker that stopped accepting on SIGTERM still admits runs on the connections it had taken.
ACCEPTED_GRACE_S = 1.0
#: gunicorn's gevent worker, except that it stops accepting the moment SIGTERM arrives.
WORKER_CLASS = "agui_bridge.worker.gevent_worker.DrainingGeventWorker"


def post_worker_init(worker: Any) -> None:
    """Fail at boot if gevent did not patch what the stream design relies on; drain on SIGTERM.

    gunicorn's own SIGTERM handler only stops the accept loop; without ours the master's SIGKILL cuts
    live streams after `graceful_timeout` with no terminal event and no cleanup (docs/design.md#shutdown-drain).
    """
    import signal

    import gevent

    from agui_bridge.worker.runtime import require_patched

    require_patched()

    def on_term(sig: int, frame: Any) -> None:
        worker.handle_exit(sig, frame)  # alive = False; DrainingGeventWorker also stops accepting at once
        if getattr(worker, DRAIN_ATTRIBUTE, None) is None:  # one drain per worker, whatever the signals
            setattr(worker, DRAIN_ATTRIBUTE, gevent.spawn(drain_worker, worker))  # no blocking work in a handler

    signal.signal(signal.SIGTERM, on_term)
    host = worker_host(worker.wsgi)
    if host is not None:
        # Idle shutdown stops the whole server: ask the master, which drains every worker.
        host.loops.start_maintenance(lambda: os.kill(worker.ppid, signal.SIGTERM))
    # The app's objects live as long as the worker: keep them out of every full collection
    # (docs/design.md#gc-freeze).
    gc.freeze()


def publish_load(worker: Any) -> None:
    """In a worker the master gave an agent-check slot: report its stream counts there
    (docs/design.md#agent-check). Both shipped gunicorn configs call it from their worker hook."""
    host = worker_host(worker.wsgi)
    if host is not None:
        publish_worker_load(worker, host)


def child_exit(server: Any, worker: Any) -> None:
    """A dead worker's live gauges must stop counting (prometheus_client multiprocess mode)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


def worker_host(app: Any) -> WorkerHost | None:
    """The app's `WorkerHost` (`create_app` registers it), or None for an app that is not the bridge."""
    from agui_bridge.worker.host import WORKER_KEY

    host: WorkerHost | None = getattr(app, "extensions", {}).get(WORKER_KEY)
    return host


def drain_worker(worker: Any) -> None:
    host = worker_host(worker.wsgi)
    if host is None:
        return
    # A worker that stopped accepting at once (worker/gevent_worker.py) still admits the requests of the
    # connections it took just before the signal: refusing them would refuse a run no other instance can take.
    grace = ACCEPTED_GRACE_S if hasattr(worker, "stop_accepting") else 0.0
    stopped = host.loops.drain(max(0.0, float(worker.cfg.graceful_timeout) - DRAIN_MARGIN_S), accepted_grace_s=grace)
    if stopped:
        worker.log.info("drain: stopped %d active run(s) with RUN_ERROR", stopped)


#: The worker attribute holding its drain greenlet, for `worker_exit`.
DRAIN_ATTRIBUTE = "agui_drain"


def worker_exit(server: Any, worker: Any) -> None:
    """Let a drain under way finish before the worker process ends (at most `graceful_timeout`).

    gunicorn ends a worker once its open requests are done; a detached run has no request, so without this
    the process could end before the drain's stop reached the run's record (docs/design.md#shutdown-drain).
    """
    drain = getattr(worker, DRAIN_ATTRIBUTE, None)
    if drain is not None:
        drain.join(timeout=float(worker.cfg.graceful_timeout))


def worker_abort(worker: Any) -> None:
    """On a watchdog kill, log which greenlet blocked the hub."""
    from gevent.util import format_run_info

    worker.log.error("worker aborted; run info:\n%s", "\n".join(format_run_info()))
