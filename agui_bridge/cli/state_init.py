"""`agui-bridge state init`: create the state directory private (0700) before the first start.

A directory made with a plain `mkdir` gets the umask's mode (0755 as a rule), which `doctor` fails and
every entry point warns about (docs/design.md#state-location). This command creates the directory and
its subdirectories 0700, owned by the account that will serve (this user, or `--owner` when run as
root for a service account). It is idempotent, and never loosens or silently repairs a directory that
exists already: one open to group or others, or owned by someone else, is refused with the fix, since
it may be shared on purpose (docs/operations.md#state-directory).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

#: The mode of the state directory and of every subdirectory the bridge creates in it.
DIR_MODE = 0o700
#: Exit status when an existing directory is refused (2 stays the status of an invalid configuration).
EXIT_REFUSED = 1


@dataclass(frozen=True)
class Owner:
    """Who must own the directories: a uid and gid, and the name to show."""

    uid: int
    gid: int
    name: str


class StateInitRefused(Exception):
    """An existing path cannot serve as (part of) a private state directory; nothing was changed."""

    def __init__(self, detail: str, fix: str) -> None:
        super().__init__(f"{detail}; fix: {fix}")
        self.detail = detail
        self.fix = fix


def state_subdirectories() -> tuple[str, ...]:
    """Every directory the bridge creates under the state root (each module's own constant)."""
    from agui_bridge.reattach.format import REPLAY_DIR
    from agui_bridge.store.store import THREADS_DIR
    from agui_bridge.worker.beacon import CANCELS_DIR, OWNERS_DIR

    return (THREADS_DIR, OWNERS_DIR, CANCELS_DIR, REPLAY_DIR)


def current_owner() -> Owner:
    import pwd

    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = f"uid {uid}"
    return Owner(uid, os.getgid(), name)


def owner_named(spec: str) -> Owner:
    """`USER` or `USER:GROUP` (names or numeric ids) as an Owner; ValueError names what is unknown."""
    import grp
    import pwd

    user, _, group = spec.partition(":")
    try:
        account = pwd.getpwnam(user) if not user.isdigit() else pwd.getpwuid(int(user))
    except KeyError:
        raise ValueError(f"--owner: no user {user!r}") from None
    gid = account.pw_gid
    if group:
        try:
            gid = grp.getgrnam(group).gr_gid if not group.isdigit() else grp.getgrgid(int(group)).gr_gid
        except KeyError:
            raise ValueError(f"--owner: no group {group!r}") from None
    return Owner(account.pw_uid, gid, account.pw_name)


def refusal(path: Path, owner: Owner) -> StateInitRefused | None:
    """Why an existing `path` cannot be (part of) the private state directory of `owner`, or None."""
    info = path.stat()
    if not stat.S_ISDIR(info.st_mode):
        return StateInitRefused(f"{path} exists and is not a directory", "remove it or choose another --state-dir")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        who = "group and others" if mode & 0o070 and mode & 0o007 else "others" if mode & 0o007 else "its group"
        return StateInitRefused(f"{path} is open to {who} (mode {mode:04o})", f"chmod 700 {path}")
    if info.st_uid != owner.uid:
        return StateInitRefused(
            f"{path} is owned by uid {info.st_uid}, not by {owner.name} (uid {owner.uid})",
            f"chown {owner.name} {path}, or run state init as the account that serves",
        )
    return None


def init_state_dir(root: Path, owner: Owner) -> list[Path]:
    """Create `root` and its subdirectories 0700 owned by `owner`; return the directories created.

    Every existing directory is checked before anything is created, so a refusal changes nothing.
    Missing parents are created as `mkdir -p` would (the umask's mode, this process's owner).
    Each directory is created relative to its parent's descriptor and its mode and owner set through its
    own, opened without following a symbolic link: the account that owns the root could otherwise swap a
    directory just created for a link, and root would chmod/chown the link's target.
    """
    subdirectories = state_subdirectories()
    if root.exists() or root.is_symlink():
        problem = refusal(root, owner)
        if problem is not None:
            raise problem
    for name in subdirectories:
        path = root / name
        if path.is_symlink():
            raise symlink_refusal(path)
        if path.exists():
            problem = refusal(path, owner)
            if problem is not None:
                raise problem
    created: list[Path] = []
    if not root.is_dir():  # an existing root (even `.`, which has no name in its parent) was checked above
        root.parent.mkdir(parents=True, exist_ok=True)
        parent_fd = os.open(root.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if make_private_directory(parent_fd, root, owner):
                created.append(root)
        finally:
            os.close(parent_fd)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)  # the operator's path: a link they chose is followed
    try:
        for name in subdirectories:
            if make_private_directory(root_fd, root / name, owner):
                created.append(root / name)
    finally:
        os.close(root_fd)
    return created


def symlink_refusal(path: Path) -> StateInitRefused:
    return StateInitRefused(f"{path} is a symbolic link", "remove it: state init creates the directory itself")


def make_private_directory(parent_fd: int, path: Path, owner: Owner) -> bool:
    """Create `path` (named relative to `parent_fd`) 0700 owned by `owner`; False when it existed already."""
    try:
        os.mkdir(path.name, DIR_MODE, dir_fd=parent_fd)
    except FileExistsError:
        return False
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
    except OSError:  # ELOOP or ENOTDIR: replaced since the mkdir
        raise symlink_refusal(path) from None
    try:
        os.fchmod(fd, DIR_MODE)  # mkdir's mode is filtered by the umask
        if (owner.uid, owner.gid) != (os.getuid(), os.getgid()):
            os.fchown(fd, owner.uid, owner.gid)
    finally:
        os.close(fd)
    return True
