"""Following one run across dropped connections, for `agui-bridge chat` (docs/design.md#reattach).

A run outlives its connection: the bridge keeps it going for its reattach window and serves
`GET extensions/iac-code/v1/threads/{threadId}/runs/{runId}/events` (`Ros-Invocation-Id` header) with
`Last-Event-ID: <n>` (docs/reattach.md#reattaching-from-a-client). The follower reads a run's stream; when the
connection drops or the body ends before the terminal event, it says so on stderr, waits (bounded
retries, doubling backoff, reset by any progress) and reattaches after the last id it has seen, and it
drops every event whose id it has already passed, so the caller sees each event once and in order.
A 429, 502, 503 or 504 is retried after the longer of its `Retry-After` (at most a minute) and the backoff;
any other HTTP refusal of a reattach (unknown run, replay no longer kept, bad token) is final.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urljoin

from agui_bridge.chat.sse import TERMINAL_EVENTS, ChatUsageError, decode_event, describe_http_error, parse_event_id
from agui_bridge.protocol.headers import ROS_INVOCATION_ID_HEADER, ROS_INVOCATION_ID_QUERY
from agui_bridge.protocol.sse_parser import SseParser

if TYPE_CHECKING:
    import requests

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 300.0  # far above the heartbeat interval: a silent connection this long is dead
DEFAULT_RETRIES = 5
MAX_RETRIES = 20
#: Answers that say "later", not "never": rate limit, the follower cap, a proxy's bad gateway or timeout.
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
#: The longest `Retry-After` honoured as given: a larger one is waited this long instead.
MAX_RETRY_AFTER_S = 60.0


@dataclass(frozen=True)
class RunRef:
    """What the reattach route needs to find a run."""

    thread_id: str
    run_id: str
    ros_invocation_id: str


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = DEFAULT_RETRIES
    first_delay_s: float = 0.5
    max_delay_s: float = 8.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before reattach attempt `attempt` (1-based): 0.5, 1, 2, 4, 8, 8, ..."""
        return float(min(self.max_delay_s, self.first_delay_s * 2 ** max(0, attempt - 1)))


#: Said once on stderr when the bridge never saw the header (a bridge from before it, or a proxy that strips
#: it): the follower then puts the run's credential in the URL, where servers and proxies may log it.
QUERY_FALLBACK_WARNING = (
    f"warning: the bridge did not receive the {ROS_INVOCATION_ID_HEADER} header (an older bridge, or a proxy "
    f"that strips it); sending rosInvocationId in the URL instead, where servers and proxies may log it"
)


def retry_after_s(value: str | None, now: float) -> float | None:
    """Seconds a `Retry-After` value (delay-seconds or an HTTP date, `now` in epoch seconds) asks to wait,
    at most MAX_RETRY_AFTER_S; None when absent or unreadable."""
    text = (value or "").strip()
    if text.isascii() and text.isdigit():
        return min(MAX_RETRY_AFTER_S, float(text))
    try:
        at = parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return min(MAX_RETRY_AFTER_S, max(0.0, at - now))


def events_url(base_url: str, ref: RunRef, *, ros_in_query: bool = False) -> str:
    """The reattach route for `ref` under the bridge's base URL (ids are path-quoted, nothing expanded);
    `ros_in_query` adds `?rosInvocationId=` for a bridge that predates the header."""
    path = f"extensions/iac-code/v1/threads/{quote(ref.thread_id, safe='')}/runs/{quote(ref.run_id, safe='')}/events"
    url = urljoin(base_url, path)
    return url + "?" + urlencode({ROS_INVOCATION_ID_QUERY: ref.ros_invocation_id}) if ros_in_query else url


def _asks_for_ros_invocation_id(response: requests.Response) -> bool:
    """A 400 naming `/rosInvocationId`: a bridge from before the header, which reads only the query."""
    try:
        return response.status_code == 400 and response.json()["error"]["field"] == "/rosInvocationId"
    except (ValueError, KeyError, TypeError):
        return False


class RunFollower:
    """Yields a run's AG-UI events once each until its terminal event, reattaching when cut."""

    def __init__(
        self,
        http: requests.Session,
        base_url: str,
        ref: RunRef,
        headers: Callable[[], dict[str, str]],
        notify: Callable[[str], None],
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.http = http
        self.base_url = base_url
        self.ref = ref
        self.headers = headers
        self.notify = notify
        self.policy = policy or RetryPolicy()
        self.sleep = sleep
        #: the id of the last event handed to the caller (None before the first numbered one)
        self.last_id: int | None = None
        self.reattaches = 0
        self._unnumbered = 0
        self._ros_in_query = False  # set once a bridge refused the header form
        self._retry_after_s: float | None = None  # what the last "later" answer asked to wait

    def follow(self, first: requests.Response | None) -> Iterator[dict[str, Any]]:
        """`first` is the open POST answer, or None to attach to a run started elsewhere."""
        import requests

        response = first
        failures = 0
        why = ""
        while True:
            if response is None:
                response, why = self._attach()
            if response is not None:
                progressed = False
                broke: str | None = None
                try:
                    for event in self._read(response):
                        progressed = True
                        yield event
                        if event["type"] in TERMINAL_EVENTS:
                            return
                except requests.RequestException as exc:
                    broke = type(exc).__name__
                finally:
                    response.close()
                if progressed:
                    failures = 0
                why = f"the connection dropped ({broke})" if broke else "the stream ended without a terminal event"
            failures += 1
            response = None
            self._give_up_unless_retry(why, failures)
            delay = max(self.policy.delay(failures), self._retry_after_s or 0.0)
            self._retry_after_s = None
            self.notify(
                f"{why} after event {self.last_id or 0}; reattaching to run {self.ref.run_id} "
                f"in {delay:g}s (attempt {failures}/{self.policy.attempts})"
            )
            self.sleep(delay)

    def _give_up_unless_retry(self, why: str, failures: int) -> None:
        if self.policy.attempts <= 0:
            raise ChatUsageError(why)
        if self._unnumbered:
            raise ChatUsageError(f"{why}, and the server does not number its events: cannot reattach")
        if failures > self.policy.attempts:
            raise ChatUsageError(f"{why}; gave up after {self.policy.attempts} reattach attempts")

    def _read(self, response: requests.Response) -> Iterator[dict[str, Any]]:
        parser = SseParser()  # never closed: a record cut mid-way is dropped, a reattach replays it whole
        for chunk in response.iter_content(chunk_size=None):
            for record in parser.feed(chunk):
                position = parse_event_id(record.event_id) if record.event_id is not None else None
                if position is None:
                    self._unnumbered += 1
                elif self.last_id is not None and position <= self.last_id:
                    continue  # seen before the cut: a replay starts at or before our cursor
                else:
                    self.last_id = position
                yield decode_event(record.data)

    def _attach(self) -> tuple[requests.Response | None, str]:
        """An open reattach stream, or (None, why) when worth retrying; a final 4xx raises."""
        import requests

        headers: dict[str, str | bytes] = {**self.headers(), "Accept": "text/event-stream"}
        headers.pop("Content-Type", None)
        if self.last_id is not None:
            headers["Last-Event-ID"] = str(self.last_id)
        if not self._ros_in_query:
            headers[ROS_INVOCATION_ID_HEADER] = self.ref.ros_invocation_id.encode("utf-8")  # the bridge reads UTF-8
        url = events_url(self.base_url, self.ref, ros_in_query=self._ros_in_query)
        try:
            response = self.http.get(url, headers=headers, stream=True, timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
        except requests.RequestException as exc:
            return None, f"cannot reach the bridge ({type(exc).__name__})"
        if not self._ros_in_query and _asks_for_ros_invocation_id(response):
            response.close()
            self._ros_in_query = True
            self.notify(QUERY_FALLBACK_WARNING)
            return self._attach()
        if response.status_code == 200:
            if self.last_id is not None or self.reattaches:
                self.notify(f"reattached to run {self.ref.run_id} after event {self.last_id or 0}")
            self.reattaches += 1
            return response, ""
        with response:
            described = describe_http_error(response)
        if response.status_code in RETRYABLE_STATUSES:
            self._retry_after_s = retry_after_s(response.headers.get("Retry-After"), time.time())
            return None, f"the bridge answered {described}"
        raise ChatUsageError(f"cannot reattach to run {self.ref.run_id}: {described}")
