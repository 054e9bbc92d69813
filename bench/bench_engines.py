"""Both engines side by side: wall time, µs per step and peak RSS of the same runs.

    .venv/bin/python bench/bench_engines.py                 # default day, microgrid week, ieee13 hour
    .venv/bin/python bench/bench_engines.py --repeat 3      # ranges over 3 runs of each
    .venv/bin/python bench/bench_engines.py --year          # + the showcase for a year (~20 min of mosaik)
    .venv/bin/python bench/bench_engines.py --cases microgrid --engines direct
    .venv/bin/python bench/bench_engines.py --cases year --engines direct:off,direct:on   # without/with the worker

An engine is ``mosaik``, ``direct`` (its ``[scenario] ahead`` left at "auto") or ``direct:off`` /
``direct:on`` (the simulators that take no inputs stepped in this process / in a worker process
ahead of the rest, :mod:`cosim.run.ahead`). ``worker RSS (own)``: the worker process's peak
resident memory, and in brackets what of it is its own (not shared with the run's process by the
fork), when one ran [MiB]; ``peak RSS`` is the run's process alone.

Each run is its own process (so peak RSS is that run's, and imports are not shared); the
engines alternate within each repeat, so a busy machine slows both alike. ``wall`` is the
engine's time from metadata.json (start-up, validation and KPIs excluded); ``µs/step`` is that
over the recorded steps; the ratio (``first/this``) is the first engine's wall over each other's, per repeat.
Prints the machine's load (``uptime``) before and after: quote figures with it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from cosim.run.runner import versions_line

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "default": (ROOT / "scenarios" / "default.toml", {}),
    "microgrid": (ROOT / "bench" / "microgrid" / "microgrid.toml", {}),
    "ieee13": (ROOT / "scenarios" / "ieee13_llm_campus.toml", {}),
    "year": (ROOT / "scenarios" / "default.toml",
             {"scenario.start": "2024-01-01T00:00:00Z", "scenario.duration_s": 365 * 86_400}),
}
CHILD = """
import json, resource, sys
from datetime import datetime
import cosim
path, out, overrides = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if "scenario.start" in overrides:
    overrides["scenario.start"] = datetime.fromisoformat(overrides["scenario.start"].replace("Z", "+00:00"))
result = cosim.run(path, out_dir=out, overrides=overrides)
meta = result.metadata
print(json.dumps({"status": result.status, "wall_s": meta["wall_s"], "steps": meta["steps"],
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "worker": meta.get("ahead")}))
"""


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_once(case: str, engine: str) -> dict:
    path, overrides = CASES[case]
    name, _, ahead = engine.partition(":")
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(path), out,
                               json.dumps({**overrides, "scenario.engine": name, "scenario.ahead": ahead or "auto"})],
                              capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{case} on {engine} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def span(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if len(values) == 1 or f"{low:{fmt}}" == f"{high:{fmt}}" else \
        f"{low:{fmt}}-{high:{fmt}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="default,microgrid,ieee13", help="comma-separated, of " + ", ".join(CASES))
    parser.add_argument("--engines", default="mosaik,direct")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--year", action="store_true", help="add the showcase year at 1-minute steps")
    args = parser.parse_args()
    cases = args.cases.split(",") + (["year"] if args.year else [])
    engines = args.engines.split(",")
    print(f"versions: {versions_line()}")
    print(f"before: {uptime()}")
    rows = []
    for case in cases:
        results: dict[str, list[dict]] = {e: [] for e in engines}
        for k in range(args.repeat):
            for engine in (engines if k % 2 == 0 else engines[::-1]):
                r = run_once(case, engine)
                results[engine].append(r)
                print(f"  {case:<10} {engine:<10} run {k + 1}: {r['wall_s']:9.2f} s  {r['status']}", flush=True)
        rows.append((case, results))
    print(f"after:  {uptime()}\n")
    print(f"{'case':<10} {'engine':<10} {'steps':>8} {'wall [s]':>16} {'µs/step':>14} {'peak RSS [MiB]':>16} "
          f"{'worker RSS (own)':>16} {'first/this':>14}")
    for case, results in rows:
        first = engines[0]
        for engine, runs in results.items():
            ratios = [f["wall_s"] / r["wall_s"] for f, r in zip(results[first], runs)] if engine != first else None
            steps = runs[0]["steps"]
            walls = [r["wall_s"] for r in runs]
            ratio = span(ratios, ".2f") + "x" if ratios else ""
            workers = [f"{r['worker']['peak_rss_mib']:.0f} ({r['worker']['private_mib']:.0f})" for r in runs
                       if r["worker"] and "private_mib" in r["worker"]]
            print(f"{case:<10} {engine:<10} {steps:>8,} {span(walls, '.2f'):>16} "
                  f"{span([1e6 * w / steps for w in walls], '.0f'):>14} "
                  f"{span([r['rss_mib'] for r in runs], '.0f'):>16} "
                  f"{', '.join(workers) if workers else '-':>16} {ratio:>14}")


if __name__ == "__main__":
    main()
