"""`agui-bridge` command line: serve, demo-agent, config show, state init, state prune, doctor.

Settings are declared once in `agui_bridge.config` (flag > IAC_CODE_AGUI_* environment > YAML >
default). Tokens come only from the environment or the YAML file and are never printed. Invalid
values give one clear line on stderr and exit status 2. Module level imports stay stdlib-only (this
process is the gunicorn master).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

from agui_bridge.config import ConfigError
from agui_bridge.config.options import add_arguments, describe, resolve, worker_environment
from agui_bridge.config.settings import DEMO_EXTRA_HINT as DEMO_EXTRA_HINT
from agui_bridge.config.settings import Settings, build_settings, require_a2a_upstream
from agui_bridge.config.settings import require_demo_extra as require_demo_extra

__all__ = ["DEMO_EXTRA_HINT", "ConfigError", "build_parser", "main"]


def run_gunicorn(settings: Settings) -> None:
    """Run gunicorn in this process; each worker builds its app from these validated settings.

    The settings object reaches the workers through fork (the app is loaded after it), so nothing is
    written back to the environment and no module is reloaded.
    """
    from gunicorn.app.base import BaseApplication

    from agui_bridge.worker.hooks import gunicorn_settings

    class BridgeApplication(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for key, value in gunicorn_settings(settings).items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            from agui_bridge.app import create_app
            from agui_bridge.worker.process import configure_process

            configure_process(settings)  # in the worker, after patching and before its app
            return create_app(settings)

    BridgeApplication().run()


def serve(args: argparse.Namespace) -> int:
    from agui_bridge.worker.managed import ManagedUpstream, ManagedUpstreamError

    resolved = resolve(args, os.environ)
    settings = build_settings(resolved, os.environ)
    if not permissions_allow_start(settings.state_dir, resolved.secret_file):
        return 2
    upstream_lost = threading.Event()
    managed: ManagedUpstream | None = None
    require_a2a_upstream(settings, starts_managed_child=True)
    if settings.a2a_url is None:
        managed = ManagedUpstream(settings.managed_a2a, worker_environment(resolved, os.environ))
        try:
            managed.start()
        except ManagedUpstreamError as exc:
            print(f"agui-bridge: {exc}", file=sys.stderr)
            return 2
        settings = settings.replace(a2a_url=managed.url, a2a_token=managed.token)
        managed.watch(lambda: _stop_for_lost_upstream(upstream_lost))
    created_metrics_dir = _prepare_metrics_dir(os.environ) if settings.metrics_enabled else None
    status = 0
    master_pid = os.getpid()
    try:
        run_gunicorn(settings)
    except SystemExit as exit_:  # gunicorn's arbiter leaves through sys.exit
        status = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    finally:
        # A worker is forked inside run_gunicorn and leaves through this frame too (sys.exit): the clean-up is
        # the master's. A worker removing the metrics directory broke every later worker (HUP reload included).
        if os.getpid() != master_pid:
            managed = created_metrics_dir = None
        if managed is not None:
            managed.stop()
        if created_metrics_dir is not None:
            import shutil

            shutil.rmtree(created_metrics_dir, ignore_errors=True)
    return 1 if upstream_lost.is_set() else status


def permissions_allow_start(state_dir: Path, secret_file: str | None) -> bool:
    """doctor's permission checks before serving: a refusal or a warning is one line on stderr."""
    from agui_bridge.cli.doctor import startup_problems

    refusals, warnings = startup_problems(state_dir, Path(secret_file) if secret_file else None)
    for line in (*refusals, *warnings):
        print(f"agui-bridge: {line}", file=sys.stderr)
    return not refusals


def _stop_for_lost_upstream(flag: threading.Event) -> None:
    """The managed kernel died: every run would fail, so stop gracefully and exit 1 (supervisors restart)."""
    flag.set()
    print("agui-bridge: the managed A2A process exited; stopping the server.", file=sys.stderr)
    os.kill(os.getpid(), signal.SIGTERM)


def _prepare_metrics_dir(env: MutableMapping[str, str]) -> str | None:
    """Point prometheus_client's multiprocess mode at an empty directory before any worker forks.

    A directory given in PROMETHEUS_MULTIPROC_DIR is emptied (stale worker files would be summed);
    otherwise a private temporary one is created and returned so it can be removed at exit. prometheus_client
    reads the variable in each worker, so it is set in this process's environment before gunicorn forks.
    """
    given = env.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        os.makedirs(given, exist_ok=True)
        for name in os.listdir(given):
            if name.endswith(".db"):
                os.unlink(os.path.join(given, name))
        return None
    import tempfile

    created = tempfile.mkdtemp(prefix="agui-bridge-metrics-")
    env["PROMETHEUS_MULTIPROC_DIR"] = created
    return created


def demo_agent(args: argparse.Namespace) -> int:
    require_demo_extra()
    from agui_bridge.demo.server import run_demo_agent, token_from_env

    run_demo_agent(args.host, args.port, token_from_env(os.environ))
    return 0


def config_show(args: argparse.Namespace) -> int:
    """The effective configuration, where each value came from; secrets are masked."""
    rows = describe(resolve(args, os.environ), os.environ)
    if args.json:
        import json

        print(json.dumps(rows, indent=2))
        return 0
    widths = [max(len(row[key]) for row in rows) for key in ("name", "value")]
    for row in rows:
        env = f"  [{row['env']}]" if row["env"] else ""
        print(f"{row['name']:<{widths[0]}}  {row['value']:<{widths[1]}}  {row['source']}{env}")
    return 0


def state_prune(args: argparse.Namespace) -> int:
    """Remove thread files idle past retention with nothing pending and no live run.

    See docs/design.md#decision-bounded-state.
    """
    from agui_bridge.runs.retention import prune, prune_options
    from agui_bridge.store.lease import beacon_check
    from agui_bridge.store.store import ThreadStore
    from agui_bridge.worker.beacon import Beacons, beacon_fresh_ms

    resolved = resolve(args, os.environ)
    settings = build_settings(resolved, os.environ, serving=False)
    store = ThreadStore(settings.state_dir, lock_timeout_s=settings.lock_timeout_s)
    # A run's lease counts as live while its worker's beacon lists it (store/lease.py), as in the server.
    lease_live = beacon_check(Beacons(settings.state_dir), beacon_fresh_ms(settings.beacon_interval_s))
    report = prune(store, dry_run=args.dry_run, lease_live=lease_live, **prune_options(settings))
    verb = "would remove" if args.dry_run else "removed"
    print(f"agui-bridge: {verb} {len(report.removed)} of {report.examined} thread file(s) in {settings.state_dir}")
    if report.markers_removed:
        print(f"agui-bridge: {verb} {report.markers_removed} cancel marker(s) of ended runs")
    if report.records_expired:
        print(f"agui-bridge: {verb} {report.records_expired} run record(s) past their replay retention")
    if report.records_evicted:
        print(f"agui-bridge: {verb} {report.records_evicted} finished run record(s) over the replay budget")
    if report.records_skipped:
        print("agui-bridge: run records skipped: another process is sweeping them")
    for problem in report.problems:
        print(f"agui-bridge: skipped {problem}", file=sys.stderr)
    return 0


def state_init(args: argparse.Namespace) -> int:
    """Create the state directory 0700 (with its subdirectories) for the account that serves; idempotent.

    An existing directory open to group or others, or owned by another account, is refused (exit 1)
    and left as it is (agui_bridge/cli/state_init.py says why).
    """
    from agui_bridge.cli.state_init import EXIT_REFUSED, StateInitRefused, current_owner, init_state_dir, owner_named

    resolved = resolve(args, os.environ)
    settings = build_settings(resolved, os.environ, serving=False)
    try:
        owner = owner_named(args.owner) if args.owner else current_owner()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if owner.uid != os.getuid() and os.geteuid() != 0:
        raise ConfigError(f"--owner {args.owner}: only root can create a directory for another account")
    try:
        created = init_state_dir(settings.state_dir, owner)
    except StateInitRefused as exc:
        print(f"agui-bridge: refusing to use the state directory: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except OSError as exc:
        print(f"agui-bridge: cannot create the state directory: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    done = f"created {', '.join(str(path) for path in created)}" if created else "already in place"
    print(f"agui-bridge: state directory {settings.state_dir} (mode 0700, owner {owner.name}): {done}")
    return 0


def doctor(args: argparse.Namespace) -> int:
    """Check the deployment as `serve` would see it; exit 0 only when every check passed."""
    from agui_bridge.cli.doctor import render_json, render_text, run_checks, target_from

    resolved = resolve(args, os.environ)
    # Not serving: the bind rule is reported as the auth-token check below instead of stopping here.
    settings = build_settings(resolved, os.environ, serving=False)
    secret_file = Path(resolved.secret_file) if resolved.secret_file else None
    checks = run_checks(target_from(resolved.values, settings.state_dir, secret_file))
    print(render_json(checks) if args.json else render_text(checks))
    return 0 if all(check.ok for check in checks) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agui-bridge", description="AG-UI server for A2A 1.0 agent kernels")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve", help="run the bridge under gunicorn with gevent workers")
    add_arguments(serve_parser)
    serve_parser.set_defaults(handler=serve)
    config_parser = commands.add_parser("config", help="inspect the configuration")
    config_commands = config_parser.add_subparsers(dest="config_command", required=True)
    show_parser = config_commands.add_parser("show", help="effective configuration with sources, secrets masked")
    add_arguments(show_parser)
    show_parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    show_parser.set_defaults(handler=config_show)
    state_parser = commands.add_parser("state", help="maintain the state directory")
    state_commands = state_parser.add_subparsers(dest="state_command", required=True)
    init_parser = state_commands.add_parser("init", help="create the state directory 0700 for the serving account")
    add_arguments(init_parser)
    init_parser.add_argument("--owner", help="USER[:GROUP] to own it (root only; default: this user)")
    init_parser.set_defaults(handler=state_init)
    prune_parser = state_commands.add_parser("prune", help="remove idle thread files past retention")
    add_arguments(prune_parser)
    prune_parser.add_argument("--dry-run", action="store_true", help="only report what would be removed")
    prune_parser.set_defaults(handler=state_prune)
    doctor_parser = commands.add_parser("doctor", help="check the deployment before it takes traffic")
    add_arguments(doctor_parser)
    doctor_parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    doctor_parser.set_defaults(handler=doctor)
    demo_parser = commands.add_parser("demo-agent", help="run the scripted demo A2A agent")
    demo_parser.add_argument("--host", default="127.0.0.1")
    demo_parser.add_argument("--port", type=int, default=41242)
    demo_parser.set_defaults(handler=demo_agent)
    from agui_bridge.chat.client import configure_parser as configure_chat_parser  # stdlib-only at import

    configure_chat_parser(commands.add_parser("chat", help="terminal AG-UI client: stream a run, answer interrupts"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.handler(args)
    except ConfigError as exc:
        print(f"agui-bridge: {exc}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
