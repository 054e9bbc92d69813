"""PV's block evaluation against the scalar chain, side by side in one process.

    .venv/bin/python bench/bench_pv_block.py            # 10 July days of the bundled TMY3 year, 1-minute steps

Steps a ``PvPlant`` entity through lit steps with hourly TMY3 weather (pvlib's bundled
Greensboro, NC year) and, at each, times the adapter's step (block path: the chain evaluated
once for the steps ahead while the weather holds) and pvlib's chain on that step alone (what
every lit step cost before), alternately. Prints µs per lit step of each and the machine's load.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

import numpy as np
import pvlib

from cosim.adapters.pv import PvSim


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--start-day", type=int, default=195, help="day of the TMY3 year (0 = 1 January)")
    args = parser.parse_args()
    data, _ = pvlib.iotools.read_tmy3(pathlib.Path(pvlib.__file__).parent / "data" / "723170TYA.CSV",
                                      map_variables=True)
    hours = data[["ghi", "dni", "dhi", "temp_air", "wind_speed"]].to_numpy(float)
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
        inputs = dict(zip(("ghi_w_m2", "dni_w_m2", "dhi_w_m2", "t_dry_c", "wind_m_s"), map(float, hour)))
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
