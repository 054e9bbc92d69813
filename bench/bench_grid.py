"""Grid adapter speed: ms per step of the adapter, of ``pp.runpp`` and of the raw solve.

Run:  .venv/bin/python bench/bench_grid.py

For each network: the adapter step (profiles applied, one attached Load driven by an input,
power flow, outputs filled), pandapower's default ``pp.runpp`` on the same net, and the
bare lightsim2grid Newton-Raphson call the adapter makes (warm start). Prints figures and
the process's peak RSS; asserts nothing.
"""

from __future__ import annotations

import resource
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandapower as pp  # noqa: E402

import grid_models  # noqa: E402
from cosim.adapters.grid import MAX_ITERATION, TOLERANCE_MVA, GridSim  # noqa: E402

NETWORKS = {"ieee33": "18", "cigre_mv": "Bus 11", "simbench:1-MV-rural--0-sw": "MV1.101 Bus 40"}
N_ADAPTER, N_RUNPP, N_RAW = 2000, 50, 5000


def per_call_ms(fn, n: int) -> float:
    fn()  # warm-up (JIT, caches)
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e3


def bench(network: str, bus: str) -> tuple[float, float, float]:
    sim = GridSim()
    sim.init("grid", 1.0, start_utc="2024-07-15T00:00:00Z", step_s=60, duration_s=365 * 86_400, seed=0,
             network=network)
    sim.create(1, "Grid", eid="grid")
    sim.create(1, "Load", eid="dc", bus=bus, p_mw=0.5)
    clock = iter(range(0, 10**9, 60))
    rng = np.random.default_rng(0)

    def adapter_step():
        sim.step(next(clock), {"dc": {"p_mw": {"campus.p_it_mw": 0.5 + 0.1 * rng.random()}}}, 10**9)

    adapter_ms = per_call_ms(adapter_step, N_ADAPTER)

    net = grid_models.load_network(network)

    def runpp():
        pp.runpp(net)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runpp_ms = per_call_ms(runpp, N_RUNPP)

    f = sim.flow
    sbus = f._sbus  # the last step's injections: a warm-started solve, as in a time series

    def raw():
        f._nr.solve(f._ybus, f._V, sbus, f._ref, f._slack_w, f._pv, f._pq, MAX_ITERATION, TOLERANCE_MVA)

    raw_ms = per_call_ms(raw, N_RAW)
    return adapter_ms, runpp_ms, raw_ms


def main() -> None:
    print(f"{'network':28s} {'buses':>5s} {'adapter ms/step':>16s} {'pp.runpp ms':>12s} {'raw ls2g ms':>12s}")
    for network, bus in NETWORKS.items():
        adapter_ms, runpp_ms, raw_ms = bench(network, bus)
        n_bus = len(grid_models.load_network(network).bus)
        print(f"{network:28s} {n_bus:5d} {adapter_ms:16.3f} {runpp_ms:12.2f} {raw_ms:12.4f}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
