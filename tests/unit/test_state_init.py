"""`agui-bridge state init`: a private state directory that `doctor` accepts, created once, refused when unsafe."""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agui_bridge.cli import main
from agui_bridge.cli.doctor import check_state_dir
from agui_bridge.cli.state_init import EXIT_REFUSED, state_subdirectories

AS_ROOT = os.geteuid() == 0
#: The account the root-only tests create for (any account other than root would do).
SERVICE_ACCOUNT = "nobody"


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The umask a shell usually has: a plain mkdir would give 0755."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def init(state: Path, *extra: str) -> int:
    return main(["state", "init", "--state-dir", str(state), *extra])


def test_it_creates_the_directory_and_its_subdirectories_private(tmp_path: Path) -> None:
    state = tmp_path / "srv" / "state"
    assert init(state) == 0
    assert mode(state) == 0o700
    assert sorted(p.name for p in state.iterdir()) == sorted(state_subdirectories())
    assert all(mode(sub) == 0o700 and sub.stat().st_uid == os.getuid() for sub in state.iterdir())


def test_doctor_accepts_the_directory_it_creates(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert init(state) == 0
    failed = [check for check in check_state_dir(state) if not check.ok]
    assert failed == []


def test_a_second_run_changes_nothing_and_succeeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    assert init(state) == 0
    (state / "threads" / "kept.json").write_text("{}", encoding="utf-8")
    capsys.readouterr()
    assert init(state) == 0
    assert "already in place" in capsys.readouterr().out
    assert (state / "threads" / "kept.json").read_text(encoding="utf-8") == "{}"


def test_it_completes_a_private_directory_missing_subdirectories(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    assert init(state) == 0
    assert sorted(p.name for p in state.iterdir()) == sorted(state_subdirectories())


def test_a_directory_made_with_mkdir_is_refused_with_the_fix_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    state.mkdir()  # 0755 under the usual umask
    assert init(state) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert "open to group and others (mode 0755)" in err and f"chmod 700 {state}" in err
    assert mode(state) == 0o755 and list(state.iterdir()) == []


def test_a_subdirectory_open_to_its_group_is_refused_before_anything_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "threads").mkdir()
    os.chmod(state / "threads", 0o750)
    assert init(state) == EXIT_REFUSED
    assert "open to its group (mode 0750)" in capsys.readouterr().err
    assert [p.name for p in state.iterdir()] == ["threads"]


def test_a_file_in_its_place_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    state.write_text("", encoding="utf-8")
    assert init(state) == EXIT_REFUSED
    assert "is not a directory" in capsys.readouterr().err


def test_an_unknown_owner_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert init(tmp_path / "state", "--owner", "no-such-user-agui") == 2
    assert "no user 'no-such-user-agui'" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()


def test_owner_for_another_account_needs_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if AS_ROOT:  # the suite runs as root in CI: the command sees an ordinary account's ids instead
        monkeypatch.setattr(os, "getuid", lambda: 4242)
        monkeypatch.setattr(os, "geteuid", lambda: 4242)
    assert init(tmp_path / "state", "--owner", "root") == 2
    assert "only root" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()


@pytest.mark.skipif(not AS_ROOT, reason="creating for another account needs root")
def test_root_creates_it_for_the_service_account(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert init(state, "--owner", SERVICE_ACCOUNT) == 0
    uid = pwd.getpwnam(SERVICE_ACCOUNT).pw_uid
    for path in (state, *state.iterdir()):
        assert (path.stat().st_uid, mode(path)) == (uid, 0o700), path


@pytest.mark.skipif(not AS_ROOT, reason="a directory of another account needs root to make")
def test_a_directory_of_another_account_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    account = pwd.getpwnam(SERVICE_ACCOUNT)
    os.chown(state, account.pw_uid, account.pw_gid)
    assert init(state) == EXIT_REFUSED
    assert f"is owned by uid {account.pw_uid}" in capsys.readouterr().err


def test_a_symlink_planted_where_a_subdirectory_goes_is_refused_and_its_target_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    target = tmp_path / "shadow"
    target.mkdir(mode=0o700)
    (state / state_subdirectories()[0]).symlink_to(target)
    assert init(state) == EXIT_REFUSED
    assert "is a symbolic link" in capsys.readouterr().err


def test_a_subdirectory_swapped_for_a_symlink_after_its_creation_is_refused_and_its_target_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    target = tmp_path / "shadow"
    target.write_text("secret", encoding="utf-8")
    target.chmod(0o640)
    before = target.stat()
    swapped = state_subdirectories()[0]
    real_mkdir = os.mkdir

    def mkdir_then_swap(path: str | Path, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        """The owner of the state root racing the command: the new subdirectory becomes a link at once."""
        real_mkdir(path, mode, dir_fd=dir_fd)
        if Path(path).name == swapped:
            os.rmdir(path, dir_fd=dir_fd)
            os.symlink(target, path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", mkdir_then_swap)
    assert init(state) == EXIT_REFUSED
    assert "is a symbolic link" in capsys.readouterr().err
    after = target.stat()
    assert (stat.S_IMODE(after.st_mode), after.st_uid, after.st_gid) == (0o640, before.st_uid, before.st_gid)
