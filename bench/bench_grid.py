"""Grid adapter speed: CPU µs per step of the adapter, of ``pp.runpp`` and of the raw solve.

Run:  .venv/bin/python bench/bench_grid.py

For each network: the adapter step as a recording run takes it (one attached Load driven by an
input, the Grid's and the Load's every output read by ``get_data``; profiles applied where the
network has them), with the C kernels (``make build``) and with numpy's forms of the same numbers;
pandapower's default ``pp.runpp`` on the same net; and the bare lightsim2grid Newton-Raphson calls
the adapter made (the same start voltages and injections, one after the other, the solver's analysis kept
between them as the adapter keeps it). CPU time
(``time.process_time``), best of a few repeats, so a busy machine inflates it less than wall time;
quote the machine's load with the figures. Prints figures and the process's peak RSS; asserts nothing.
"""

from __future__ import annotations

import os
import resource
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandapower as pp  # noqa: E402
from lightsim2grid.algorithm import NRSing_KLU  # noqa: E402

import grid_models  # noqa: E402
from cosim.adapters.grid import MAX_ITERATION, TOLERANCE_MVA, GridSim  # noqa: E402
from cosim.adapters.grid import pandapower_flow  # noqa: E402
from cosim.run.runner import versions_line  # noqa: E402

NETWORKS = {"ieee33": "18", "cigre_mv": "Bus 11", "simbench:1-MV-rural--0-sw": "MV1.101 Bus 40"}
N_ADAPTER, N_RUNPP, REPEATS = 2000, 50, 3


def cpu_us(fn, n: int) -> float:
    """Best of :data:`REPEATS` of ``n`` calls, in CPU µs per call (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(REPEATS):
        started = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - started) / n * 1e6)
    return best


def adapter(network: str, bus: str, kernels: bool = True, solves: list | None = None) -> GridSim:
    """A grid adapter with one Load at ``bus``; ``solves`` collects each Newton call's (V0, Sbus)."""
    sim = GridSim()
    sim.init("grid", 1.0, start_utc="2024-07-15T00:00:00Z", step_s=60, duration_s=365 * 86_400, seed=0,
             network=network)
    sim.create(1, "Grid", eid="grid")
    sim.create(1, "Load", eid="dc", bus=bus, p_mw=0.5)
    sim.flow.use_kernels = kernels
    if solves is not None:
        sim.step(0, {}, 10**9)  # builds the solver model
        nr = sim.flow._nr
        solve = nr.solve

        class Recording:  # the solver, noting what it is asked
            def __getattr__(self, name):
                return getattr(nr, name)

            def solve(self, ybus, v, sbus, *rest):
                solves.append((v.copy(), sbus.copy()))
                return solve(ybus, v, sbus, *rest)

        sim.flow._nr = Recording()
    return sim


def stepper(sim: GridSim):
    clock = iter(range(60, 10**9, 60))
    rng = np.random.default_rng(0)
    request = {eid: list(values) for eid, values in sim.out.items()}

    def step():
        sim.step(next(clock), {"dc": {"p_mw": {"campus.p_it_mw": 0.5 + 0.1 * rng.random()}}}, 10**9)
        sim.get_data(request)

    return step


def bench(network: str, bus: str) -> tuple[float, float, float, float]:
    adapter_us = cpu_us(stepper(adapter(network, bus)), N_ADAPTER)
    numpy_us = cpu_us(stepper(adapter(network, bus, kernels=False)), N_ADAPTER)

    solves: list = []
    step = stepper(adapter(network, bus, solves=solves))
    for _ in range(N_ADAPTER):
        step()
    f = adapter(network, bus).flow
    f.solve(f.p0, f.q0)  # builds the same solver model
    nr = NRSing_KLU()

    def raw():
        kept = False
        for v0, sbus in solves:
            ok = nr.solve(f._ybus, v0.copy(), sbus, f._ref, f._slack_w, f._pv, f._pq, MAX_ITERATION, TOLERANCE_MVA)
            if ok != kept and pandapower_flow._KEEP_ANALYSIS:  # the analysis kept between solves, as the adapter does
                pandapower_flow._tell_solver(nr, nothing_changed=ok)
                kept = ok

    copies = [v0 for v0, _ in solves]
    copy_us = cpu_us(lambda: [v.copy() for v in copies], 1) / len(solves)
    raw_us = cpu_us(raw, 1) / len(solves) - copy_us

    net = grid_models.load_network(network)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runpp_us = cpu_us(lambda: pp.runpp(net), N_RUNPP)
    return adapter_us, numpy_us, runpp_us, raw_us


def main() -> None:
    print(f"versions: {versions_line()}")
    print(f"load average: {os.getloadavg()[0]:.2f} (CPU µs per step, best of {REPEATS})")
    print(f"{'network':28s} {'buses':>5s} {'adapter':>9s} {'numpy forms':>12s} {'pp.runpp':>10s} {'raw ls2g':>9s}")
    for network, bus in NETWORKS.items():
        adapter_us, numpy_us, runpp_us, raw_us = bench(network, bus)
        n_bus = len(grid_models.load_network(network).bus)
        print(f"{network:28s} {n_bus:5d} {adapter_us:9.1f} {numpy_us:12.1f} {runpp_us:10.0f} {raw_us:9.1f}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {peak_mb:.0f} MB; load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
