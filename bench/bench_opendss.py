"""Grid adapter speed on the OpenDSS engine: ms per step and per bare solve, IEEE 13/34/123 feeders.

Run:  .venv/bin/python bench/bench_opendss.py

For each feeder: the adapter step at 1-second steps (one attached three-phase Load driven by an
input that changes every step, OpenDSS snapshot solve with its controls, the outputs a run records
by default read back with ``get_data``: the Grid's summary, losses and largest loading included, and
the Load's), in both control modes, and the bare ``Solution.Solve()`` call the adapter makes. CPU
time of this process (``time.process_time``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from cosim.adapters.grid import GridSim  # noqa: E402

FEEDERS = {"ieee13": "671", "ieee34": "890", "ieee123": "67"}
N_STEPS = 2000
#: the Grid's outputs a run records only on request (one per bus, line, transformer, phase or device)
DETAIL = ("bus_", "line_", "trafo_", "reg_", "cap_")


def make(network: str, bus: str, control_mode: str) -> GridSim:
    sim = GridSim()
    sim.init("grid", 1.0, start_utc="2024-07-15T00:00:00Z", step_s=1, duration_s=86_400, seed=0,
             network=network, engine="opendss", control_mode=control_mode)
    sim.create(1, "Grid", eid="grid")
    sim.create(1, "Load", eid="dc", bus=bus, p_mw=0.3)
    return sim


def adapter_ms(network: str, bus: str, control_mode: str) -> float:
    sim = make(network, bus, control_mode)
    rng = np.random.default_rng(0)
    sim.step(0, {}, 10**9)  # first solve: compile-time work, static settling
    request = {"grid": [a for a in sim.out["grid"] if not a.startswith(DETAIL)], "dc": list(sim.out["dc"])}
    t0 = time.process_time()
    for t in range(1, N_STEPS + 1):
        sim.step(t, {"dc": {"p_mw": {"campus.p_mw": 0.3 + 0.2 * rng.random()}}}, 10**9)
        sim.get_data(request)
    return (time.process_time() - t0) / N_STEPS * 1e3


def bare_solve_ms(network: str, bus: str) -> float:
    sim = make(network, bus, "static")
    sim.step(0, {}, 10**9)
    dss = sim.flow.dss
    load = sim.flow.elements["load"][0].loads[0]
    rng = np.random.default_rng(0)
    t0 = time.process_time()
    for _ in range(N_STEPS):
        dss.Loads.Name(load)
        dss.Loads.kW(300 + 200 * rng.random())
        dss.Solution.Solve()
    return (time.process_time() - t0) / N_STEPS * 1e3


def main() -> None:
    print(f"OpenDSS engine ({N_STEPS} steps each, one attached Load changing every step; CPU ms per step; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    print(f"{'feeder':<9}{'buses':>6}{'nodes':>6}  {'adapter static':>15}{'adapter time':>14}{'bare Solve()':>14}")
    for network, bus in FEEDERS.items():
        sim = make(network, bus, "static")
        n_bus, n_node = sim.flow.dss.Circuit.NumBuses(), sim.flow.dss.Circuit.NumNodes()
        static, timed = adapter_ms(network, bus, "static"), adapter_ms(network, bus, "time")
        bare = bare_solve_ms(network, bus)
        print(f"{network:<9}{n_bus:>6}{n_node:>6}  {static:>12.3f} ms{timed:>11.3f} ms{bare:>11.3f} ms")


if __name__ == "__main__":
    main()
