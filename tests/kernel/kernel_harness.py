"""Start the real `iac-code a2a` 0.16.0 kernel offline, against the scripted LLM (tests/kernel/fake_llm.py).

The kernel lives in a virtual environment of its own (`scripts/install-kernel`; it cannot share ours).
Its HOME and config directory are private to the test, so no user configuration leaks in, and telemetry
is off (otherwise every stream close waits on an unreachable endpoint).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

from agui_bridge.demo.testing import free_port
from tests.kernel.fake_llm import MODEL

KERNEL_VERSION = "0.16.0"
READY_TIMEOUT_S = 60.0


def kernel_venv() -> Path:
    given = os.environ.get("AGUI_KERNEL_VENV")
    if given:
        return Path(given)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "agui-bridge" / f"kernel-venv-{KERNEL_VERSION}"


def kernel_bin() -> Path | None:
    venv = kernel_venv()
    binary = venv / "bin" / "iac-code"
    if (venv / ".agui-kernel-installed").exists() and os.access(binary, os.X_OK):
        return binary
    return None


def kernel_environment(home: Path, llm_base_url: str, allowed_root: Path) -> dict[str, str]:
    """What the kernel reads (LLM configuration, telemetry off, private HOME); no token."""
    config_dir = home / ".iac-code"
    config_dir.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", os.defpath),
        "LANG": "C.UTF-8",
        "IAC_CODE_CONFIG_DIR": str(config_dir),
        "IAC_CODE_PROVIDER": "openai_compatible",
        "IAC_CODE_BASE_URL": llm_base_url,
        "IAC_CODE_API_KEY": "scripted-key",
        "IAC_CODE_MODEL": MODEL,
        "DISABLE_TELEMETRY": "1",
        "IAC_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "IACCODE_A2A_ALLOWED_CWDS": str(allowed_root),
    }


@dataclass
class Kernel:
    url: str
    token: str
    process: subprocess.Popen[bytes]
    log_path: Path


def wait_healthy(url: str, token: str, process: subprocess.Popen[bytes], timeout_s: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"iac-code exited during startup (exit code {process.returncode})")
        with contextlib.suppress(requests.RequestException):
            if requests.get(url + "health", headers={"Authorization": f"Bearer {token}"}, timeout=1).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError("iac-code did not become healthy in time")


@contextlib.contextmanager
def running_kernel(binary: Path, home: Path, llm_base_url: str, allowed_root: Path) -> Iterator[Kernel]:
    port = free_port()
    token = "kernel-" + secrets.token_urlsafe(16)
    env = kernel_environment(home, llm_base_url, allowed_root)
    env["IACCODE_A2A_HTTP_TOKEN"] = token
    log_path = home / f"kernel-{port}.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [str(binary), "a2a", "--host", "127.0.0.1", "--port", str(port), "--thinking-exposure", "all"],
            env=env,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_healthy(url, token, process)
        yield Kernel(url, token, process, log_path)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
