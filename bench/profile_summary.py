"""Summarise py-spy `--format raw` (collapsed stacks) output: top self / inclusive costs (bench only).

Usage: python bench/profile_summary.py FILE [--top 25]
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path
from typing import Any

_LINE = re.compile(r":\d+\)$")


def _frame_name(frame: str) -> str:
    return _LINE.sub(")", frame.strip())


def _package(frame: str) -> str:
    match = re.search(r"\(([^()]*)\)$", frame)
    path = match.group(1) if match else frame
    parts = [p for p in path.split("/") if p]
    if not parts:
        return "?"
    if parts[0] == "agui_bridge" and len(parts) > 2:
        return "agui_bridge." + parts[1]
    if parts[0] == "agui_bridge":
        return "agui_bridge"
    if parts[0] == "iac_code" and len(parts) > 2:
        return "iac_code." + parts[1]
    return parts[0].removesuffix(".py")


def summarise(path: Path, top: int = 25, thread: int | None = None) -> dict[str, Any]:
    """`thread`: keep only that OS thread's stacks (py-spy `--threads` output), e.g. the gevent hub's."""
    self_cost: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    packages: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip() or " " not in line:
            continue
        stack, _, count = line.rpartition(" ")
        try:
            n = int(count)
        except ValueError:
            continue
        frames = [_frame_name(f) for f in stack.split(";") if f]
        if frames and frames[0].startswith("thread ("):
            if thread is not None and not frames[0].startswith(f"thread ({thread})"):
                continue
            frames = frames[1:]
        elif thread is not None:
            continue
        if not frames:
            continue
        total += n
        self_cost[frames[-1]] += n
        packages[_package(frames[-1])] += n
        for frame in set(frames):
            inclusive[frame] += n

    def table(counter: collections.Counter[str], k: int) -> list[dict[str, Any]]:
        return [{"pct": round(100 * n / total, 1), "samples": n, "frame": f} for f, n in counter.most_common(k)]

    return {
        "samples": total,
        "self": table(self_cost, top),
        "inclusive": table(inclusive, top + 15),
        "self_by_package": table(packages, 15),
    }


def as_text(summary: dict[str, Any], title: str) -> str:
    lines = [f"# {title}", f"samples: {summary['samples']}", "", "## self time by package (leaf frame)"]
    lines += [f"{r['pct']:5.1f}%  {r['frame']}" for r in summary["self_by_package"]]
    lines += ["", "## top self time (leaf frame)"]
    lines += [f"{r['pct']:5.1f}%  {r['frame']}" for r in summary["self"]]
    lines += ["", "## top inclusive time (frame anywhere on the stack)"]
    lines += [f"{r['pct']:5.1f}%  {r['frame']}" for r in summary["inclusive"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--thread", type=int, default=None, help="only this OS thread id (py-spy --threads)")
    args = parser.parse_args()
    print(as_text(summarise(Path(args.file), args.top, args.thread), args.file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
