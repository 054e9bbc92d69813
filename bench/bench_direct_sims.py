"""Where the direct engine's time goes: µs per step of each simulator, and of the loop itself.

    .venv/bin/python bench/bench_direct_sims.py                        # default scenario, 3 days
    .venv/bin/python bench/bench_direct_sims.py scenarios/ai_campus_week.toml --days 1
    .venv/bin/python bench/bench_direct_sims.py --days 10 --start 2024-03-01 --ahead on   # with the worker

``--as-run`` steps the look-ahead blocks as ``cosim run`` does (the run's own PV and weather
stepped a block ahead, their steps then served from there) instead of as a Session does (copies
of the weather stepped ahead for PV's hints; PV and the weather step with the rest).
``--ahead on`` forks the worker process of :mod:`cosim.run.ahead` for the scenario's head (a
Session never does so by itself): the head's simulators then show the time the run's process
spends taking their records from the worker (waiting for it, receiving, unpickling), not their
physics, which runs on the other core.

Steps a :class:`cosim.Session` (no run folder) and times every simulator's step (its
``step`` and ``get_data``, or the recorder's row) with ``perf_counter``, and the look-ahead
blocks (copies of PV's sources stepped ahead, pvlib's chain once per block) as one line; the
first step (one-off model builds, numba cache loads, the first block) is printed on its own and
left out of the per-step figures, and so is the set-up's garbage (collected before the loop). The run's CPU time (``process_time``) is what the figures
add up to: each part's share of the timed wall time is scaled to it (on a busy machine, wall
time holds other processes' turns; CPU time does not). The loop holds the one-BLAS-thread limit
(:mod:`cosim.run.blas`) throughout, as ``cosim run`` does, so each step's own limit costs a count, not
the ~10 µs of setting it anew. The same steps are then taken again without the timers
(``--repeat`` times, alternating with the timed run): the difference in CPU time per step is what
the timers add, and what the direct engine's C loop (``cosim/run/_engine.c``) saves: the timers replace
``DirectEngine._step_sim``, so the timed runs step through the engine's Python loop and the untimed ones through the
C loop a run takes. Prints the machine's load: quote it with the figures.
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import cosim
from cosim.run import blas, direct
from cosim.run.runner import versions_line

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", default=str(ROOT / "scenarios" / "default.toml"))
    parser.add_argument("--days", type=float, default=3.0)
    parser.add_argument("--start", help="UTC date to start at instead of the scenario's, e.g. 2024-03-01")
    parser.add_argument("--ahead", choices=("off", "on"), default="off",
                        help="step the scenario's head in a worker process (cosim.run.ahead)")
    parser.add_argument("--repeat", type=int, default=1, help="timed and untimed runs, alternating")
    parser.add_argument("--as-run", action="store_true",
                        help="look-ahead blocks as `cosim run` steps them (the run's own PV and weather stepped "
                             "ahead, their steps served from there) instead of a Session's hints")
    args = parser.parse_args()
    overrides = {"scenario.duration_s": int(args.days * 86_400), "scenario.ahead": args.ahead}
    if args.start:
        overrides["scenario.start"] = datetime.fromisoformat(args.start).replace(tzinfo=timezone.utc)
    print(f"versions: {versions_line()}")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    timed_cpu, plain_cpu, parts = [], [], []
    for _ in range(args.repeat):
        spent, first_s, cpu, wall, steps = _run(args.scenario, overrides, args.ahead, args.as_run, timers=True)
        timed_cpu.append(cpu / steps)
        plain_cpu.append(_run(args.scenario, overrides, args.ahead, args.as_run, timers=False)[2] / steps)
        scale = cpu / wall  # CPU seconds per wall second of the loop
        parts.append({**{part: seconds * scale / steps for part, seconds in spent.items()},
                      "(engine loop)": (wall - sum(spent.values())) * scale / steps})
    print(f"first step {first_s:.2f} s (left out below)")
    print(f"{steps:,} steps; CPU per step in all: timed runs {_span(timed_cpu)} (the engine's Python loop), untimed "
          f"{_span(plain_cpu)} µs (" + ("its C loop, as a run steps)" if direct._step_due is not None
                                      else "the Python loop too: cosim/run/_engine.so is not in use)")
          + (" (ranges over the runs)" if args.repeat > 1 else ""))
    for part in sorted(parts[-1], key=lambda p: (p == "(engine loop)", -parts[-1][p])):
        print(f"  {part:22s} {_span([run.get(part, 0.0) for run in parts], 1):>12s} µs/step")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def _run(scenario: str, overrides: dict, ahead: str, as_run: bool, timers: bool):
    """``(seconds by part, first step [s], CPU [s], wall [s], steps)`` of one run after its first step."""
    spent: dict[str, float] = collections.defaultdict(float)
    step_sim, fill = direct.DirectEngine._step_sim, direct._Blocks.fill
    clock = time.perf_counter

    def timed_step(engine, sim, t, collapsed=None):
        started = clock()
        step_sim(engine, sim, t, collapsed)
        spent[sim.sid] += clock() - started

    def timed_fill(blocks, t):
        started = clock()
        direct.DirectEngine._step_sim = step_sim  # the copies' steps count as the blocks'
        try:
            fill(blocks, t)
        finally:
            direct.DirectEngine._step_sim = timed_step
        spent["(look-ahead blocks)"] += clock() - started

    if timers:
        direct.DirectEngine._step_sim, direct._Blocks.fill = timed_step, timed_fill
    try:
        with tempfile.TemporaryDirectory() as out, \
                cosim.Session(scenario, overrides=overrides, out_dir=out, report=False) as session:
            if ahead == "on" or as_run:
                session.engine.blocks = None  # (the Session's hints, not used yet)
            if ahead == "on":
                session.engine.run_ahead()
                print(f"worker process: {', '.join(session.engine.ahead.sids) if session.engine.ahead else 'none'}")
            if as_run:
                session.engine.run_blocks()
            first = time.perf_counter()
            session.step()
            first_s = time.perf_counter() - first
            gc.collect()  # the set-up's garbage: its one full collection (~0.1 s) would land in a short run's figures
            spent.clear()
            cpu0, wall0, steps = time.process_time(), time.perf_counter(), 0
            with blas.one_thread():  # held over the loop, as a run holds it: each step's own limit only counts
                while not session.done:
                    session.step()
                    steps += 1
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    finally:
        direct.DirectEngine._step_sim, direct._Blocks.fill = step_sim, fill
    return spent, first_s, cpu, wall, steps


def _span(per_step: list[float], digits: int = 0) -> str:
    low, high = min(per_step) * 1e6, max(per_step) * 1e6
    return f"{low:.{digits}f}" if round(low, digits) == round(high, digits) else f"{low:.{digits}f}-{high:.{digits}f}"


if __name__ == "__main__":
    main()
