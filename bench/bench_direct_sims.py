"""Where the direct engine's time goes: µs per step of each simulator, and of the loop itself.

    .venv/bin/python bench/bench_direct_sims.py                        # default scenario, 3 days
    .venv/bin/python bench/bench_direct_sims.py scenarios/ai_campus_week.toml --days 1
    .venv/bin/python bench/bench_direct_sims.py --days 10 --start 2024-03-01 --ahead on   # with the worker

``--ahead on`` forks the worker process of :mod:`cosim.run.ahead` for the scenario's head (a
Session never does so by itself): the head's simulators then show the time the run's process
spends taking their records from the worker (waiting for it, receiving, unpickling), not their
physics, which runs on the other core.

Steps a :class:`cosim.Session` (no run folder) and times every simulator's step (its
``step`` and ``get_data``, or the recorder's row) with ``perf_counter``; the first step (one-off
model builds, numba cache loads) is printed on its own and left out of the per-step figures. Prints the machine's load: quote it with the figures.
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import cosim
from cosim.run import direct

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", default=str(ROOT / "scenarios" / "default.toml"))
    parser.add_argument("--days", type=float, default=3.0)
    parser.add_argument("--start", help="UTC date to start at instead of the scenario's, e.g. 2024-03-01")
    parser.add_argument("--ahead", choices=("off", "on"), default="off",
                        help="step the scenario's head in a worker process (cosim.run.ahead)")
    args = parser.parse_args()
    overrides = {"scenario.duration_s": int(args.days * 86_400), "scenario.ahead": args.ahead}
    if args.start:
        overrides["scenario.start"] = datetime.fromisoformat(args.start).replace(tzinfo=timezone.utc)
    spent: collections.Counter[str] = collections.Counter()
    step_sim = direct.DirectEngine._step_sim

    def timed(engine, sim, t):
        started = time.perf_counter()
        step_sim(engine, sim, t)
        spent[sim.sid] += time.perf_counter() - started

    direct.DirectEngine._step_sim = timed
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as out, \
            cosim.Session(args.scenario, overrides=overrides, out_dir=out, report=False) as session:
        if args.ahead == "on":
            session.engine.run_ahead()
            print(f"worker process: {', '.join(session.engine.ahead.sids) if session.engine.ahead else 'none (no head)'}")
        first = time.perf_counter()
        session.step()
        first_s = time.perf_counter() - first
        first_spent = collections.Counter(spent)
        spent.clear()
        started, steps = time.perf_counter(), 0
        while not session.done:
            session.step()
            steps += 1
        wall_s = time.perf_counter() - started
    print(f"first step {first_s:.2f} s (left out below: {', '.join(f'{k} {v:.2f} s' for k, v in first_spent.most_common(3))})")
    print(f"{steps:,} steps, {wall_s / steps * 1e6:.0f} µs/step in all")
    for sid, seconds in spent.most_common():
        print(f"  {sid:16s} {seconds / steps * 1e6:7.0f} µs/step")
    print(f"  {'(engine loop)':16s} {(wall_s - sum(spent.values())) / steps * 1e6:7.0f} µs/step")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
