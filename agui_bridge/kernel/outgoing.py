"""Every HTTP call the project makes goes through a session blind to the environment (docs/design.md#outgoing-calls).

`requests` honours HTTP(S)_PROXY, ALL_PROXY, NO_PROXY, netrc and REQUESTS_CA_BUNDLE by default: a proxy
variable left in a shell or a container would receive the bearer tokens the bridge, `doctor`, `chat` and
the test helpers send. Each of them talks to a URL its operator named, so none of them asks the
environment where to send it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import requests


def direct_session() -> requests.Session:
    """A `requests.Session` with `trust_env = False`: no proxy, netrc or CA bundle from the environment."""
    import requests

    session = requests.Session()
    session.trust_env = False
    return session
