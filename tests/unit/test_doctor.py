"""`agui_bridge.cli.doctor`: one test per failing check, and a passing run.

The upstream checks run against the real demo agent (`demo_url`); the failure modes a demo agent
cannot produce (an A2A 0.3 kernel, a non-A2A endpoint) are answered by a stub transport.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.cli import doctor
from agui_bridge.cli.doctor import Check, Target, check_allowed_roots, check_auth_token, check_clock, check_state_dir

NOW = 1_800_000_000.0


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {check.name: check for check in checks}


@pytest.fixture
def private_dir(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    return path


def target(state_dir: Path, **changes: Any) -> Target:
    values: dict[str, Any] = {
        "host": "127.0.0.1",
        "state_dir": state_dir,
        "allowed_cwds": None,
        "auth_token": None,
        "a2a_url": None,
        "a2a_token": None,
        "managed_a2a": "demo",
    }
    values.update(changes)
    return Target(**values)


# --------------------------------------------------------------------------------------- state directory


def test_missing_state_dir_fails_with_a_mkdir_fix(tmp_path: Path) -> None:
    (check,) = check_state_dir(tmp_path / "absent")
    assert not check.ok and check.name == "state-dir"
    assert "does not exist" in check.detail and "agui-bridge state init" in check.fix


def test_a_file_is_not_a_state_dir(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    (check,) = check_state_dir(path)
    assert not check.ok and "not a directory" in check.detail


def test_group_or_world_access_fails_with_a_chmod_fix(private_dir: Path) -> None:
    private_dir.chmod(0o750)
    check = by_name(check_state_dir(private_dir))["state-private"]
    assert not check.ok and "0750" in check.detail and f"chmod 700 {private_dir}" in check.fix


def test_a_directory_of_another_user_is_not_private(private_dir: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("only root can give a directory away")
    os.chown(private_dir, 54321, -1)
    check = by_name(check_state_dir(private_dir))["state-private"]
    assert not check.ok and "uid 54321" in check.detail


def test_an_unwritable_state_dir_fails(private_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    check = by_name(check_state_dir(private_dir))["state-writable"]
    assert not check.ok and "Read-only file system" in check.detail


def test_a_full_file_system_fails(private_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor.shutil, "disk_usage", lambda _p: doctor.shutil._ntuple_diskusage(10, 10, 1024))  # type: ignore[attr-defined]
    check = by_name(check_state_dir(private_dir))["state-space"]
    assert not check.ok and check.detail.startswith("0 MiB")


def test_the_writability_probe_leaves_nothing_behind(private_dir: Path) -> None:
    checks = check_state_dir(private_dir)
    assert all(c.ok for c in checks), checks
    assert list(private_dir.iterdir()) == []


# ------------------------------------------------------------------------------------------- settings


def test_allowed_roots(tmp_path: Path) -> None:
    assert check_allowed_roots(None).ok
    assert check_allowed_roots(str(tmp_path)).ok
    missing = check_allowed_roots(f"{tmp_path}{os.pathsep}{tmp_path / 'gone'}")
    assert not missing.ok and str(tmp_path / "gone") in missing.detail
    assert not check_allowed_roots(os.pathsep).ok


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.1.2.3"])
def test_no_token_is_fine_on_loopback(host: str) -> None:
    assert check_auth_token(host, None).ok


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "bridge.example"])
def test_no_token_beyond_loopback_fails(host: str) -> None:
    check = check_auth_token(host, None)
    assert not check.ok and "IAC_CODE_AGUI_AUTH_TOKEN" in check.fix
    assert check_auth_token(host, "set").ok


# ---------------------------------------------------------------------------------------------- clock


def test_a_clock_before_2025_fails(tmp_path: Path) -> None:
    check = check_clock(1_000_000_000.0, None, tmp_path)
    assert not check.ok and "NTP" in check.fix


def test_skew_against_the_upstream_fails(tmp_path: Path) -> None:
    assert check_clock(NOW, NOW + 5, tmp_path).ok
    check = check_clock(NOW, NOW + 120, tmp_path)
    assert not check.ok and "-120 s" in check.detail


def test_a_state_file_from_the_future_fails(private_dir: Path) -> None:
    threads = private_dir / "threads"
    threads.mkdir()
    (threads / "t.json").write_text("{}")
    now = time.time()
    assert check_clock(now, None, private_dir).ok
    os.utime(threads / "t.json", (now + 3600, now + 3600))
    check = check_clock(now, None, private_dir)
    assert not check.ok and "in the future" in check.detail


# ------------------------------------------------------------------------------------------- upstream


def test_a_passing_run_against_the_demo_agent(private_dir: Path, demo_url: str, demo_token: str) -> None:
    checks = doctor.run_checks(target(private_dir, a2a_url=demo_url, a2a_token=demo_token))
    assert all(check.ok for check in checks), doctor.render_text(checks)
    names = [check.name for check in checks]
    assert names == [
        "state-dir", "state-private", "state-writable", "state-space", "allowed-roots", "auth-token",
        "upstream-health", "upstream-a2a", "clock", "tracing",
    ]  # fmt: skip
    assert "-32001" in by_name(checks)["upstream-a2a"].detail
    assert "matches the upstream" in by_name(checks)["clock"].detail


def test_a_wrong_upstream_token_fails(private_dir: Path, demo_url: str, demo_token: str) -> None:
    checks = by_name(doctor.run_checks(target(private_dir, a2a_url=demo_url, a2a_token="wrong-token")))
    assert checks["upstream-health"].ok
    assert not checks["upstream-a2a"].ok and "401" in checks["upstream-a2a"].detail
    assert "IAC_CODE_AGUI_A2A_TOKEN" in checks["upstream-a2a"].fix
    assert "wrong-token" not in doctor.render_text(checks.values()) + doctor.render_json(checks.values())


def test_an_unreachable_upstream_fails_on_both_upstream_lines(private_dir: Path) -> None:
    from agui_bridge.demo.testing import free_port

    url = f"http://127.0.0.1:{free_port()}/"
    checks = by_name(doctor.run_checks(target(private_dir, a2a_url=url)))
    assert not checks["upstream-health"].ok and "unreachable" in checks["upstream-health"].detail
    a2a = checks["upstream-a2a"]  # kept, with the failure: nothing could be asked
    assert not a2a.ok and a2a.detail.startswith("not asked: ") and "unreachable" in a2a.detail and a2a.fix


def test_a_failed_health_check_keeps_the_upstream_a2a_line(private_dir: Path) -> None:
    get, post = stub(404, {"jsonrpc": "2.0", "id": "x", "error": {"code": -32001, "message": "Task not found"}})
    checks = by_name(doctor.run_checks(target(private_dir, a2a_url="http://kernel.invalid/"), get=get, post=post))
    assert not checks["upstream-health"].ok and "HTTP 404" in checks["upstream-health"].detail
    assert checks["upstream-a2a"].ok and "-32001" in checks["upstream-a2a"].detail
    assert "upstream-a2a" in doctor.render_text(checks.values())


def stub(health_status: int, rpc_body: object) -> tuple[doctor.HttpGet, doctor.HttpPost]:
    def get(_url: str, _headers: Mapping[str, str]) -> tuple[int, Mapping[str, str], bytes]:
        return health_status, {}, b"{}"

    def post(_url: str, headers: Mapping[str, str], _body: bytes) -> tuple[int, Mapping[str, str], bytes]:
        assert headers["A2A-Version"] == "1.0"
        return 200, {}, json.dumps(rpc_body).encode()

    return get, post


@pytest.mark.parametrize(
    ("health", "answer", "detail"),
    [
        (503, {"jsonrpc": "2.0", "id": "x", "error": {"code": -32001, "message": "Task not found"}}, "HTTP 503"),
        (200, {"jsonrpc": "2.0", "id": "x", "error": {"code": -32009, "message": "A2A version"}}, "-32009"),
        (200, {"jsonrpc": "2.0", "id": "x", "error": {"code": -32601, "message": "Method not found"}}, "-32601"),
        (200, {"jsonrpc": "2.0", "id": "x", "result": {"id": "t"}}, "without a JSON-RPC error"),
    ],
)
def test_an_upstream_that_does_not_speak_a2a_1_0_fails(
    private_dir: Path, health: int, answer: object, detail: str
) -> None:
    get, post = stub(health, answer)
    checks = doctor.run_checks(target(private_dir, a2a_url="http://kernel.invalid/"), get=get, post=post)
    failed = [c for c in checks if not c.ok]
    assert len(failed) == 1 and failed[0].name.startswith("upstream-") and detail in failed[0].detail
    assert failed[0].fix


def test_render_text_has_one_line_per_check_with_the_fix(private_dir: Path) -> None:
    checks = [Check("a", True, "fine"), Check("bb", False, "broken", "do this")]
    assert doctor.render_text(checks).splitlines() == ["ok    a   fine", "FAIL  bb  broken; fix: do this"]
    assert json.loads(doctor.render_json(checks))["ok"] is False


def test_tracing_configuration() -> None:
    assert doctor.check_tracing({}).ok
    assert doctor.check_tracing({"OTEL_TRACES_EXPORTER": "console,otlp"}).ok  # the extra is a dev dependency
    unknown = doctor.check_tracing({"OTEL_TRACES_EXPORTER": "zipkin"})
    assert not unknown.ok and "zipkin" in unknown.detail


def test_tracing_otlp_without_the_extra_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if "otlp" in name else real(name, *a))
    check = doctor.check_tracing({"OTEL_TRACES_EXPORTER": "otlp"})
    assert not check.ok and "agui-bridge[otlp]" in check.fix


# ------------------------------------------------------------------------------------- proxy variables


@pytest.fixture
def proxy_listener(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A loopback listener every proxy variable points at: a connection to it is a token sent to a proxy."""
    listener = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with listener:
        yield listener


def connections_to(listener: socket.socket) -> int:
    """How many connections wait in the listener's backlog (non-blocking: no wait, no sleep)."""
    listener.setblocking(False)
    count = 0
    while True:
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            return count
        connection.close()
        count += 1


def test_doctor_calls_never_go_through_proxy_variables(
    private_dir: Path, demo_url: str, demo_token: str, proxy_listener: socket.socket
) -> None:
    checks = by_name(doctor.run_checks(target(private_dir, a2a_url=demo_url, a2a_token=demo_token)))
    assert checks["upstream-health"].ok and checks["upstream-a2a"].ok, checks
    assert connections_to(proxy_listener) == 0


def test_every_outgoing_session_ignores_the_environment() -> None:
    from agui_bridge.kernel.outgoing import direct_session

    with direct_session() as session:
        assert session.trust_env is False


# ------------------------------------------------------------------------------------ secret files


@pytest.mark.parametrize(
    ("mode", "ok", "who"),
    [(0o600, True, ""), (0o400, True, ""), (0o640, False, "its group"), (0o644, False, "others"),
     (0o604, False, "others"), (0o660, False, "its group")],
)  # fmt: skip
def test_a_file_holding_a_token_must_be_closed_to_group_and_others(
    tmp_path: Path, mode: int, ok: bool, who: str
) -> None:
    secret = tmp_path / "bridge.yaml"
    secret.write_text("auth_token: x\n")
    secret.chmod(mode)
    check = doctor.check_secret_file(secret, "config file")
    assert check.ok is ok
    if not ok:
        assert f"open to {who} (mode {mode:04o})" in check.detail and check.fix == f"chmod 600 {secret}"


def test_a_token_file_that_is_not_a_regular_file_is_not_judged_by_its_mode() -> None:
    assert doctor.check_secret_file(Path(os.devnull), "env file").ok


def test_startup_refuses_an_open_token_file_and_warns_on_an_open_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)
    secret = tmp_path / "bridge.yaml"
    secret.write_text("auth_token: x\n")
    secret.chmod(0o644)
    refusals, warnings = doctor.startup_problems(state, secret)
    assert len(refusals) == 1 and refusals[0].startswith("refusing to start:") and "chmod 600" in refusals[0]
    assert len(warnings) == 1 and "chmod 700" in warnings[0]
    secret.chmod(0o600)
    state.chmod(0o700)
    assert doctor.startup_problems(state, secret) == ([], [])
    assert doctor.startup_problems(tmp_path / "absent", None) == ([], [])  # the store creates it 0700
