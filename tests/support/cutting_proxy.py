"""A loopback TCP proxy that cuts the first connection whose answer contains a marker: how reattach tests
drop a live stream.

It stands between a client and the bridge: bytes pass through unchanged, except that the first
connection whose response bytes contain `cut_at` (and, if given, whose request contains `request_has`)
is closed on both sides right after those bytes, as a proxy idle timeout or a network switch would.
Later connections (the reattach) pass untouched, except that with `refuse_first_reattach` the proxy answers
the first reattach (`GET .../events`) itself with that raw HTTP response, as a bridge at its follower cap or a
proxy between deploys would, without passing it upstream.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from urllib.parse import urlsplit


class CuttingProxy:
    def __init__(
        self, upstream_url: str, cut_at: bytes, request_has: bytes = b"", refuse_first_reattach: bytes = b""
    ) -> None:
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.cut_at = cut_at
        self.request_has = request_has
        self.cuts = 0
        self.connections = 0
        #: the bytes each connection sent upstream (request line, headers, body), in connection order
        self.requests: list[bytearray] = []
        self.refuse_first_reattach = refuse_first_reattach
        self.refused = 0
        #: (time.monotonic(), request head) of each connection once its head was read (with refuse_first_reattach)
        self.heads: list[tuple[float, bytes]] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/"
        self._lock = threading.Lock()
        self._stopped = False

    def serve(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        request = bytearray()
        with self._lock:
            self.connections += 1
            self.requests.append(request)
        if self.refuse_first_reattach and not self._refused_one(client, request):
            return
        upstream = socket.create_connection(self.upstream)
        if request:
            upstream.sendall(request)
        threading.Thread(target=self._pump_up, args=(client, upstream, request), daemon=True).start()
        seen = b""
        try:
            while chunk := upstream.recv(65536):
                with self._lock:
                    wanted = self.request_has in request
                    cutting = self.cuts == 0 and wanted and self.cut_at in seen + chunk
                    if cutting:
                        self.cuts += 1
                if cutting:
                    end = (seen + chunk).index(self.cut_at) + len(self.cut_at) - len(seen)
                    client.sendall(chunk[: max(end, 0)])
                    break
                client.sendall(chunk)
                seen = (seen + chunk)[-len(self.cut_at) - 65536 :]
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _refused_one(self, client: socket.socket, request: bytearray) -> bool:
        """Reads the request head; answers the first reattach itself (False: done) or lets it through (True)."""
        try:
            while b"\r\n\r\n" not in request and (chunk := client.recv(65536)):
                request += chunk
        except OSError:
            pass
        with self._lock:
            self.heads.append((time.monotonic(), bytes(request.split(b"\r\n\r\n", 1)[0])))
            reattach = request.startswith(b"GET ") and b"/events" in request.split(b"\r\n", 1)[0]
            refuse = reattach and self.refused == 0
            if refuse:
                self.refused += 1
        if not refuse:
            return True
        with suppress(OSError):
            client.sendall(self.refuse_first_reattach)
            client.shutdown(socket.SHUT_RDWR)
        client.close()
        return False

    @staticmethod
    def _pump_up(client: socket.socket, upstream: socket.socket, request: bytearray) -> None:
        try:
            while chunk := client.recv(65536):
                request += chunk
                upstream.sendall(chunk)
        except OSError:
            pass

    def close(self) -> None:
        self._stopped = True
        self._listener.close()


@contextmanager
def cutting_proxy(
    upstream_url: str, cut_at: bytes, request_has: bytes = b"", refuse_first_reattach: bytes = b""
) -> Iterator[CuttingProxy]:
    proxy = CuttingProxy(upstream_url, cut_at, request_has, refuse_first_reattach)
    threading.Thread(target=proxy.serve, daemon=True).start()
    try:
        yield proxy
    finally:
        proxy.close()
