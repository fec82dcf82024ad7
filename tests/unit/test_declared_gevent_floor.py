"""The declared gevent range admits no release whose `gevent.queue.SimpleQueue` takes no size: the gevent
runtime builds every stream's queue as `SimpleQueue(maxsize)`, and before gevent 25.4.1 that name was the
stdlib's `_PySimpleQueue` (no arguments: a TypeError for every stream) (docs/design.md#stream-memory)."""

from __future__ import annotations

import configparser
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
#: The first gevent whose SimpleQueue is its own bounded queue (gevent's CHANGES, 25.4.1).
FIRST_SIZED_SIMPLE_QUEUE = "25.4.1"
#: The last release before it.
LAST_UNSIZED_SIMPLE_QUEUE = "24.11.1"


def declared_gevent() -> Requirement:
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg", encoding="utf-8")
    lines = [line.strip() for line in setup["options"]["install_requires"].splitlines() if line.strip()]
    (gevent,) = [Requirement(line) for line in lines if Requirement(line).name == "gevent"]
    return gevent


def test_the_declared_gevent_range_excludes_releases_whose_SimpleQueue_takes_no_size() -> None:
    specifier = declared_gevent().specifier
    assert not specifier.contains(LAST_UNSIZED_SIMPLE_QUEUE), f"gevent{specifier} admits an unsized SimpleQueue"
    assert specifier.contains(FIRST_SIZED_SIMPLE_QUEUE)
