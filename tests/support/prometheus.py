"""Reading the bridge's /metrics page (Prometheus text format) in tests."""

from __future__ import annotations

import re


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format (0 when absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = re.escape(name) + (r"\{" + re.escape(wanted) + r"\}" if labels else "") + r" ([0-9.e+-]+)$"
    match = re.search(pattern, text, re.M)
    return float(match.group(1)) if match else 0.0
