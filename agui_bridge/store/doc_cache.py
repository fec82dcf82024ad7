"""The worker's memory of the thread documents it wrote itself (docs/design.md#state-cache).

A run's commit points (admission, identity, release) each re-read the thread file under its lock. When
that file is still the one this worker wrote last, reading it again (open, read, parse, and the schema
check, about 0.2 ms of the hub each time) only returns what the worker already has. So every commit
remembers the document with the signature the writer read from the file it renamed into place
(`store.writer.file_signature`: device, inode, size, modification time to the nanosecond, mode); a
transaction whose `lstat` of the path, taken under the lock, shows the same signature works on a copy of
it instead. Anything else (another worker wrote, the file was removed or replaced, a mode changed) reads
and validates the file as before, so no decision is ever taken on a document other than the one on disk.

Bounded (least recently used, by count); a forked child starts empty; callers get and give copies, so a
mutation of a returned state never reaches the remembered one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from agui_bridge.store.model import ThreadState, copy_state, stored_copy
from agui_bridge.store.writer import FileSignature
from agui_bridge.worker.fork import after_fork_in_child

__all__ = ["BYTE_BUDGET", "CAPACITY", "DocumentCache"]

#: Documents remembered per worker: enough that a burst of 5,000 runs still finds its own admission
#: when its identity commit comes (a new thread's record is about 1.5 KiB of objects) ...
CAPACITY = 8192
#: ... and at most this many bytes of the files they were written to (objects take about three times
#: that), so threads with long histories cannot make the cache large.
BYTE_BUDGET = 8 << 20


_SIZE = 2  # st_size in a `FileSignature`


class DocumentCache:
    def __init__(self, capacity: int = CAPACITY, byte_budget: int = BYTE_BUDGET) -> None:
        if capacity < 0 or byte_budget < 0:
            raise ValueError("capacity and byte_budget must be >= 0")
        self._capacity = capacity
        self._byte_budget = byte_budget
        self._bytes = 0
        self._guard = threading.Lock()  # dict updates only, never held across a blocking call
        self._entries: OrderedDict[str, tuple[FileSignature, ThreadState]] = OrderedDict()
        after_fork_in_child(self._forget_after_fork)

    def __len__(self) -> int:
        return len(self._entries)

    def _forget_after_fork(self) -> None:
        """In a forked child (docs/design.md#fork-registry): the parent's files may have changed since,
        and its guard may have been copied while held."""
        self._guard, self._entries, self._bytes = threading.Lock(), OrderedDict(), 0

    def get(self, key: str, signature: FileSignature) -> ThreadState | None:
        """A copy of the document remembered for `key` if it was written with `signature`, else None."""
        with self._guard:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] != signature:
                self._forget(key)  # the file changed since: the memory is useless now
                return None
            self._entries.move_to_end(key)
        return copy_state(entry[1])

    def put(self, key: str, signature: FileSignature | None, state: ThreadState) -> None:
        """Remember a copy of `state` as the file written with `signature` (None: forget `key`)."""
        if signature is None or self._capacity == 0 or signature[_SIZE] > self._byte_budget:
            self.drop(key)
            return
        remembered = stored_copy(state)  # what reading the file back would give
        with self._guard:
            self._forget(key)
            self._entries[key] = (signature, remembered)
            self._bytes += signature[_SIZE]
            while len(self._entries) > self._capacity or self._bytes > self._byte_budget:
                self._forget(next(iter(self._entries)))

    def drop(self, key: str) -> None:
        with self._guard:
            self._forget(key)

    def _forget(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry[0][_SIZE]
