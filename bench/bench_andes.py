"""ANDES step cost per cosim tick and a 10-minute event's wall time (prints figures; no asserts).

    .venv/bin/python bench/bench_andes.py [--case ieee39] [--step 0.1] [--minutes 10]
    .venv/bin/python bench/bench_andes.py --case scenarios/data/transmission/npcc.raw \
        --dyr scenarios/data/transmission/npcc_full.dyr --bus 30 --dt 0.016666666666666666 --perc1

Drives the andes_grid adapter's mosaik API directly (no orchestrator): one campus load at a bus
that swings +-50 MW at 0.5 Hz and one 100 ms fault at 60 s; prints the set-up time (case load,
power flow, TDS init), the cost per tick and per ANDES sub-step, the wall time of the whole event
and the peak RSS. ``--perc1`` makes the campus a native PERC1 device inside ANDES (the
interconnection study's parameters), so the two runs give the cost per sub-step with and without it.
"""

from __future__ import annotations

import argparse
import math
import resource
import time

from cosim.adapters.andes_grid import AndesGridSim
from cosim.run.runner import versions_line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="ieee39")
    ap.add_argument("--bus", default="16")
    ap.add_argument("--step", type=float, default=0.1, help="cosim step (= tick) [s]")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--dyr", default=None, help="the DYR of a RAW / MATPOWER case")
    ap.add_argument("--dt", type=float, default=None, help="ANDES's step [s] (default: up to 1/30 s)")
    ap.add_argument("--perc1", action="store_true", help="the campus as a native PERC1 device")
    args = ap.parse_args()
    extra = {k: v for k, v in (("dyr", args.dyr), ("dt_s", args.dt)) if v is not None}
    campus = {"perc1": {"vt0_pu": 0.5, "vt1_pu": 0.7, "frecon_frac": 0.9, "t_recon_delay_s": 0.5,
                        "t_recon_s": 2.0}} if args.perc1 else {}
    n = int(round(args.minutes * 60 / args.step))
    t0 = time.perf_counter()
    sim = AndesGridSim()
    sim.init("tgrid", time_resolution=args.step, start_utc="2024-07-10T00:00:00Z", step_s=args.step,
             duration_s=int(args.minutes * 60), seed=1, case=args.case, faults=[[60.0, 0.1, args.bus, 0.05]], **extra)
    sim.create(1, "Grid", eid="grid")
    sim.create(1, "Load", eid="campus", bus=args.bus, **campus)
    load = lambda k: {"campus": {"p_mw": {"dc": 200.0 + 50.0 * math.sin(2 * math.pi * 0.5 * k * args.step)}}}
    sim.step(0, load(0), None)
    t_setup = time.perf_counter() - t0
    t1 = time.perf_counter()
    for k in range(1, n):
        sim.step(k, load(k), None)
        sim.get_data({"grid": ["f_hz"], "campus": ["vm_pu"]})
    wall = time.perf_counter() - t1
    per_tick_ms = 1e3 * wall / (n - 1)
    print(f"versions: {versions_line()}")
    print(f"case {args.case}, step {args.step:g} s, {sim.n_sub} ANDES sub-steps of {sim.dt_s:.4g} s per tick, "
          f"PERC1 {'native' if args.perc1 else 'off'}")
    print(f"set-up (load, power flow, TDS init, first tick): {t_setup:.2f} s")
    print(f"per tick: {per_tick_ms:.2f} ms ({per_tick_ms / sim.n_sub:.2f} ms per sub-step)")
    print(f"{args.minutes:g}-minute event: {t_setup + wall:.1f} s wall ({n} ticks)")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
