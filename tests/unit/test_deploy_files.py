"""Cheap checks of the deployment files in deploy/, tied to the values the code actually uses.

The real linters (hadolint, systemd-analyze, nginx -t, gixy-ng) run in scripts/lint-deploy; these tests pin the
properties that keep streams alive and shutdowns clean, and fail when the code and the files drift apart.
"""

from __future__ import annotations

import configparser
import inspect
import json
import os
import re
import runpy
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from agui_bridge.config.settings import Settings
from agui_bridge.errors import BridgeError, RequestTooLarge, ServiceUnavailable
from agui_bridge.worker.stop_budget import MANAGED_CHILD_WAIT_S, STOP_BUDGET_EXTRA_S, stop_budget_s
from tests.support.nginx import bridge_error_envelope
from tests.support.recipes import DEMO_RECIPE, DEMO_TOKEN, HOST_RECIPES, SHARED_RECIPES, deploy_recipes

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
STATE_DIR = "/var/lib/agui-bridge"
#: `ManagedUpstream.stop` (agui_bridge/worker/managed.py): SIGTERM, wait, then SIGKILL and wait.
MANAGED_CHILD_STOP_S = 2 * MANAGED_CHILD_WAIT_S
TOKEN_VARIABLES = ("IAC_CODE_AGUI_AUTH_TOKEN", "IAC_CODE_AGUI_A2A_TOKEN")


@pytest.fixture(scope="module")
def default_gunicorn_settings() -> dict[str, object]:
    """deploy/gunicorn.conf.py evaluated afresh without IAC_CODE_AGUI_* overrides (the shipped defaults), but
    for the A2A URL every deployment must give."""
    saved = {key: os.environ.pop(key) for key in list(os.environ) if key.startswith("IAC_CODE_AGUI_")}
    os.environ["IAC_CODE_AGUI_A2A_URL"] = "http://127.0.0.1:9/"
    try:
        return runpy.run_path(str(DEPLOY / "gunicorn.conf.py"))
    finally:
        del os.environ["IAC_CODE_AGUI_A2A_URL"]
        os.environ.update(saved)


@pytest.fixture(scope="module")
def graceful_timeout_s(default_gunicorn_settings: dict[str, object]) -> int:
    value = default_gunicorn_settings["graceful_timeout"]
    assert isinstance(value, int) and value > 0
    return value


# ---------------------------------------------------------------- helpers


def duration_s(text: str) -> float:
    """A systemd/nginx/compose duration ('60', '60s', '1min', '1m', '1h', '1m30s', '500ms') in seconds."""
    units = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "": 1}
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text.strip().lower())
    assert parts and "".join(n + u for n, u in parts) == text.strip().lower().replace(" ", ""), text
    return sum(float(number) * units[unit] for number, unit in parts)


def nginx_size_bytes(text: str) -> int:
    units = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
    match = re.fullmatch(r"(\d+)([kmg]?)", text.lower())
    assert match, text
    return int(match.group(1)) * units[match.group(2)]


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, comments dropped and `\\` continuations joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, rest = line.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    assert not pending, "Dockerfile ends inside a line continuation"
    return instructions


def final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    starts = [i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM"]
    assert starts, "no FROM"
    return instructions[starts[-1] :]


def unit_entries(text: str) -> dict[str, list[tuple[str, str]]]:
    """systemd unit as {section: [(key, value), ...]}, repeated keys kept in order."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        assert current is not None, f"key outside a section: {line}"
        key, sep, value = line.partition("=")
        assert sep, f"not a key=value line: {line}"
        current.append((key.strip(), value.strip()))
    return sections


def nginx_directives(text: str) -> list[list[str]]:
    """Every directive as its words (quotes resolved, comments dropped); blocks are flattened."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";{}")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    directives: list[list[str]] = []
    words: list[str] = []
    for token in lexer:
        if token and set(token) <= set(";{}"):
            if words:
                directives.append(words)
            words = []
        else:
            words.append(token)
    assert not words, f"unterminated directive: {words}"
    return directives


# ---------------------------------------------------------------- Dockerfile


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return dockerfile_instructions((DEPLOY / "Dockerfile").read_text(encoding="utf-8"))


def test_dockerfile_runs_as_a_non_root_user(dockerfile: list[tuple[str, str]]) -> None:
    users = [args for keyword, args in final_stage(dockerfile) if keyword == "USER"]
    assert users, "the final stage has no USER: the image would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), users[-1]


def test_dockerfile_cmd_is_exec_form_agui_bridge_serve(dockerfile: list[tuple[str, str]]) -> None:
    cmds = [args for keyword, args in final_stage(dockerfile) if keyword == "CMD"]
    assert cmds, "no CMD"
    argv = json.loads(cmds[-1])  # shell form is not JSON: SIGTERM would go to /bin/sh, not gunicorn
    assert isinstance(argv, list) and all(isinstance(arg, str) for arg in argv)
    assert argv[:2] == ["agui-bridge", "serve"]
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    assert argv[argv.index("--port") + 1] == "8000"
    assert not [args for keyword, args in final_stage(dockerfile) if keyword == "ENTRYPOINT"]


def test_dockerfile_cmd_refuses_to_start_without_a_token(
    dockerfile: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The image binds 0.0.0.0, so its CMD must stop at once (exit 2, one line) unless a token is given."""
    from agui_bridge.cli import main

    argv = json.loads([args for keyword, args in final_stage(dockerfile) if keyword == "CMD"][-1])
    assert "--allow-unauthenticated" not in argv
    env = " ".join(args for keyword, args in dockerfile if keyword == "ENV")
    assert "ALLOW_UNAUTHENTICATED" not in env
    for key in [key for key in os.environ if key.startswith("IAC_CODE_AGUI_")]:
        monkeypatch.delenv(key)
    assert main(argv[1:]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing to listen on 0.0.0.0 without a token" in err
    monkeypatch.setenv("IAC_CODE_AGUI_AUTH_TOKEN", "  ")
    assert main(argv[1:]) == 2
    assert "is set but empty" in capsys.readouterr().err


def test_dockerfile_healthcheck_probes_health_on_the_served_port(dockerfile: list[tuple[str, str]]) -> None:
    checks = [args for keyword, args in final_stage(dockerfile) if keyword == "HEALTHCHECK"]
    assert checks, "no HEALTHCHECK"
    options, sep, command = checks[-1].partition(" CMD ")
    assert sep, checks[-1]
    argv = json.loads(command)
    assert argv[:2] == ["python", "-c"], "slim images have no curl"
    assert "http://127.0.0.1:8000/health" in argv[2]
    start_period = re.search(r"--start-period=(\S+)", options)
    assert start_period and duration_s(start_period.group(1)) >= 20, "managed child may take 20 s to be ready"
    exposed = [args for keyword, args in final_stage(dockerfile) if keyword == "EXPOSE"]
    assert exposed == ["8000"]


def test_dockerfile_state_dir_is_a_volume(dockerfile: list[tuple[str, str]]) -> None:
    stage = final_stage(dockerfile)
    env = " ".join(args for keyword, args in stage if keyword == "ENV")
    assert f"IAC_CODE_AGUI_STATE_DIR={STATE_DIR}" in env.split()
    volumes = [path for keyword, args in stage if keyword == "VOLUME" for path in json.loads(args)]
    assert STATE_DIR in volumes


def test_dockerfile_stops_with_sigterm_and_bakes_no_token(dockerfile: list[tuple[str, str]]) -> None:
    stage = final_stage(dockerfile)
    assert [args for keyword, args in stage if keyword == "STOPSIGNAL"] == ["SIGTERM"]
    for keyword, args in dockerfile:
        if keyword in ("ENV", "ARG"):
            assert not any(name in args for name in TOKEN_VARIABLES), args


def test_dockerfile_copies_only_files_that_exist_and_the_ignore_file_lets_through(
    dockerfile: list[tuple[str, str]],
) -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore, "the ignore file is an allow-list: everything else stays out of the context"
    copies = [args.split() for keyword, args in dockerfile if keyword == "COPY" and "--from=" not in args]
    assert copies
    for words in copies:
        for source in words[:-1]:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository root (build context)"
            assert source.rstrip("/") in allowed, f"COPY {source}: excluded by deploy/Dockerfile.dockerignore"


def pip_installs(run_arguments: str) -> list[list[str]]:
    """The arguments of each `pip install` in a RUN instruction's shell command (split on && and ;)."""
    installs: list[list[str]] = []
    command: list[str] = []
    for word in [*shlex.split(run_arguments), "&&"]:
        if word not in ("&&", ";"):
            command.append(word)
            continue
        if len(command) > 2 and Path(command[0]).name.startswith("pip") and command[1] == "install":
            installs.append(command[2:])
        command = []
    return installs


def requirement_lines(path: Path) -> list[str]:
    """The requirement specifiers of a requirements file, following its `-r` includes."""
    lines: list[str] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            lines += requirement_lines(path.parent / line[3:].strip())
        elif line:
            lines.append(line)
    return lines


def requirement_name(specifier: str) -> str:
    return re.split(r"[\[=<>!~; ]", specifier, maxsplit=1)[0].lower().replace("_", "-")


def test_dockerfile_installs_the_project_with_its_demo_extra_under_pinned_requirements(
    dockerfile: list[tuple[str, str]],
) -> None:
    """The image installs `.[demo]` (the default upstream is the managed demo agent) together with a
    requirements file that pins every dependency the project and the extra declare, copied in before."""
    build = dockerfile[: [i for i, (keyword, _) in enumerate(dockerfile) if keyword == "FROM"][-1]]
    project = [
        (index, args)
        for index, (keyword, run) in enumerate(build)
        if keyword == "RUN"
        for args in pip_installs(run)
        if ".[demo]" in args
    ]
    assert project, "the build stage never installs the project with its demo extra"
    index, args = project[-1]
    requirement_files = [args[i + 1] for i, word in enumerate(args[:-1]) if word == "-r"]
    assert requirement_files, f"pip install {' '.join(args)} is not constrained by a requirements file"
    copied = {word for keyword, copy in build[:index] if keyword == "COPY" for word in copy.split()[:-1]}
    pins: dict[str, str] = {}
    for name in requirement_files:
        assert name in copied, f"{name} is not copied into the build stage before it is installed"
        for specifier in requirement_lines(ROOT / name):
            assert "==" in specifier, f"{name}: {specifier} is not pinned"
            pins[requirement_name(specifier)] = specifier
    declared = configparser.ConfigParser()
    declared.read(ROOT / "setup.cfg", encoding="utf-8")
    needed = declared["options"]["install_requires"].split("\n") + declared["options.extras_require"]["demo"].split(
        "\n"
    )
    missing = [spec for spec in needed if spec.strip() and requirement_name(spec.strip()) not in pins]
    assert missing == [], "declared dependencies without a pin in the image"


# ---------------------------------------------------------------- systemd unit


@pytest.fixture(scope="module")
def unit() -> dict[str, list[tuple[str, str]]]:
    return unit_entries((DEPLOY / "agui-bridge.service").read_text(encoding="utf-8"))


def service_value(unit: dict[str, list[tuple[str, str]]], key: str) -> str:
    values = [value for k, value in unit["Service"] if k == key]
    assert values, f"[Service] has no {key}="
    return values[-1]


def test_unit_waits_longer_than_the_gunicorn_drain(
    unit: dict[str, list[tuple[str, str]]], graceful_timeout_s: int
) -> None:
    stop_s = duration_s(service_value(unit, "TimeoutStopSec"))
    assert stop_s > graceful_timeout_s
    # After the drain, `agui-bridge serve` still stops the managed child.
    assert stop_s > graceful_timeout_s + MANAGED_CHILD_STOP_S
    assert service_value(unit, "KillSignal") == "SIGTERM"
    assert service_value(unit, "KillMode") == "mixed", "the managed child must outlive the drain"
    assert service_value(unit, "Restart") == "on-failure"


def test_unit_uses_sd_notify_which_the_master_sends_once_a_worker_answers(
    unit: dict[str, list[tuple[str, str]]],
) -> None:
    import gunicorn.systemd

    assert service_value(unit, "Type") == "notify"
    assert service_value(unit, "NotifyAccess") == "main"
    # agui_bridge/worker/readiness.py silences gunicorn's early READY=1 by taking NOTIFY_SOCKET out of the
    # environment before gunicorn sends: that works only while gunicorn reads it at the time it sends.
    source = inspect.getsource(gunicorn.systemd.sd_notify)
    reads_at_send = re.search(r"os\.environ\.get\(\s*['\"]NOTIFY_SOCKET['\"]", source)
    assert reads_at_send, "gunicorn reads NOTIFY_SOCKET elsewhere now"


def test_unit_state_directory_and_environment(unit: dict[str, list[tuple[str, str]]]) -> None:
    assert "agui-bridge" in service_value(unit, "StateDirectory").split()
    environment = [value for key, value in unit["Service"] if key == "Environment"]
    assert "IAC_CODE_AGUI_STATE_DIR=%S/agui-bridge" in environment
    assert service_value(unit, "EnvironmentFile")
    for value in environment:
        assert not value.startswith(TOKEN_VARIABLES), "tokens belong in the EnvironmentFile, never in the unit"
    assert service_value(unit, "ExecStart").split()[1:] == ["serve"]


def test_unit_runs_unprivileged_and_hardened(unit: dict[str, list[tuple[str, str]]]) -> None:
    keys = {key for key, _ in unit["Service"]}
    assert "DynamicUser" in keys or service_value(unit, "User") not in ("root", "0")
    expected = {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "CapabilityBoundingSet": "",
    }
    for key, value in expected.items():
        assert service_value(unit, key) == value, key
    assert set(service_value(unit, "RestrictAddressFamilies").split()) == {"AF_UNIX", "AF_INET", "AF_INET6"}


def test_the_service_takes_its_socket_from_the_socket_unit_on_the_address_nginx_proxies_to(
    unit: dict[str, list[tuple[str, str]]], nginx: list[list[str]]
) -> None:
    socket_unit = unit_entries((DEPLOY / "agui-bridge.socket").read_text(encoding="utf-8"))
    (listen,) = [value for key, value in socket_unit["Socket"] if key == "ListenStream"]
    required = [value for key, value in unit["Unit"] if key in ("Requires", "After")]
    assert required.count("agui-bridge.socket") == 2, "the service must require and follow its socket"
    environment = [value for key, value in unit["Service"] if key == "Environment"]
    host_port = {name: value for name, _, value in (v.partition("=") for v in environment)}
    assert listen == f"{host_port['IAC_CODE_AGUI_HOST']}:{host_port['IAC_CODE_AGUI_PORT']}"
    upstreams = [words[1] for words in nginx if words[0] == "server" and len(words) == 2]
    assert upstreams == [listen]
    assert ("WantedBy", "sockets.target") in socket_unit["Install"]


@pytest.mark.parametrize("document", ["deploy/README.md", "docs/operations.md"])
def test_the_documented_stop_stops_the_socket_unit_too(document: str) -> None:
    """With the socket unit enabled, the next connection starts a stopped service again."""
    assert "systemctl stop agui-bridge.socket agui-bridge" in (ROOT / document).read_text(encoding="utf-8")


def test_env_example_sets_no_secret() -> None:
    """Its active lines are the unit's non-secret settings; every token stays a commented, empty template."""
    text = (DEPLOY / "agui-bridge.env.example").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key = line.partition("=")[0]
            assert "TOKEN" not in key and "SECRET" not in key and "KEY" not in key, f"example sets a secret: {line}"
    for name in TOKEN_VARIABLES:
        assert re.search(rf"^#{name}=$", text, re.M), f"{name} must stay a commented, empty template"


# ---------------------------------------------------------------- nginx


@pytest.fixture(scope="module")
def nginx() -> list[list[str]]:
    return nginx_directives((DEPLOY / "nginx" / "agui-bridge.conf").read_text(encoding="utf-8"))


def nginx_values(nginx: list[list[str]], name: str) -> list[list[str]]:
    return [words[1:] for words in nginx if words[0] == name]


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [("503", "SERVICE_UNAVAILABLE", ServiceUnavailable), ("413", "REQUEST_TOO_LARGE", RequestTooLarge)],
)
def test_nginx_json_answers_are_the_bridges_envelope_with_its_english_message(
    nginx: list[list[str]], status: str, code: str, error: type[BridgeError]
) -> None:
    """The site answers these itself, in a copy of the bridge's body (docs/http-api.md): the copy must follow
    the bridge's code and the English catalog's message."""
    assert (error.code, str(error.http_status)) == (code, status)
    (body,) = [words[2] for words in nginx if words[:2] == ["return", status]]
    assert body.endswith("\\n")  # nginx turns it into a newline; the lexer here keeps it as written
    assert json.loads(body.removesuffix("\\n")) == bridge_error_envelope(code, error.default_key)


def test_nginx_streams_without_buffering(nginx: list[list[str]]) -> None:
    assert nginx_values(nginx, "proxy_buffering") == [["off"]]
    assert nginx_values(nginx, "proxy_cache") == [["off"]]
    assert nginx_values(nginx, "gzip") == [["off"]]
    assert nginx_values(nginx, "proxy_http_version") == [["1.1"]]
    assert ["Connection", ""] in nginx_values(nginx, "proxy_set_header")
    ignored = [header.lower() for values in nginx_values(nginx, "proxy_ignore_headers") for header in values]
    assert "x-accel-buffering" not in ignored, "the bridge's X-Accel-Buffering: no must be honoured"


def test_nginx_body_limit_matches_the_bridge(nginx: list[list[str]]) -> None:
    (size,) = nginx_values(nginx, "client_max_body_size")
    assert size == ["12m"]
    assert nginx_size_bytes(size[0]) == Settings().max_request_bytes


def test_nginx_read_timeout_exceeds_the_heartbeat(nginx: list[list[str]]) -> None:
    (timeout,) = nginx_values(nginx, "proxy_read_timeout")
    heartbeat_s = Settings().heartbeat_interval_s
    assert duration_s(timeout[0]) > heartbeat_s
    assert duration_s(timeout[0]) >= 10 * heartbeat_s, "a few lost heartbeats must not end a stream"


def test_nginx_upstream_keepalive_closes_before_gunicorn(
    nginx: list[list[str]], default_gunicorn_settings: dict[str, object]
) -> None:
    (timeout,) = nginx_values(nginx, "keepalive_timeout")
    keepalive = default_gunicorn_settings["keepalive"]
    assert isinstance(keepalive, int)
    assert duration_s(timeout[0]) < keepalive


#: nginx variables that carry a URL's query string, where a client that cannot set headers puts the reattach
#: credential (`?rosInvocationId=`); the console's page URL holds it too, so the Referer does.
NGINX_QUERY_VARIABLES = ("$request", "$request_uri", "$args", "$query_string", "$is_args", "$arg_", "$http_referer")


def test_nginx_access_log_keeps_query_strings_out(nginx: list[list[str]]) -> None:
    formats = {words[1]: "".join(words[2:]) for words in nginx if words[0] == "log_format"}
    logs = [values for values in nginx_values(nginx, "access_log") if values != ["off"]]
    assert logs, "the site must name its access log and its format"
    for values in logs:
        assert len(values) >= 2 and values[1] in formats, f"access_log {values} must use the site's own format"
        text = formats[values[1]]
        assert "$uri" in text
        # `$request` would also match `$request_method`: compare variable names whole.
        variables = re.findall(r"\$[a-z_]+", text)
        assert not [v for v in variables if v in NGINX_QUERY_VARIABLES or v.startswith("$arg_")], text


# ---------------------------------------------------------------- Apache httpd


@pytest.fixture(scope="module")
def apache_site() -> str:
    return (DEPLOY / "apache" / "agui-bridge.conf").read_text(encoding="utf-8").replace("\\\n", " ")


def test_apache_access_log_keeps_query_strings_out(apache_site: str) -> None:
    formats = dict(re.findall(r'^\s*LogFormat\s+"((?:[^"\\]|\\.)*)"\s+(\S+)', apache_site, re.M))
    formats = {name: text for text, name in formats.items()}
    logs = re.findall(r"^\s*CustomLog\s+\S+\s+(\S+)", apache_site, re.M)
    assert logs, "the site must name its access log and its format"
    for name in logs:
        text = formats[name]
        assert "%U" in text
        for directive in ("%r", "%q", "%{Referer}i"):
            assert directive not in text, f"{directive} writes the query string: {text}"


def test_apache_daemon_runs_as_its_own_account(apache_site: str) -> None:
    (daemon,) = re.findall(r"^\s*WSGIDaemonProcess\s+(.*)$", apache_site, re.M)
    options = dict(word.split("=", 1) for word in daemon.split() if "=" in word)
    assert options.get("user") == "${AGUI_BRIDGE_USER}" and options.get("group") == "${AGUI_BRIDGE_GROUP}"
    defaults = dict(re.findall(r"^\s*Define\s+(AGUI_BRIDGE_(?:USER|GROUP))\s+(\S+)", apache_site, re.M))
    assert defaults == {"AGUI_BRIDGE_USER": "agui-bridge", "AGUI_BRIDGE_GROUP": "agui-bridge"}
    assert "www-data" not in apache_site.replace("never as the web server's shared user (www-data)", "")


# ---------------------------------------------------------------- compose


def test_compose_grace_period_exceeds_the_drain(graceful_timeout_s: int) -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    service = compose["services"]["agui-bridge"]
    assert duration_s(service["stop_grace_period"]) > graceful_timeout_s + MANAGED_CHILD_STOP_S
    assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert f"agui-state:{STATE_DIR}" in service["volumes"]
    for name in TOKEN_VARIABLES:
        assert service.get("environment", {}).get(name, "${").startswith("${"), "tokens come from the host"


def test_compose_requires_the_auth_token() -> None:
    """`${VAR:?message}`: compose refuses to start when the token is unset or empty (no `:-` empty default)."""
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    environment = compose["services"]["agui-bridge"]["environment"]
    token = environment["IAC_CODE_AGUI_AUTH_TOKEN"]
    assert re.fullmatch(r"\$\{IAC_CODE_AGUI_AUTH_TOKEN:\?[^}]+\}", token), token
    assert "IAC_CODE_AGUI_ALLOW_UNAUTHENTICATED" not in environment


def test_duration_parser() -> None:
    assert duration_s("60") == 60
    assert duration_s("60s") == 60
    assert duration_s("1min") == 60
    assert duration_s("1m30s") == 90
    assert duration_s("3600s") == 3600
    assert duration_s("500ms") == 0.5
    with pytest.raises(AssertionError):
        duration_s("soon")


def test_every_env_file_install_line_closes_the_token_file_to_group_and_others() -> None:
    """The env file holds the tokens: every documented install of it is mode 0600, the mode the Apache entry
    point and `agui-bridge doctor` demand of a file holding a token."""
    documents = [*DEPLOY.rglob("*"), ROOT / "README.md"]
    installs = [
        (path.name, line.strip())
        for path in documents
        if path.is_file() and path.suffix in {".md", ".example", ".service", ".conf", ".wsgi"}
        for line in path.read_text(encoding="utf-8").splitlines()
        if "install -m" in line and "agui-bridge.env" in line
    ]
    assert len(installs) >= 4, installs  # env example (twice), deploy/README (twice), Apache conf
    assert [(name, line) for name, line in installs if "install -m 0600 " not in line] == []


# ---------------------------------------------------------------- one stop budget

#: Where the stop budget is stated: each must give the same figure.
BUDGET_DOCUMENTS = (
    "README.md",
    "deploy/README.md",
    "deploy/agui-bridge.env.example",
    "deploy/agui-bridge.service",
    "deploy/Dockerfile",
    "deploy/compose.yaml",
    "docs/operations.md",
    "docs/design.md",
)
#: "graceful_timeout + 30 s", "graceful-timeout + 30", "GRACEFUL_TIMEOUT + 30"
BUDGET_PHRASE = re.compile(r"(?:graceful[_ -]timeout`?|this)\s*\+\s*(\d+)", re.I)


def test_every_supervisor_setting_is_the_stop_budget(
    unit: dict[str, list[tuple[str, str]]], graceful_timeout_s: int
) -> None:
    """systemd, compose, Docker and Kubernetes wait exactly the budget derived from the shipped graceful_timeout."""
    budget = stop_budget_s(graceful_timeout_s)
    assert duration_s(service_value(unit, "TimeoutStopSec")) == budget
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    assert duration_s(compose["services"]["agui-bridge"]["stop_grace_period"]) == budget
    stated = "\n".join((ROOT / name).read_text(encoding="utf-8") for name in BUDGET_DOCUMENTS)
    docker = {int(n) for n in re.findall(r"--stop-timeout[ =](\d+)", stated)}
    kubernetes = {int(n) for n in re.findall(r"terminationGracePeriodSeconds: (\d+)", stated)}
    assert docker == {budget} and kubernetes == {budget}, (docker, kubernetes)


def test_every_document_states_one_stop_budget() -> None:
    """No file says "+ 10 s" while another says "+ 20": each statement is graceful_timeout + the one extra."""
    found: dict[str, set[int]] = {}
    for name in BUDGET_DOCUMENTS:
        text = " ".join((ROOT / name).read_text(encoding="utf-8").split())  # statements may wrap lines
        found[name] = {int(n) for n in BUDGET_PHRASE.findall(text)}
    assert all(values <= {STOP_BUDGET_EXTRA_S} for values in found.values()), found
    stating = {name for name, values in found.items() if values}
    assert {"deploy/README.md", "deploy/agui-bridge.env.example", "deploy/agui-bridge.service"} <= stating, found
    assert "docs/operations.md" in stating, found


# ---------------------------------------------------------------- env example and the recipes of deploy/README.md

ENV_EXAMPLE = DEPLOY / "agui-bridge.env.example"
#: What systemd and a shell read alike: no quotes, spaces, `$`, backslashes, `;` or backticks in a value.
PORTABLE_ASSIGNMENT = re.compile(r"#?([A-Z][A-Z0-9_]*)=([^\s'\"$\\;`]*)")


def env_example_values() -> dict[str, str]:
    """The example's active assignments, read as systemd's EnvironmentFile= reads them (KEY=value lines)."""
    values: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            values[key] = value
    return values


def test_env_example_lines_read_the_same_by_systemd_and_a_shell() -> None:
    """The recipes load the file with `set -a; . FILE; set +a`: every assignment, commented or not, is portable."""
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        if "=" in line.split(" ", 1)[0] or (line and not line.startswith("#")):
            assert PORTABLE_ASSIGNMENT.fullmatch(line), f"not portable between systemd and sh: {line!r}"
    script = f'set -a; . "{ENV_EXAMPLE}"; set +a; env -0'
    shell = subprocess.run(["bash", "-c", script], env={}, capture_output=True, check=True).stdout.decode()
    read_by_shell = dict(item.split("=", 1) for item in shell.split("\0") if item.startswith("IAC_CODE_AGUI_"))
    assert read_by_shell == env_example_values()


def test_env_example_holds_every_setting_the_unit_sets_with_the_same_value(
    unit: dict[str, list[tuple[str, str]]],
) -> None:
    from_unit = dict(value.split("=", 1) for key, value in unit["Service"] if key == "Environment")
    bridge = {k: v.replace("%S", "/var/lib") for k, v in from_unit.items() if k.startswith("IAC_CODE_AGUI_")}
    assert {"IAC_CODE_AGUI_HOST", "IAC_CODE_AGUI_PORT", "IAC_CODE_AGUI_STATE_DIR"} <= set(bridge)
    example = env_example_values()
    assert {key: example.get(key) for key in bridge} == bridge


@pytest.fixture(scope="module")
def recipes() -> dict[str, str]:
    return deploy_recipes()


def test_every_checkout_recipe_is_marked_for_the_test_that_runs_it(recipes: dict[str, str]) -> None:
    """tests/e2e/test_deploy_recipes.py runs exactly these blocks: a recipe added unmarked would go untested."""
    assert set(recipes) == {*SHARED_RECIPES, DEMO_RECIPE, *HOST_RECIPES}


def test_the_demo_agent_recipe_and_the_env_file_it_asks_for_share_one_token(recipes: dict[str, str]) -> None:
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    assert f"IACCODE_A2A_HTTP_TOKEN={DEMO_TOKEN} " in recipes[DEMO_RECIPE]
    assert f"`IAC_CODE_AGUI_A2A_TOKEN={DEMO_TOKEN}`" in readme
    assert '--port "${AGUI_DEMO_PORT:-41242}"' in recipes[DEMO_RECIPE]
    assert "`IAC_CODE_AGUI_A2A_URL=http://127.0.0.1:41242/`" in readme


@pytest.mark.parametrize("name", HOST_RECIPES)
def test_host_recipes_load_the_env_file_and_name_every_file_by_its_full_path(
    recipes: dict[str, str], name: str
) -> None:
    block = recipes[name]
    assert 'set -a; . "$AGUI_ENV_FILE"; set +a\n' in block
    relative = re.findall(r"(?<![/\w$])(?:deploy/|\.venv/|wsgi\.py)", block.replace('"$AGUI_HOME/', '"/'))
    assert relative == [], f"{name}: paths relative to the current directory: {relative}"


def test_recipes_install_the_host_versions_the_tests_use(recipes: dict[str, str]) -> None:
    pinned = dict(
        line.split("==", 1)
        for line in (ROOT / "requirements-dev.txt").read_text(encoding="utf-8").splitlines()
        if "==" in line and not line.startswith("#")
    )
    installs = re.findall(r"pip\" install '([A-Za-z0-9_.-]+)==([^']+)'", "\n".join(recipes.values()))
    assert {name for name, _ in installs} == {"waitress", "uwsgi"}
    assert all(pinned.get(name) == version for name, version in installs), (installs, pinned)


def test_uwsgi_ini_finds_the_app_and_its_venv_from_any_directory() -> None:
    ini = configparser.ConfigParser(strict=False, interpolation=None, comment_prefixes=(";", "#"))
    ini.read_string((DEPLOY / "uwsgi.ini").read_text(encoding="utf-8"))
    assert ini["uwsgi"]["chdir"] == "%d.."
    assert ini["uwsgi"]["virtualenv"] == "%d../.venv"


# ---------------------------------------------------------------- HAProxy (several hosts)

HAPROXY_MAX_EXPIRE_S = 2**31 / 1000  # a stick table's expire is at most 2^31 ms (~24.8 days)
#: deploy/README.md#retention-and-the-tables: the bridges behind HAProxy keep threads at most this long.
RETENTION_BEHIND_HAPROXY_DAYS = 23


@pytest.fixture(scope="module")
def haproxy_config() -> list[list[str]]:
    lines = (DEPLOY / "haproxy" / "haproxy.cfg").read_text(encoding="utf-8").splitlines()
    return [line.split() for line in lines if line.strip() and not line.strip().startswith("#")]


def test_haproxy_stream_timeouts_outlast_the_heartbeat(haproxy_config: list[list[str]]) -> None:
    heartbeat_s = Settings().heartbeat_interval_s
    for side in ("server", "client"):
        (timeout,) = [words[2] for words in haproxy_config if words[:2] == ["timeout", side]]
        assert duration_s(timeout) >= 4 * heartbeat_s, f"timeout {side}: a few lost heartbeats must not end a stream"


def test_haproxy_tables_keep_a_thread_placed_longer_than_its_record_lives(haproxy_config: list[list[str]]) -> None:
    tables = [words for words in haproxy_config if words[0] == "stick-table"]
    assert len(tables) == 2
    documented = (DEPLOY / "README.md").read_text(encoding="utf-8")
    assert f"--state-retention-days {RETENTION_BEHIND_HAPROXY_DAYS}" in documented
    for words in tables:
        expire_s = duration_s(words[words.index("expire") + 1])
        assert expire_s <= HAPROXY_MAX_EXPIRE_S
        # The record goes first: the retention plus the hourly sweep's hour is within the entry's life.
        assert expire_s > RETENTION_BEHIND_HAPROXY_DAYS * 86400 + 3600
        assert "peers" in words, "a reload must keep the table"
        assert words[words.index("srvkey") + 1] == "name"
