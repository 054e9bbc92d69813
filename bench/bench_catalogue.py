"""Time every shipped scenario as a newcomer runs it: ``cosim run FILE --quiet`` in a fresh process.

Run by hand (never in the tests), with nothing else running::

    .venv/bin/python bench/bench_catalogue.py                      # every scenarios/*.toml, its own engine
    .venv/bin/python bench/bench_catalogue.py --engine direct --only default,ffr_trip

Per scenario: the command's wall time (Python start-up, validation, the run, KPIs and report.html),
the engine's own ``wall_s`` from the run folder's ``metadata.json``, the peak RSS of the
command's process and the load average (``/proc/loadavg``, 1 minute) before and after; then one
markdown row each, for the scenario catalogue's runtime column. A scenario that fails is
printed with its exit status, not skipped. The SimBench cache (``~/.cache/cosim``) and pandapower's
numba compile are warm after the first scenario that needs them: run the whole list once before
quoting a cold figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_1min() -> float:
    """The machine's 1-minute load average. [-]"""
    return float(Path("/proc/loadavg").read_text().split()[0])


def time_one(path: Path, engine: str | None, out: Path) -> dict:
    """Run ``cosim run path --quiet`` once; its wall time [s], engine wall [s], peak RSS [MiB], loads."""
    command = [sys.executable, "-m", "cosim", "run", str(path), "--quiet", "--out", str(out)]
    if engine:
        command += ["--engine", engine]
    before = load_1min()
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: a full pipe would stall the child
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        wall_s = time.perf_counter() - started
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    folders = sorted(out.glob(f"{path.stem}-*"), key=lambda p: p.stat().st_mtime)
    meta = json.loads((folders[-1] / "metadata.json").read_text()) if folders else {}
    return {"file": path.name, "rc": proc.returncode, "command_s": wall_s,
            "engine_wall_s": meta.get("wall_s"), "engine": meta.get("engine"), "rss_mib": usage.ru_maxrss / 1024.0,
            "load_before": before, "load_after": load_1min(), "error": stderr.strip().splitlines()[-1:] if stderr else []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=("mosaik", "direct"), help="override every scenario's engine")
    parser.add_argument("--only", help="comma-separated scenario names (file stems)")
    args = parser.parse_args()
    paths = sorted((ROOT / "scenarios").glob("*.toml"))
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
        paths = [p for p in paths if p.stem in wanted]
        missing = wanted - {p.stem for p in paths}
        if missing:
            parser.error(f"unknown scenario(s) {sorted(missing)}")
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {len(paths)} scenarios, engine "
          f"{args.engine or 'each scenario own'}, load {load_1min():.2f}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_catalogue_") as tmp:
        for path in paths:
            row = time_one(path, args.engine, Path(tmp))
            rows.append(row)
            engine_s = f"{row['engine_wall_s']:.1f}" if row["engine_wall_s"] is not None else "-"
            print(f"  {row['file']:34s} rc {row['rc']}  command {row['command_s']:6.1f} s  engine "
                  f"({row['engine']}) {engine_s:>6s} s  RSS {row['rss_mib']:6.0f} MiB  load "
                  f"{row['load_before']:.2f} -> {row['load_after']:.2f}  {' '.join(row['error']) if row['rc'] else ''}",
                  flush=True)
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, load {load_1min():.2f}")
    print("\n| file | command [s] | engine wall_s [s] | peak RSS [MiB] |\n|---|---:|---:|---:|")
    for row in rows:
        engine_s = f"{row['engine_wall_s']:.1f}" if row["engine_wall_s"] is not None else "-"
        print(f"| `{row['file']}` | {row['command_s']:.1f} | {engine_s} ({row['engine']}) | {row['rss_mib']:.0f} |")
    failed = [r["file"] for r in rows if r["rc"] != 0]
    if failed:
        print(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
