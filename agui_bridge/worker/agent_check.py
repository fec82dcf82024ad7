"""HAProxy's agent check: the host's free stream capacity as a weight percentage (docs/design.md#agent-check).

HAProxy (`agent-check agent-port <port>`) connects, may send its `agent-send` text, reads one line and closes.
The bridge answers `<n>%\\n` and nothing else: the share of the host's stream places (the same count as
`--max-active-runs`: open streams, admissions under way and reattach followers, per worker) that are free,
rounded up so that a host with any free place never answers 0%, and 0% when the host is full or draining. It
never sends `ready`, `drain`, `maint`, `up` or `down`: HAProxy's `ready` clears an operator's DRAIN or MAINT
set through the runtime API, and health is the regular `check`'s business.

Where it runs (gunicorn only): a thread in the gunicorn master owns the listener and answers from a small
table in memory shared with the workers (`LoadBoard`): the master gives each worker a slot before it forks it
(`pre_fork`) and clears it when it reaps it (`child_exit`, also after a SIGKILL); each worker writes its own
counts there a few times a second. So no worker's hub ever serves an agent connection, the answer covers every
worker, and a dead worker's streams stop counting the moment the master reaps it. Stdlib only: the master
imports this before any worker is forked.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agui_bridge.worker.fork import after_fork_in_child

if TYPE_CHECKING:
    from agui_bridge.worker.host import WorkerHost

log = logging.getLogger(__name__)

#: One worker's slot: pid (0: free), places taken, its stream limit, draining (0/1).
SLOT = struct.Struct("=qqqq")
#: Slots beyond twice the workers (a reload runs old and new side by side): a late stop beside its replacement, TTIN.
SPARE_SLOTS = 16
#: How often a worker writes its counts into its slot (the answer lags the truth by at most this).
LOAD_PUBLISH_INTERVAL_S = 0.25
#: Agent connections served at once; past it the listener waits (the kernel's backlog holds the rest).
MAX_AGENT_CONNECTIONS = 32
#: Bytes of `agent-send` read (and discarded) per connection before it is closed anyway.
PEER_READ_CAP = 4096
#: A connection is closed this long after its answer was written, whatever the peer does.
CONNECTION_DEADLINE_S = 1.0
#: The same responder failure is logged at most this often (a new one at once).
FAILURE_LOG_INTERVAL_S = 60.0
#: The responder's pause after a failure, so one that repeats at once does not spin the master's CPU.
FAILURE_PAUSE_S = 0.1
#: The worker attribute the master sets before fork: the board and the worker's slot.
SLOT_ATTRIBUTE = "agui_load_slot"


@dataclass(frozen=True)
class WorkerLoad:
    """What one worker reports: stream places taken, its limit, and whether it is draining."""

    taken: int
    limit: int
    draining: bool = False


def free_capacity_percent(
    loads: Sequence[WorkerLoad], *, workers: int, worker_limit: int, stopping: bool = False
) -> int:
    """The host's free stream places as a share of its capacity, 0-100, rounded up (docs/design.md#agent-check).

    `workers` is how many workers the host runs; one that has not reported yet (starting, or respawned after a
    crash) counts with `worker_limit` places, none of them free. A draining worker is on its way out: it adds
    neither places nor free ones, and counts as one not reported when no replacement reports yet (so a host whose
    every worker drains answers 0, and a reload's old workers draining beside their replacements do not halve
    the answer). A host that is stopping answers 0. A host with any free place answers at least 1: HAProxy reads
    0% as "no new traffic" (the weight of a DRAIN)."""
    if stopping:
        return 0
    serving = [load for load in loads if not load.draining]
    missing = max(0, workers - len(serving))
    capacity = sum(max(0, load.limit) for load in serving) + missing * max(0, worker_limit)
    free = sum(max(0, load.limit - load.taken) for load in serving)
    if capacity <= 0 or free <= 0:
        return 0
    return min(100, -(-100 * free // capacity))


def agent_answer(percent: int) -> bytes:
    """The one line HAProxy reads: a weight relative to the server's configured weight."""
    return f"{max(0, min(100, percent))}%\n".encode("ascii")


class LoadBoard:
    """Per-worker counts in anonymous memory shared across fork: the master assigns and clears slots and reads
    them all; a worker writes only its own. A read racing a write may mix two reports of one worker: one
    answer is a little off, the next is right."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._memory = mmap.mmap(-1, SLOT.size * slots)  # MAP_SHARED | MAP_ANONYMOUS: the children see it
        self._assigned: dict[int, int] = {}  # slot -> worker age (the master's bookkeeping)

    def assign(self, age: int) -> int | None:
        """A free slot for the worker about to be forked (master), cleared; None when every slot is taken."""
        for slot in range(self.slots):
            if slot not in self._assigned:
                self._assigned[slot] = age
                SLOT.pack_into(self._memory, slot * SLOT.size, 0, 0, 0, 0)
                return slot
        return None

    def release(self, age: int) -> None:
        """The worker is gone (master, after reaping it): its streams no longer count."""
        for slot, owner in list(self._assigned.items()):
            if owner == age:
                SLOT.pack_into(self._memory, slot * SLOT.size, 0, 0, 0, 0)
                del self._assigned[slot]

    def write(self, slot: int, pid: int, load: WorkerLoad) -> None:
        """A worker's report into its own slot."""
        SLOT.pack_into(self._memory, slot * SLOT.size, pid, load.taken, load.limit, int(load.draining))

    def read(self) -> list[WorkerLoad]:
        """Every worker that has reported and has not been reaped."""
        loads = []
        for slot in range(self.slots):
            pid, taken, limit, draining = SLOT.unpack_from(self._memory, slot * SLOT.size)
            if pid:
                loads.append(WorkerLoad(taken, limit, bool(draining)))
        return loads


class AgentResponder:
    """One thread, one selector: accept, write the answer, shut the write side, read and discard what the peer
    sends until it closes (at most `PEER_READ_CAP` bytes, `CONNECTION_DEADLINE_S`), close. Reading the peer's
    `agent-send` before closing matters: closing over unread bytes resets the connection, and a reset may make
    HAProxy drop the line before it reads it. Nothing the peer sends is interpreted."""

    def __init__(
        self,
        listener: socket.socket,
        answer: Callable[[], bytes | None],
        keep_listening: Callable[[], bool] | None = None,
    ) -> None:
        """`keep_listening`, asked before every accept and at least every 0.5 s: once it says False the listener
        is closed for good (the connections already accepted still get their line and close)."""
        self.listener = listener
        self._answer = answer
        self._keep_listening = keep_listening
        self._listener_open = True
        listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(listener, selectors.EVENT_READ, None)
        self._wake_reader, self._wake_writer = socket.socketpair()  # `stop` wakes the selector at once
        self._selector.register(self._wake_reader, selectors.EVENT_READ, "wake")
        self._accepting = True
        self._connections: dict[socket.socket, tuple[float, int]] = {}  # connection -> (deadline, bytes read)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        after_fork_in_child(self._close_in_child)  # a worker must not hold the master's agent sockets

    @staticmethod
    def bind(host: str, port: int, *, beside_old_master: bool = False) -> socket.socket:
        """A listening socket on `host:port` (OSError when the port cannot be bound). It is bound with
        SO_REUSEPORT so that the new master of a USR2 upgrade can bind it beside the old one, as it takes over
        gunicorn's own socket. Linux shares such a port between every socket of one user that sets the option,
        so a port already held by anyone is refused first (a plain bind must succeed), unless this is that new
        master (`beside_old_master`)."""
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        if not beside_old_master:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(address)  # EADDRINUSE when another process listens there, SO_REUSEPORT or not
        listener = socket.socket(family, kind, proto)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if hasattr(socket, "SO_REUSEPORT"):
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            listener.bind(address)
            listener.listen(64)
        except BaseException:
            listener.close()
            raise
        return listener

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="agui-agent-check", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the thread and close every socket (tests; a master just exits)."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._close_all()

    def _serve(self) -> None:
        last_failure: tuple[str, float] | None = None  # (what failed, when it was logged)
        while not self._stop.is_set():
            try:
                self._serve_once()
            except Exception as exc:  # a thread that ended would leave HAProxy on the last weight for good
                failure, now = f"{type(exc).__name__}: {exc}", time.monotonic()
                if (
                    last_failure is None
                    or last_failure[0] != failure
                    or now - last_failure[1] >= FAILURE_LOG_INTERVAL_S
                ):
                    log.error("agent check: the responder failed and goes on", exc_info=True)
                    last_failure = (failure, now)
                self._stop.wait(FAILURE_PAUSE_S)  # a failure that repeats at once must not spin the master

    def _serve_once(self) -> None:
        """One pass: wait for the listener or a connection (at most 0.5 s), serve what is ready, close the
        connections whose deadline passed."""
        self._close_listener_if_done()
        now = time.monotonic()
        nearest = min((deadline for deadline, _ in self._connections.values()), default=now + 0.5)
        ready = self._selector.select(max(0.0, min(0.5, nearest - now)))
        try:
            for key, _ in ready:
                if key.data is None:
                    self._accept()
                elif key.data == "wake":
                    continue
                else:
                    self._read(key.fileobj)  # type: ignore[arg-type]
        finally:  # even after a failure: a connection that keeps failing still ends at its deadline
            now = time.monotonic()
            for connection, (deadline, _) in list(self._connections.items()):
                if now >= deadline:
                    self._close(connection)

    def _close_listener_if_done(self) -> None:
        if not self._listener_open or self._keep_listening is None or self._keep_listening():
            return
        if self._accepting:
            self._selector.unregister(self.listener)
            self._accepting = False
        self._listener_open = False
        self.listener.close()  # the kernel takes it out of the port's SO_REUSEPORT group

    def _accept(self) -> None:
        self._close_listener_if_done()
        if not self._listener_open:
            return
        try:
            connection, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # out of descriptors: do not spin on a listener that stays readable
            log.warning("agent check: accept failed", exc_info=True)
            time.sleep(0.1)
            return
        connection.setblocking(False)
        try:
            line = self._answer()
        except Exception:  # no answer is better than a wrong one: HAProxy keeps the weight it has
            log.warning("agent check: no answer", exc_info=True)
            line = None
        try:
            if line:
                connection.send(line)  # a few bytes into an empty send buffer: never partial
            connection.shutdown(socket.SHUT_WR)
        except OSError:
            connection.close()
            return
        self._connections[connection] = (time.monotonic() + CONNECTION_DEADLINE_S, 0)
        self._selector.register(connection, selectors.EVENT_READ, "peer")
        if len(self._connections) >= MAX_AGENT_CONNECTIONS and self._accepting:
            self._selector.unregister(self.listener)
            self._accepting = False

    def _read(self, connection: socket.socket) -> None:
        try:
            data = connection.recv(PEER_READ_CAP)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        deadline, seen = self._connections[connection]
        seen += len(data)
        if not data or seen > PEER_READ_CAP:
            self._close(connection)
        else:
            self._connections[connection] = (deadline, seen)

    def _close(self, connection: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(connection)
        self._connections.pop(connection, None)
        connection.close()
        if self._listener_open and not self._accepting and len(self._connections) < MAX_AGENT_CONNECTIONS:
            self._selector.register(self.listener, selectors.EVENT_READ, None)
            self._accepting = True

    def _close_all(self) -> None:
        for connection in list(self._connections):
            connection.close()
        self._connections.clear()
        self._selector.close()
        self.listener.close()
        self._wake_reader.close()
        self._wake_writer.close()

    def _close_in_child(self) -> None:
        """After fork, in the child: the thread is not there; close its copies of the sockets and the selector
        (no lock is taken here: one the master's thread held at the fork would never be released)."""
        self._thread = None
        self._close_all()


# --------------------------------------------------------------------------------------------- gunicorn glue


class StreamLoad(Protocol):
    """What a worker's service tells about its stream places (`runs/service.BridgeService.stream_load`)."""

    def stream_load(self) -> tuple[int, int, bool]: ...


#: Set in the gunicorn master once the responder listens; forked workers inherit it. An app built in a process
#: where it is not set (another WSGI host, gunicorn without the bridge's hooks) says the option does nothing.
_answered_by_master = False


def answered_here() -> bool:
    """True in a gunicorn master that serves the agent check, and in the workers it forked."""
    return _answered_by_master


class MasterAgentCheck:
    """The agent check of one gunicorn master: built with the settings, started by `when_ready`."""

    def __init__(self, host: str, port: int, worker_limit: int) -> None:
        self.host = host
        self.port = port
        self.worker_limit = worker_limit
        self.board: LoadBoard | None = None
        self.responder: AgentResponder | None = None
        self._listening_at_start = False

    def start(self, server: Any) -> None:
        """In the master, after gunicorn bound its own port and before it forks a worker. A port that cannot
        be bound stops the start, as gunicorn's own port does (status 1)."""
        global _answered_by_master
        try:
            # gunicorn's re-executed master (USR2) knows its parent, the old master, still running (master_pid).
            upgrading = bool(getattr(server, "master_pid", 0))
            listener = AgentResponder.bind(self.host, self.port, beside_old_master=upgrading)
        except OSError as exc:
            server.log.error("agui-bridge: the agent-check port %s:%d cannot be bound: %s", self.host, self.port, exc)
            raise SystemExit(1) from None
        # A reload (HUP) runs the old workers beside their replacements until they have drained.
        self.board = LoadBoard(2 * int(server.num_workers) + SPARE_SLOTS)
        self._listening_at_start = bool(server.LISTENERS)
        self.responder = AgentResponder(listener, lambda: self.answer(server), lambda: self.keep_listening(server))
        self.responder.start()
        _answered_by_master = True
        server.log.info("agui-bridge: answering HAProxy's agent check on %s:%d", self.host, self.port)

    def stopping(self, server: Any) -> bool:
        """gunicorn's stop closes its listeners first, before it signals the workers: from then on the host drains."""
        return self._listening_at_start and not server.LISTENERS

    def keep_listening(self, server: Any) -> bool:
        """False once this master stops while another master of a USR2 upgrade runs: both listen on the agent
        port (SO_REUSEPORT), and this one's 0% for its whole drain would land on about half of HAProxy's checks
        and flap the host's weight to 0. Closing the listener sends every check to the other master. A plain
        stop (no other master) keeps answering 0% (docs/design.md#agent-check)."""
        if not (self.stopping(server) and another_master_runs(server)):
            return True
        server.log.info("agui-bridge: this master stops and another one runs: the agent check is answered there only")
        return False

    def answer(self, server: Any) -> bytes:
        """The line for one agent connection, from the board and the master's own state."""
        assert self.board is not None
        stopping = self.stopping(server)
        loads = self.board.read()
        # A worker not reported yet has the limit its siblings report (the thread back-end's is lower).
        worker_limit = max((load.limit for load in loads), default=self.worker_limit)
        percent = free_capacity_percent(
            loads, workers=int(server.num_workers), worker_limit=worker_limit, stopping=stopping
        )
        return agent_answer(percent)

    def pre_fork(self, worker: Any) -> None:
        """Give the worker about to be forked its slot (it inherits the attribute)."""
        if self.board is None:
            return
        slot = self.board.assign(worker.age)
        if slot is None:
            worker.log.warning("agui-bridge: no agent-check slot left: this worker's streams are not counted")
            return
        setattr(worker, SLOT_ATTRIBUTE, (self.board, slot))

    def child_exit(self, worker: Any) -> None:
        if self.board is not None:
            self.board.release(worker.age)


def another_master_runs(server: Any) -> bool:
    """True in the old master of a USR2 upgrade whose new master runs (gunicorn's `reexec_pid`, reset when it
    reaps that master), and in the new master while the old one, its parent, still runs (`master_pid`: stopping
    the new master then backs the upgrade out)."""
    if getattr(server, "reexec_pid", 0):
        return True
    master_pid = getattr(server, "master_pid", 0)
    return bool(master_pid) and master_pid == os.getppid()


_master_check: MasterAgentCheck | None = None


def master_agent_check(host: str, port: int, worker_limit: int) -> MasterAgentCheck | None:
    """The master's one agent check, or None when it is off. gunicorn builds its hooks again on a reload (HUP)
    without calling `when_ready` again: once a check has started, the new hooks keep using it (slots for the new
    workers, the reaped ones released, the workers' reports) whatever the reloaded option says, since the
    listener is bound once and answers until the master exits; `reload_warning` tells the operator."""
    global _master_check
    if _master_check is not None and _master_check.board is not None:
        _master_check.worker_limit = worker_limit
        return _master_check
    if not port:
        return None
    if _master_check is None or (host, port) != (_master_check.host, _master_check.port):
        _master_check = MasterAgentCheck(host, port, worker_limit)
    _master_check.worker_limit = worker_limit
    return _master_check


def reload_warning(host: str, port: int) -> str | None:
    """What to tell the operator when a reload (HUP) asks for another agent check than the one running: the
    listener is bound once, in `when_ready`, which a reload does not call again. None when nothing changed."""
    running = _master_check if _master_check is not None and _master_check.board is not None else None
    if running is None:
        if not port:
            return None
        return (
            f"--agent-check-port {port} needs a restart: a reload does not start the agent check, "
            "HAProxy's agent gets no answer from this host until then"
        )
    if not port:
        return (
            "--agent-check-port is off in the reloaded configuration, but a reload does not stop the agent check: "
            f"it answers on {running.host}:{running.port} until a restart"
        )
    if (host, port) != (running.host, running.port):
        return (
            f"--agent-check-port/--host now name {host}:{port}, but a reload does not move the agent check: "
            f"it answers on {running.host}:{running.port} until a restart"
        )
    return None


def publish_worker_load(worker: Any, host: WorkerHost) -> None:
    """In a worker forked with a slot: write its counts there every `LOAD_PUBLISH_INTERVAL_S`, in a greenlet or
    a thread as the worker's runtime spawns it (each pass is a few reads under the registry's lock and one
    32-byte write: nothing that could hold the hub)."""
    assigned = getattr(worker, SLOT_ATTRIBUTE, None)
    service = host.loops.service
    if assigned is None or not hasattr(service, "stream_load"):
        return
    board, slot = assigned
    source: StreamLoad = service  # type: ignore[assignment]
    runtime, pid = host.runtime, os.getpid()

    def publish() -> None:
        while True:
            try:
                taken, limit, draining = source.stream_load()
                board.write(slot, pid, WorkerLoad(taken, limit, draining or not worker.alive))
            except Exception:  # a report skipped, not the reporting: the next one may succeed
                log.warning("agent check: this worker's report failed", exc_info=True)
            runtime.sleep(LOAD_PUBLISH_INTERVAL_S)

    runtime.spawn(publish, name="agent-load")
