"""Four campuses on the NPCC 140-bus case through a 20 s event: set-up, cost per ANDES sub-step, wall, RSS.

    .venv/bin/python bench/bench_interconnection.py            # four native PERC1 campuses
    .venv/bin/python bench/bench_interconnection.py --no-perc1 # the same four loads as plain PQ loads

Drives the andes_grid adapter's mosaik API directly (no orchestrator) with the four campuses of
scenarios/npcc_perc1_campuses.toml (Ludlow 30, Northfield 29, Manchester 31, Carpenter Hill 9; 900 MW
in all, each its own PERC1 thresholds) and its fault (bus 30 at 1 s, 0.1 s, x = 0.02 pu), ANDES at
1/60 s, cosim at 0.1 s, for ``--seconds`` (20 s). Prints the set-up time (case read, power flow, TDS
initialisation, first tick), the cost per tick and per ANDES sub-step, the wall time of the event and
the peak RSS of this process. Run it twice (with and without ``--no-perc1``) for the cost PERC1 adds.
Prints figures only (no asserts).
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from cosim.adapters.andes_grid import AndesGridSim
from cosim.run.runner import versions_line

DATA = Path(__file__).resolve().parents[1] / "scenarios" / "data" / "transmission"
#: (entity, bus, p_mw, q_mvar, PERC1 parameters): the campuses of scenarios/npcc_perc1_campuses.toml
CAMPUSES = (
    ("ludlow", 30, 300.0, 60.0, {"vt0_pu": 0.5, "vt1_pu": 0.7, "t_recon_delay_s": 0.5, "t_recon_s": 1.0}),
    ("northfield", 29, 200.0, 40.0, {"vt0_pu": 0.3, "vt1_pu": 0.45, "frecon_frac": 0.9, "t_recon_delay_s": 0.5,
                                     "t_recon_s": 1.0}),
    ("manchester", 31, 250.0, 50.0, {"vt0_pu": 0.6, "vt1_pu": 0.8, "fcease_frac": 0.8, "t_recon_delay_s": 0.5,
                                     "t_recon_s": 1.0}),
    ("carpenter", 9, 150.0, 30.0, {"vt0_pu": 0.7, "vt1_pu": 0.85, "t_recon_delay_s": 0.5, "t_recon_s": 1.0}),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="simulated time of the event [s]")
    ap.add_argument("--step", type=float, default=0.1, help="cosim step (= tick) [s]")
    ap.add_argument("--no-perc1", action="store_true", help="plain PQ loads instead of native PERC1 devices")
    args = ap.parse_args()
    n = int(round(args.seconds / args.step))
    t0 = time.perf_counter()
    sim = AndesGridSim()
    sim.init("tgrid", time_resolution=args.step, start_utc="2024-07-10T00:00:00Z", step_s=args.step,
             duration_s=args.seconds, seed=1, case=str(DATA / "npcc.raw"), dyr=str(DATA / "npcc_full.dyr"),
             dt_s=1.0 / 60.0, faults=[[1.0, 0.1, 30, 0.02]])
    sim.create(1, "Grid", eid="grid")
    for eid, bus, p_mw, q_mvar, perc1 in CAMPUSES:
        sim.create(1, "Load", eid=eid, bus=bus, p_mw=p_mw, q_mvar=q_mvar,
                   **({} if args.no_perc1 else {"perc1": perc1}))
    sim.step(0, {}, None)
    t_setup = time.perf_counter() - t0
    t1 = time.perf_counter()
    for k in range(1, n):
        sim.step(k, {}, None)
        sim.get_data({"grid": ["f_hz"], **{c[0]: ["p_connected_frac"] for c in CAMPUSES}})
    wall = time.perf_counter() - t1
    per_tick_ms = 1e3 * wall / (n - 1)
    print(f"versions: {versions_line()}")
    print(f"NPCC 140 buses, {len(CAMPUSES)} campuses ({'plain PQ' if args.no_perc1 else 'native PERC1'}), "
          f"step {args.step:g} s, {sim.n_sub} ANDES sub-steps of {sim.dt_s:.4g} s per tick")
    print(f"set-up (read RAW+DYR, power flow, TDS init, first tick): {t_setup:.2f} s")
    print(f"per tick: {per_tick_ms:.2f} ms ({per_tick_ms / sim.n_sub:.2f} ms per ANDES sub-step)")
    print(f"{args.seconds:g} s event: {t_setup + wall:.1f} s wall ({n} ticks)")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
