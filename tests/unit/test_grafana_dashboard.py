"""deploy/grafana/agui-bridge.json is an importable Grafana dashboard (the live metric names are
checked against a running bridge in tests/e2e/test_dashboard_metrics.py)."""

from __future__ import annotations

import json
from typing import Any

from tests.support.harness import REPO_ROOT

DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "agui-bridge.json"


def load() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return document


def test_import_asks_for_a_prometheus_data_source_and_every_query_uses_it() -> None:
    dashboard = load()
    (source,) = dashboard["__inputs"]
    assert source["type"] == "datasource" and source["pluginId"] == "prometheus"
    reference = {"type": "prometheus", "uid": "${" + source["name"] + "}"}
    for panel in dashboard["panels"]:
        assert panel["datasource"] == reference
        assert all(target["datasource"] == reference for target in panel["targets"])


def test_panels_have_unique_ids_and_ref_ids_and_do_not_overlap() -> None:
    dashboard = load()
    assert dashboard["uid"] == "agui-bridge" and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        assert panel["type"] in ("timeseries", "stat") and panel["title"] and panel["targets"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(set(ref_ids)) == len(ref_ids)
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        columns, rows = range(grid["x"], grid["x"] + grid["w"]), range(grid["y"], grid["y"] + grid["h"])
        area = {(x, y) for x in columns for y in rows}
        assert not area & cells, f"panel {panel['title']!r} overlaps another"
        cells |= area


def test_queries_never_group_by_a_per_thread_or_per_run_label() -> None:
    for panel in load()["panels"]:
        for target in panel["targets"]:
            assert "thread" not in target["expr"] and "run_id" not in target["expr"]
