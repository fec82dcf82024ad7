"""`agui-bridge` command line: serve (gunicorn + gevent) and demo-agent.

Precedence for every setting: flag > IAC_CODE_AGUI_* environment > YAML (`--config`) > default.
Tokens come only from the environment or the YAML file and are never printed. Invalid values give
one clear line on stderr and exit status 2. Module level imports stay stdlib-only (this process is
the gunicorn master).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class ConfigError(ValueError):
    """One line for the user; the CLI exits with status 2."""


@dataclass(frozen=True)
class ServeOptions:
    host: str
    port: int
    workers: int
    a2a_url: str | None
    managed_a2a: str
    state_dir: str | None
    interrupt_ttl_s: float
    heartbeat_interval_s: float
    log_level: str
    log_format: str


def load_yaml_config(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError):
        raise ConfigError("Unable to load the AG-UI config file.") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("AG-UI config file must contain a YAML mapping.")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def normalise_a2a_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or parts.hostname not in LOOPBACK_HOSTS:
        raise ConfigError("The AG-UI adapter may connect only to a loopback A2A HTTP(S) URL.")
    return url.rstrip("/") + "/"


def _pick(
    name: str,
    flag: Any,
    environ: Mapping[str, str],
    env_name: str | None,
    yaml_config: Mapping[str, Any],
    default: Any,
    convert: Callable[[Any], Any],
    error: str,
) -> Any:
    for value in (flag, environ.get(env_name) if env_name else None, yaml_config.get(name)):
        if value is not None:
            try:
                return convert(value)
            except (TypeError, ValueError):
                raise ConfigError(error) from None
    return default


def _port(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(value)
    port = int(value)
    if not 1 <= port <= 65535:
        raise ValueError(port)
    return port


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or int(value) < 1:
        raise ValueError(value)
    return int(value)


def _non_negative(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(value)
    number = float(value)
    if not number >= 0 or number == float("inf"):
        raise ValueError(value)
    return number


def _positive(value: Any) -> float:
    number = _non_negative(value)
    if number <= 0:
        raise ValueError(value)
    return number


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _log_level(value: Any) -> str:
    level = _string(value).lower()
    if level not in ("debug", "info", "warning", "error"):
        raise ValueError(value)
    return level


def _log_format(value: Any) -> str:
    log_format = _string(value).lower()
    if log_format not in ("text", "json"):
        raise ValueError(value)
    return log_format


def resolve_serve_options(args: argparse.Namespace, environ: Mapping[str, str]) -> ServeOptions:
    yaml_config = load_yaml_config(args.config)
    env = "IAC_CODE_AGUI_"
    host = _pick(
        "host",
        args.host,
        environ,
        env + "HOST",
        yaml_config,
        "127.0.0.1",
        _string,
        "--host must be a string.",
    )
    port = _pick(
        "port",
        args.port,
        environ,
        env + "PORT",
        yaml_config,
        8000,
        _port,
        "--port must be between 1 and 65535.",
    )
    workers = _pick(
        "workers",
        args.workers,
        environ,
        env + "WORKERS",
        yaml_config,
        2,
        _positive_int,
        "--workers must be >= 1.",
    )
    a2a_url = _pick(
        "a2a_url",
        args.a2a_url,
        environ,
        env + "A2A_URL",
        yaml_config,
        None,
        _string,
        "--a2a-url must be a string.",
    )
    managed = _pick(
        "managed_a2a", args.managed_a2a, environ, env + "MANAGED_A2A", yaml_config, "demo", _string,
        "--managed-a2a must be demo or iac-code.",
    )  # fmt: skip
    if managed not in ("demo", "iac-code"):
        raise ConfigError("--managed-a2a must be demo or iac-code.")
    state_dir = _pick(
        "state_dir",
        args.state_dir,
        environ,
        env + "STATE_DIR",
        yaml_config,
        None,
        _string,
        "--state-dir must be a string.",
    )
    ttl = _pick(
        "interrupt_ttl", args.interrupt_ttl, environ, env + "INTERRUPT_TTL", yaml_config, 540.0, _positive,
        "--interrupt-ttl must be a positive number of seconds.",
    )  # fmt: skip
    heartbeat = _pick(
        "heartbeat_interval", args.heartbeat_interval, environ, env + "HEARTBEAT_INTERVAL_S", yaml_config, 15.0,
        _positive, "--heartbeat-interval must be a positive number of seconds.",
    )  # fmt: skip
    log_level = _pick(
        "log_level", args.log_level, environ, env + "LOG_LEVEL", yaml_config, "info", _log_level,
        "--log-level must be debug, info, warning or error.",
    )  # fmt: skip
    log_format = _pick(
        "log_format", args.log_format, environ, env + "LOG_FORMAT", yaml_config, "text", _log_format,
        "--log-format must be json or text.",
    )  # fmt: skip
    for token_name in ("auth_token", "a2a_token"):
        if token_name in yaml_config and not isinstance(yaml_config[token_name], str):
            raise ConfigError(f"{token_name} must be a string.")
    if a2a_url is not None:
        a2a_url = normalise_a2a_url(a2a_url)
    return ServeOptions(host, port, workers, a2a_url, managed, state_dir, ttl, heartbeat, log_level, log_format)


def worker_environment(
    options: ServeOptions, environ: Mapping[str, str], yaml_config: Mapping[str, Any]
) -> dict[str, str]:
    """The IAC_CODE_AGUI_* variables gunicorn workers read in `create_app` (settings_from_env)."""
    env = dict(environ)
    env["IAC_CODE_AGUI_HOST"] = options.host
    env["IAC_CODE_AGUI_PORT"] = str(options.port)
    env["IAC_CODE_AGUI_WORKERS"] = str(options.workers)
    env["IAC_CODE_AGUI_INTERRUPT_TTL"] = repr(options.interrupt_ttl_s)
    env["IAC_CODE_AGUI_HEARTBEAT_INTERVAL_S"] = repr(options.heartbeat_interval_s)
    env["IAC_CODE_AGUI_LOG_LEVEL"] = options.log_level
    env["IAC_CODE_AGUI_LOG_FORMAT"] = options.log_format
    if options.state_dir is not None:
        env["IAC_CODE_AGUI_STATE_DIR"] = options.state_dir
    for token_name in ("auth_token", "a2a_token"):
        env_name = "IAC_CODE_AGUI_" + token_name.upper()
        if env_name not in env and isinstance(yaml_config.get(token_name), str):
            env[env_name] = yaml_config[token_name]
    return env


def run_gunicorn(app_uri: str | None = None) -> None:
    """Run gunicorn in this process with our settings; the app is built in each worker."""
    from gunicorn.app.base import BaseApplication

    from agui_bridge import gunicorn_config

    class BridgeApplication(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for key, value in gunicorn_config.SETTINGS.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            from agui_bridge.app import create_app

            return create_app()

    BridgeApplication().run()


def serve(args: argparse.Namespace) -> int:
    from agui_bridge.managed import ManagedUpstream, ManagedUpstreamError

    options = resolve_serve_options(args, os.environ)
    yaml_config = load_yaml_config(args.config)
    env = worker_environment(options, os.environ, yaml_config)
    managed: ManagedUpstream | None = None
    if options.a2a_url is None:
        managed = ManagedUpstream(options.managed_a2a, env)
        try:
            managed.start()
        except ManagedUpstreamError as exc:
            print(f"agui-bridge: {exc}", file=sys.stderr)
            return 1
        env["IAC_CODE_AGUI_A2A_URL"] = managed.url
        env["IAC_CODE_AGUI_A2A_TOKEN"] = managed.token
    else:
        env["IAC_CODE_AGUI_A2A_URL"] = options.a2a_url
    os.environ.clear()
    os.environ.update(env)
    import importlib

    from agui_bridge import gunicorn_config

    importlib.reload(gunicorn_config)  # pick up the resolved host/port/workers
    try:
        run_gunicorn()
    finally:
        if managed is not None:
            managed.stop()
    return 0


def demo_agent(args: argparse.Namespace) -> int:
    from agui_bridge.demo.server import run_demo_agent, token_from_env

    run_demo_agent(args.host, args.port, token_from_env(os.environ))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agui-bridge", description="AG-UI server for A2A 1.0 agent kernels")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve", help="run the bridge under gunicorn with gevent workers")
    serve_parser.add_argument("--host")
    serve_parser.add_argument("--port")
    serve_parser.add_argument("--workers")
    serve_parser.add_argument("--a2a-url", help="external loopback A2A kernel; default: a managed child")
    serve_parser.add_argument("--managed-a2a", choices=("demo", "iac-code"), help="managed upstream (default demo)")
    serve_parser.add_argument("--state-dir")
    serve_parser.add_argument("--interrupt-ttl", help="seconds until an interrupt expires (default 540)")
    serve_parser.add_argument("--heartbeat-interval", help="seconds of silence before ': heartbeat' (default 15)")
    serve_parser.add_argument("--log-level", help="debug, info, warning or error (default info)")
    serve_parser.add_argument("--log-format", help="text or json (default text)")
    serve_parser.add_argument("--config", help="YAML file with the same keys (snake_case or kebab-case)")
    serve_parser.set_defaults(handler=serve)
    demo_parser = commands.add_parser("demo-agent", help="run the scripted demo A2A agent")
    demo_parser.add_argument("--host", default="127.0.0.1")
    demo_parser.add_argument("--port", type=int, default=41242)
    demo_parser.set_defaults(handler=demo_agent)
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
