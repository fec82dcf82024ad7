"""Per-run usage aggregation grouped by (provider, model) in first-seen order (docs/design.md#terminal-event)."""

from __future__ import annotations

from typing import Any

from agui_bridge.projection.values import as_count, non_empty_str

_COUNTERS = ("inputTokens", "outputTokens", "totalTokens", "cachedInputTokens")


class UsageTotals:
    __slots__ = ("_groups",)

    def __init__(self) -> None:
        self._groups: dict[tuple[str | None, str | None], dict[str, int]] = {}

    def record(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        key = (non_empty_str(usage.get("provider")), non_empty_str(usage.get("model")))
        group = self._groups.setdefault(key, dict.fromkeys(_COUNTERS, 0))
        for name in _COUNTERS:
            group[name] += as_count(usage.get(name))

    def entries(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for (provider, model), counters in self._groups.items():
            entry: dict[str, Any] = {}
            if provider is not None:
                entry["provider"] = provider
            if model is not None:
                entry["model"] = model
            entry.update(counters)
            out.append(entry)
        return out
