"""PV's block evaluation against the scalar chain, side by side in one process.

    .venv/bin/python bench/bench_pv_block.py              # 10 July days of the bundled TMY3 year, 1-minute steps
    .venv/bin/python bench/bench_pv_block.py --year-check # every lit step of the year, bit for bit (~8 min)

Steps a ``PvPlant`` entity through lit steps with hourly TMY3 weather (pvlib's bundled
Greensboro, NC year) and, at each, times the adapter's step (block path: the chain evaluated
once for the steps ahead while the weather holds) and pvlib's chain on that step alone (what
every lit step cost before), alternately. Prints µs per lit step of each and the machine's load.

``--year-check``: no timing; for both mountings and every transposition model, every lit step of
the whole year at 1-minute steps, the adapter's outputs against the chain on that step alone —
as Python floats, and (klucher's reference, see tests/adapters/test_pv.py) as one-step arrays.
Prints the steps that differ from each and exits 1 if any differs from the reference.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

import itertools
import sys

import numpy as np
import pvlib

from cosim.adapters.pv import PvSim


INPUTS = ("ghi_w_m2", "dni_w_m2", "dhi_w_m2", "t_dry_c", "wind_m_s")
KEYS = (("p_avail_mw", "p_ac_mw"), ("p_dc_mw", "p_dc_mw"), ("p_clip_mw", "p_clip_mw"), ("poa_w_m2", "poa_w_m2"),
        ("t_cell_c", "t_cell_c"))


def tmy3_hours() -> np.ndarray:
    data, _ = pvlib.iotools.read_tmy3(pathlib.Path(pvlib.__file__).parent / "data" / "723170TYA.CSV",
                                      map_variables=True)
    return data[["ghi", "dni", "dhi", "temp_air", "wind_speed"]].to_numpy(float)


def year_check(hours: np.ndarray) -> bool:
    """Every lit step of the year, each mounting and transposition model: True when all match."""
    ok = True
    for tracking, model in itertools.product(["fixed", "single_axis"],
                                             ["haydavies", "isotropic", "reindl", "perez", "klucher"]):
        sim = PvSim()
        sim.init("pv", time_resolution=1.0, start_utc="2024-01-01T00:00:00+00:00", step_s=60,
                 duration_s=365 * 86_400, seed=1)
        sim.create(1, "PvPlant", eid="pv", latitude_deg=36.1, longitude_deg=-79.95, altitude_m=273.0,
                   p_dc_mw=1.2, p_ac_mw=1.0, tracking=tracking, transposition=model)
        geo, n_lit, n_off_float, n_off_array, n_raised = sim.entities["pv"], 0, 0, 0, 0
        for k in range(365 * 1440):
            hour = hours[k // 60]
            inputs = dict(zip(INPUTS, map(float, hour)))
            sim.time_ticks = k * 60
            got = sim.advance(geo, k * 60, inputs)
            if not hour[:3].any():
                continue
            n_lit += 1
            row = sim._geometry_row(geo, k * 60)
            with np.errstate(divide="ignore", invalid="ignore"):
                one = geo.plant.power({key: np.array([v]) for key, v in row.items()},
                                      *(np.array([v]) for v in inputs.values()))
            n_off_array += any(got[a] != float(np.asarray(one[b])[0]) for a, b in KEYS)
            try:
                scalar = geo.plant.power(row, *inputs.values())
                n_off_float += any(got[a] != float(scalar[b]) for a, b in KEYS)
            except ZeroDivisionError:
                n_raised += 1
        reference_off = n_off_array if model == "klucher" else n_off_float
        ok &= reference_off == 0
        print(f"{tracking:11s} {model:9s} {n_lit:,} lit steps: differ from the float chain {n_off_float}, "
              f"from one-step arrays {n_off_array}; float chain raised {n_raised}", flush=True)
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--start-day", type=int, default=195, help="day of the TMY3 year (0 = 1 January)")
    parser.add_argument("--year-check", action="store_true", help="compare every lit step of the year, no timing")
    args = parser.parse_args()
    hours = tmy3_hours()
    if args.year_check:
        sys.exit(0 if year_check(hours) else 1)
    sim = PvSim()
    sim.init("pv", time_resolution=1.0, start_utc="2024-07-15T00:00:00+00:00", step_s=60,
             duration_s=args.days * 86_400, seed=1)
    sim.create(1, "PvPlant", eid="pv", latitude_deg=36.1, longitude_deg=-79.95, p_dc_mw=2.4, p_ac_mw=2.0)
    geo, block_s, scalar_s, n = sim.entities["pv"], 0.0, 0.0, 0
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for k in range(args.days * 1440):
        hour = hours[(args.start_day * 24 + k // 60) % len(hours)]
        if not hour[:3].any():
            continue
        inputs = dict(zip(INPUTS, map(float, hour)))
        sim.time_ticks = k * 60
        a = time.perf_counter()
        sim.advance(geo, k * 60, inputs)
        b = time.perf_counter()
        geo.plant.power(sim._geometry_row(geo, k * 60), *inputs.values())
        c = time.perf_counter()
        block_s, scalar_s, n = block_s + b - a, scalar_s + c - b, n + 1
    print(f"{n:,} lit steps: adapter (block) {block_s / n * 1e6:.1f} µs/step, scalar chain {scalar_s / n * 1e6:.1f} µs/step "
          f"({scalar_s / block_s:.2f}x)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
