"""Where the reattach route reads rosInvocationId: the header first, else the query (docs/design.md#reattach)."""

from __future__ import annotations

import pytest

from agui_bridge.web.reattach_api import ros_invocation_id_from


@pytest.mark.parametrize(
    ("headers", "args", "expected"),
    [
        ({"Ros-Invocation-Id": "ros-h"}, {}, "ros-h"),
        ({}, {"rosInvocationId": "ros-q"}, "ros-q"),
        ({"Ros-Invocation-Id": "ros-h"}, {"rosInvocationId": "ros-q"}, "ros-h"),  # the header wins
        ({"Ros-Invocation-Id": ""}, {"rosInvocationId": "ros-q"}, "ros-q"),  # an empty header is no header
        ({}, {}, None),
        # WSGI hands header bytes over as Latin-1: UTF-8 bytes are read back as UTF-8.
        ({"Ros-Invocation-Id": "ros-é".encode().decode("latin-1")}, {}, "ros-é"),
        ({"Ros-Invocation-Id": "ros-\xe9"}, {}, "ros-\xe9"),  # not UTF-8: kept as sent
    ],
)
def test_the_header_wins_over_the_query_form(
    headers: dict[str, str], args: dict[str, str], expected: str | None
) -> None:
    assert ros_invocation_id_from(headers, args) == expected
