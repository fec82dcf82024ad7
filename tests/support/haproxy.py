"""A private HAProxy running the shipped deploy/haproxy/haproxy.cfg, for the e2e tier and bench/placement_sim.py.

The config is used as shipped except for what ties it to a machine: the bind address, the runtime socket path,
the peers address, the server lines (the hosts under test) and the privilege drop (`user`, `group`, `chroot`: a
test's HAProxy runs as whoever runs the tests, without a chroot). Every placement rule is the shipped one. The
process runs in master-worker mode in its own process group, so a reload (SIGUSR2 to the master) is the one an
operator does.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.ci import skip_or_fail_in_ci
from tests.support.eventually import eventually

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG = REPO_ROOT / "deploy" / "haproxy" / "haproxy.cfg"
THREAD_TABLE = "st_threads"
EXECUTION_TABLE = "st_executions"
BACKEND = "agui_hosts"
#: The global lines that need root and Debian's haproxy user: kept in the shipped file, left out in a test.
PRIVILEGE_DROP = ("user", "group", "chroot")


def haproxy_binary() -> str | None:
    """The installed haproxy, wherever Debian or PATH puts it."""
    found = shutil.which("haproxy")
    return found or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)


def require_haproxy() -> str:
    """The haproxy binary; skip the test when it is absent (fail it when CI is set: scripts/test installs it)."""
    binary = haproxy_binary()
    if binary is None:
        skip_or_fail_in_ci("haproxy is not installed (run: bash scripts/install-host-tools)")
    assert binary is not None
    return binary


@dataclass(frozen=True)
class Host:
    """One server line: its name (host<id>), the bridge's address and port, and its agent-check port."""

    id: int
    address: str
    port: int
    agent_port: int
    disabled: bool = False

    @property
    def name(self) -> str:
        return f"host{self.id}"

    def line(self) -> str:
        disabled = " disabled" if self.disabled else ""
        return (
            f"    server {self.name} {self.address}:{self.port} id {self.id} agent-port {self.agent_port}{disabled}\n"
        )


def adapted_config(listen_port: int, peer_port: int, socket_path: Path, hosts: Sequence[Host]) -> str:
    """The shipped config with only its bind, runtime socket, peer address and server lines changed, and its
    privilege drop left out."""
    text = CONFIG.read_text(encoding="utf-8")
    for directive in PRIVILEGE_DROP:
        text, count = re.subn(rf"^\s*{directive} \S+\n", "", text, count=1, flags=re.M)
        assert count == 1, f"the shipped config no longer has its `{directive}` line"
    replacements = (
        (r"^(\s*)bind :80$", rf"\1bind 127.0.0.1:{listen_port}"),
        (r"^(\s*stats socket )/run/haproxy/agui-admin\.sock ", rf"\g<1>{socket_path} "),
        (r"^(\s*peer lb1 )127\.0\.0\.1:10000$", rf"\g<1>127.0.0.1:{peer_port}"),
    )
    for pattern, replacement in replacements:
        text, count = re.subn(pattern, replacement, text, count=1, flags=re.M)
        assert count == 1, f"the shipped config no longer has a line matching {pattern!r}"
    servers = "".join(host.line() for host in hosts)
    text, count = re.subn(r"(?:^    server host\d+ .*\n)+", lambda _: servers, text, count=1, flags=re.M)
    assert count == 1, "the shipped config no longer has its block of server lines"
    return text


def runtime_command(socket_path: Path, command: str, timeout_s: float = 5.0) -> str:
    """One command on HAProxy's runtime API (the stats socket); its whole answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout_s)
        client.connect(str(socket_path))
        client.sendall(command.encode() + b"\n")
        chunks = []
        while chunk := client.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


_ENTRY = re.compile(r"key=(?P<key>.*?) use=\d+ exp=\d+ (?:server_id=\d+ )?(?:gpt0=\d+ )?server_key=(?P<server>\S+)")


def parse_table(dump: str) -> dict[str, str]:
    """`show table` lines as {key: server name}."""
    placements: dict[str, str] = {}
    for line in dump.splitlines():
        match = _ENTRY.search(line)
        if match:
            placements[match["key"]] = match["server"]
    return placements


class HaproxyProcess:
    """HAProxy in master-worker mode on 127.0.0.1 with the shipped rules, in front of `hosts`."""

    def __init__(self, prefix: Path, listen_port: int, peer_port: int, hosts: Sequence[Host]) -> None:
        self.binary = require_haproxy()
        self.prefix = prefix
        self.listen_port = listen_port
        self.peer_port = peer_port
        self.url = f"http://127.0.0.1:{listen_port}/"
        self.socket_path = prefix / "admin.sock"
        self.config_path = prefix / "haproxy.cfg"
        self.log_path = prefix / "haproxy.log"
        self.hosts = list(hosts)
        self.process: subprocess.Popen[bytes] | None = None

    def write_config(self) -> None:
        """The adapted config for the current hosts, where start and reload read it."""
        self.config_path.write_text(
            adapted_config(self.listen_port, self.peer_port, self.socket_path, self.hosts), encoding="utf-8"
        )

    def start(self) -> HaproxyProcess:
        """Check the config as lint-deploy does, then run it; returns once the port and the runtime API answer."""
        self.prefix.mkdir(parents=True, exist_ok=True)
        self.write_config()
        check = subprocess.run([self.binary, "-c", "-q", "-f", str(self.config_path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "-W", "-db", "-f", str(self.config_path)],
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        eventually(self._answering, timeout_s=15, interval_s=0.05)
        return self

    def _answering(self) -> None:
        """Raises until the listener accepts and the runtime API answers (for `eventually`)."""
        assert self.process is not None and self.process.poll() is None, self.log_tail()
        try:
            socket.create_connection(("127.0.0.1", self.listen_port), timeout=1).close()
            runtime_command(self.socket_path, "show info")
        except OSError as exc:
            raise AssertionError(f"haproxy not answering yet: {exc}") from None

    def worker_pid(self) -> int:
        """The current worker's pid: it changes with each reload."""
        info = runtime_command(self.socket_path, "show info")
        match = re.search(r"^Pid: (\d+)$", info, re.M)
        assert match, info
        return int(match.group(1))

    def peers_resynced(self) -> None:
        """The worker has finished its own resync (`show peers`: the section's flags have RESYNC_LOCAL and
        RESYNC_REMOTE, 0x3, set), about 5 s after it started when no other peer teaches it. A worker reloaded
        before that does not teach the next one, and the table is lost (docs/operations.md#several-hosts)."""
        answer = self.command("show peers")
        match = re.search(r"id=agui_peers disabled=\d+ flags=0x([0-9a-f]+)", answer)
        assert match and int(match.group(1), 16) & 0x3 == 0x3, f"peers not resynced yet: {answer[:300]}"

    def reload(self, hosts: Sequence[Host] | None = None) -> None:
        """Rewrite the config (new server lines, if given) and reload as an operator does (SIGUSR2 to the master),
        once the running worker can teach its tables to the next; returns once the new worker answers."""
        assert self.process is not None
        if hosts is not None:
            self.hosts = list(hosts)
        self.write_config()
        eventually(self.peers_resynced, timeout_s=15, interval_s=0.1)
        before = self.worker_pid()
        os.kill(self.process.pid, signal.SIGUSR2)

        def new_worker() -> None:
            assert self.process is not None and self.process.poll() is None, self.log_tail()
            try:
                assert self.worker_pid() != before
            except OSError as exc:
                raise AssertionError(f"runtime socket not answering: {exc}") from None

        eventually(new_worker, timeout_s=20, interval_s=0.05)

    def command(self, command: str) -> str:
        """One runtime API command on this HAProxy's socket."""
        return runtime_command(self.socket_path, command)

    def table(self, name: str = THREAD_TABLE) -> dict[str, str]:
        """A stick table's entries as {key: server name}."""
        return parse_table(self.command(f"show table {name}"))

    def log_tail(self) -> str:
        """The end of HAProxy's log, for assertion messages."""
        return self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""

    def stop(self) -> None:
        """SIGTERM to the whole process group (master and workers), SIGKILL if it lingers."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)
        self.process = None
