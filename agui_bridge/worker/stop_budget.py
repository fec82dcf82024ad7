"""How long a stop may take: the one budget every supervisor setting and document derives from.

On SIGTERM the workers drain for up to `graceful_timeout` (docs/design.md#shutdown-drain); then
`agui-bridge serve` stops its managed A2A child (SIGTERM, then SIGKILL, each waited for up to
`MANAGED_CHILD_WAIT_S`). A supervisor that sends SIGKILL earlier cuts live streams with no terminal
event and no cleanup. Stdlib only: imported by the gunicorn master.
"""

from __future__ import annotations

#: `ManagedUpstream.stop` waits this long after its SIGTERM, and again after its SIGKILL.
MANAGED_CHILD_WAIT_S = 5
#: Room for the master's own exit after its workers, and for a loaded host.
STOP_SLACK_S = 20
#: What a supervisor allows beyond `graceful_timeout`: the managed child's stop and the slack.
STOP_BUDGET_EXTRA_S = 2 * MANAGED_CHILD_WAIT_S + STOP_SLACK_S


def stop_budget_s(graceful_timeout_s: int) -> int:
    """Seconds between a supervisor's SIGTERM and its SIGKILL (systemd TimeoutStopSec, Docker --stop-timeout,
    compose stop_grace_period, Kubernetes terminationGracePeriodSeconds): 60 for the default 30."""
    return graceful_timeout_s + STOP_BUDGET_EXTRA_S
