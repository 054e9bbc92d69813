"""A solve whose injections are the last solve's, bit for bit, from the voltages that solve started from and gave
back unchanged (it converged before any iteration), is skipped: its results stand (pandapower_flow.PowerFlow._repeat).
Exact by construction; shown here on every output of every step against the same flow solving each time, through
repeats, new injections, a failed solve, its retry and the steps after it."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from c_part_marks import needs_c_part

from cosim import grid_models
from cosim.adapters.grid import pandapower_flow as pf
from cosim.adapters.grid.pandapower_flow import PowerFlow

pytestmark = needs_c_part(pf._KERNELS is not None, "adapters/grid/_kernels.so")  # (numpy solves every step)

#: the load scale of each step: repeats, a change, repeats, a load the feeder cannot carry (twice), then back
SCALES = [1.0] * 5 + [1.1] * 4 + [40.0] * 2 + [1.1] * 4 + [0.9, 1.0, 1.0, 1.0]


def _flow() -> PowerFlow:
    flow = PowerFlow(grid_models.load_network("cigre_mv"))
    flow.set_band(np.arange(len(flow.net.bus)), 0.95, 1.05, np.zeros(len(flow.net.bus), bool))
    flow.attach("load", "Bus 11", 1.0, 0.2, "campus")
    return flow


def _outputs(flow: PowerFlow, ok: bool) -> list:
    arrays = [flow._V, flow.vm_pu, flow.line_loading_pct, flow.trafo_loading_pct, flow.element_values]
    return [ok, flow.summary, flow.losses_mw, flow.p_import_mw, flow.q_import_mvar,
            *(None if a is None else a.copy().view(np.int64) for a in arrays)]


def _run(flow: PowerFlow, scales=SCALES) -> tuple[list, int]:
    solves = []
    newton = flow._newton
    flow._newton = lambda sbus: solves.append(1) or newton(sbus)  # counts the solver's calls
    got = []
    try:
        for scale in scales:
            p = {k: v.copy() for k, v in flow.p0.items()}
            q = {k: v.copy() for k, v in flow.q0.items()}
            p["load"], q["load"] = flow.p0["load"] * scale, flow.q0["load"] * scale
            got.append(_outputs(flow, flow.solve(p, q)))
    finally:
        del flow._newton  # (a copy would take the counter along)
    return got, len(solves)


def _same(a: list, b: list) -> bool:
    return all(len(x) == len(y) and all(np.array_equal(u, v) if isinstance(u, np.ndarray) else
                                        (u == v or u != u and v != v) for u, v in zip(x, y)) for x, y in zip(a, b))


def test_a_repeated_solve_is_skipped_with_the_same_bits(monkeypatch):
    skipping = _flow()
    got, solves = _run(skipping)
    sbus = pf._Kernels.sbus
    monkeypatch.setattr(pf._Kernels, "sbus", lambda self, p, q: (sbus(self, p, q)[0], False))  # never the same: no skip
    solving = _flow()
    expected, all_solves = _run(solving)
    assert [step[0] for step in expected].count(False) == 2  # the two overloads fail
    assert _same(got, expected)
    assert solving.n_repeats == 0 and skipping.n_repeats > 0  # (control) the skips happened, and only there
    assert solves == all_solves - skipping.n_repeats
    # no skip right after a change, a failure or the retry: the first two steps of each run of scales solve
    assert skipping.n_repeats <= sum(1 for a, b, c in zip(SCALES, SCALES[1:], SCALES[2:]) if a == b == c and a != 40.0)


def test_a_failed_solve_repeated_is_solved_again():
    flow = _flow()
    _run(flow, [1.0] * 5)
    assert flow._repeat  # (V a fixed point of the solve from the third repeat on)
    _, solves = _run(flow, [40.0, 40.0])
    # the first failure solved and retried rebuilt, the second (the same injections) solved again: nothing skipped
    assert solves == 3 and not flow._repeat


def test_a_copy_solves_its_first_step_again():
    flow = _flow()
    _run(flow, [1.0] * 5)
    assert flow._repeat
    twin = copy.deepcopy(flow)
    assert not twin._repeat
    got, solves = _run(twin, [1.0, 1.0])
    assert solves >= 1 and _same(got, _run(flow, [1.0, 1.0])[0])
