"""Console rendering case: how long a 20,000-delta answer takes to show in the web console, and whether the
page stays responsive meanwhile (docs/design.md#web-console).

One bridge (`agui-bridge serve --workers 1`, console on, a bearer token) on the demo agent, and headless
Chromium driven by Selenium (the browser test tier's set-up). Two answers, each 20,000 text deltas by default:

* `plain`: the demo's `[LONG n]` turn (words, one paragraph);
* `markdown`: the demo's `[ECHO]` turn echoing a Markdown document (headings, lists, tables, inline code,
  yaml fences) of 7 x n characters, so it arrives as n deltas of 7 characters.

For each: the time from the click on Send to the first rendering, to the end of the run (Send enabled
again) and to the final rendering; the number of renderings of the message (the console re-renders at
most every 250 ms); and, from a probe injected into the page, the longest main-thread stall (lateness
of a 50 ms interval timer) and the long tasks Chromium reports (count, longest, total). The browser
test (tests/e2e/test_console_browser.py) only checks that such an answer completes; numbers live here.

The budget each answer is judged against (`budget`, a table in the report): it renders completely (the final
rendering is reported), the final rendering follows the run's end within 1 s, the first rendering comes
within 1 s of Send, and the main thread never stalls longer than 0.5 s (the page stays usable while it streams).

    bash bench/run --console-render [--deltas 20000] [--kinds plain,markdown] [--date YYYY-MM-DD]

writes bench/results/<date>-console-render.json and .md. Run by hand, never part of the tests.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import harness as h

TOKEN = "bench-console-token"
KINDS = ("plain", "markdown")
RUN_TIMEOUT_S = 600.0
#: The time budget of one answer: the longest main-thread stall, the final rendering after the run's end and
#: the first rendering after Send.
MAX_STALL_BUDGET_MS = 500.0
FINAL_AFTER_END_BUDGET_S = 1.0
FIRST_RENDER_BUDGET_S = 1.0

#: Counts main-thread stalls (a 50 ms timer's lateness) and Chromium's long tasks; installed by the bench
#: through the driver (not part of the console).
PROBE = """
window.__bench = { maxLateMs: 0, ticks: 0, longTasks: [] };
let last = performance.now();
window.__bench.timer = setInterval(() => {
  const now = performance.now();
  window.__bench.maxLateMs = Math.max(window.__bench.maxLateMs, now - last - 50);
  window.__bench.ticks += 1;
  last = now;
}, 50);
try {
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) window.__bench.longTasks.push(entry.duration);
  }).observe({ type: "longtask", buffered: false });
} catch (error) { window.__bench.longTasks = null; }
"""


def markdown_document(chars: int) -> str:
    """A Markdown answer of about `chars` characters, built from an IaC agent's usual parts."""
    sys.path.insert(0, str(h.REPO_ROOT))
    from agui_bridge.demo.scenarios import MARKDOWN_ANSWER

    parts: list[str] = []
    size = 0
    index = 0
    while size < chars:
        index += 1
        part = MARKDOWN_ANSWER.replace("## A VPC template", f"## Part {index}")
        parts.append(part)
        size += len(part) + 1
    return "\n".join(parts)[:chars]


def chromium_driver() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium = os.environ.get("AGUI_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = os.environ.get("AGUI_CHROMEDRIVER") or shutil.which("chromedriver")
    if not chromium or not chromedriver:
        raise SystemExit("console_render: chromium and chromedriver are needed (bash scripts/install-browser)")
    options = Options()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,1100", "--no-first-run", "--disable-extensions"):  # fmt: skip
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(chromedriver), options=options)


def wait_until(predicate: Any, timeout_s: float, what: str) -> float:
    """Polls `predicate` every 20 ms; returns the monotonic time it first held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(0.02)
    raise RuntimeError(f"console_render: timed out waiting for {what}")


def one_answer(driver: Any, bridge_url: str, workspace: Path, kind: str, deltas: int) -> dict[str, Any]:
    driver.get(f"{bridge_url}console?cwd={quote(str(workspace), safe='')}")
    wait_until(lambda: driver.find_elements("css selector", "#thread-status[data-state='new']"), 30, "the console")
    driver.execute_script("sessionStorage.setItem('agui-console:token', arguments[0])", TOKEN)
    text = f"[LONG {deltas}]" if kind == "plain" else "[echo] " + markdown_document(7 * deltas)
    driver.execute_script("document.getElementById('message').value = arguments[0]", text)
    driver.execute_script(PROBE)
    body = "#transcript .msg.assistant .body"
    start = time.monotonic()
    driver.find_element("css selector", "#send").click()
    first = wait_until(lambda: driver.find_elements("css selector", body), RUN_TIMEOUT_S, "the first rendering")
    ended = wait_until(
        lambda: driver.find_element("css selector", "#send").is_enabled(), RUN_TIMEOUT_S, "the end of the run"
    )
    final = wait_until(
        lambda: driver.find_elements("css selector", f"{body}[data-rendered='final']"), RUN_TIMEOUT_S, "final rendering"
    )
    probe = driver.execute_script("clearInterval(window.__bench.timer); return window.__bench")
    rendered = driver.execute_script(
        "const b = document.querySelector(arguments[0]); return [b.dataset.renders, b.textContent.length]", body
    )
    long_tasks = probe["longTasks"]
    return {
        "kind": kind,
        "deltas": deltas,
        "answer_chars": rendered[1],
        "first_render_s": round(first - start, 3),
        "run_end_s": round(ended - start, 3),
        "final_render_s": round(final - start, 3),
        "renders": int(rendered[0] or 0),
        "max_main_thread_stall_ms": round(probe["maxLateMs"], 1),
        "long_tasks": None
        if long_tasks is None
        else {
            "count": len(long_tasks),
            "max_ms": round(max(long_tasks, default=0.0), 1),
            "total_ms": round(sum(long_tasks), 1),
        },
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    driver = None
    load_start = h.loadavg()
    with h.bridge_on_upstream(
        "console",
        h.Demo,
        keep_tmp=args.keep_tmp,
        extra_env={"IAC_CODE_AGUI_CONSOLE": "1", "IAC_CODE_AGUI_AUTH_TOKEN": TOKEN},
    ) as started:
        try:
            driver = chromium_driver()
            cases = []
            for kind in args.kinds.split(","):
                h.log(f"console_render: {kind}, {args.deltas} deltas")
                cases.append(one_answer(driver, started.bridge.url, started.workspace, kind, args.deltas))
                h.log(f"console_render: {cases[-1]}")
            return {
                "meta": {
                    "date": args.date,
                    "command": f"bash bench/run --console-render --deltas {args.deltas} --kinds {args.kinds}",
                    "cpus": os.cpu_count(),
                    "loadavg": [load_start, h.loadavg()],
                    "render_interval_ms": 250,
                },
                "cases": cases,
            }
        finally:
            if driver is not None:
                driver.quit()


def budget(case: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(what, goal, measured, met) of one answer against the console's time budget."""
    final_s, end_s = case.get("final_render_s"), case.get("run_end_s")
    after_end = None if final_s is None or end_s is None else round(final_s - end_s, 3)
    stall = case.get("max_main_thread_stall_ms")
    first = case.get("first_render_s")
    return [
        ("renders completely", "final rendering reported", "yes" if final_s is not None else "no", final_s is not None),
        (
            "final rendering after the run's end",
            f"<= {FINAL_AFTER_END_BUDGET_S} s",
            f"{after_end} s",
            after_end is not None and after_end <= FINAL_AFTER_END_BUDGET_S,
        ),
        (
            "longest main-thread stall",
            f"<= {MAX_STALL_BUDGET_MS:.0f} ms",
            f"{stall} ms",
            stall is not None and stall <= MAX_STALL_BUDGET_MS,
        ),
        (
            "first rendering after Send",
            f"<= {FIRST_RENDER_BUDGET_S} s",
            f"{first} s",
            first is not None and first <= FIRST_RENDER_BUDGET_S,
        ),
    ]


def markdown(result: dict[str, Any]) -> str:
    meta = result["meta"]
    lines = [
        f"# Console rendering, {meta['date']}",
        "",
        f"`{meta['command']}`: one bridge worker with the console on, the demo agent, headless Chromium. "
        f"CPUs {meta['cpus']}, load average at start and end {meta['loadavg']}. Times from the click on Send; "
        f"a streaming message is re-rendered at most every {meta['render_interval_ms']} ms.",
        "",
        "| answer | deltas | chars | first render s | run end s | final render s | renders | max stall ms "
        "| long tasks | longest ms | total ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in result["cases"]:
        tasks = case["long_tasks"] or {"count": "n/a", "max_ms": "n/a", "total_ms": "n/a"}
        lines.append(
            f"| {case['kind']} | {case['deltas']} | {case['answer_chars']} | {case['first_render_s']} | "
            f"{case['run_end_s']} | {case['final_render_s']} | {case['renders']} | "
            f"{case['max_main_thread_stall_ms']} | {tasks['count']} | {tasks['max_ms']} | {tasks['total_ms']} |"
        )
    lines += [
        "",
        "Budget (bench/console_render.py):",
        "",
        "| answer | budget | goal | measured | met |",
        "|---|---|---|---|---|",
    ]
    for case in result["cases"]:
        for what, goal, measured, met in budget(case):
            lines.append(f"| {case['kind']} | {what} | {goal} | {measured} | {'met' if met else 'not met'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=20_000, help="text deltas per answer")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {', '.join(KINDS)}")
    parser.add_argument("--date", default=dt.date.today().isoformat())
    parser.add_argument("--out", default=str(h.BENCH_DIR / "results"))
    parser.add_argument("--keep-tmp", action="store_true")
    args = parser.parse_args(argv)
    if not h.BENCH_PY.exists():  # run directly with a Python that has the project's requirements
        h.BENCH_PY = Path(sys.executable)
    result = measure(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.date}-console-render.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{args.date}-console-render.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
