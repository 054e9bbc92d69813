"""The pandapower engine keeps lightsim2grid's Jacobian pattern and KLU analysis between solves
(pandapower_flow._SOLVER_CONTROL): the solver really keeps them, a failed solve has them rebuilt, and the
results are those of a solver that rebuilds them at every call, to the bit."""

from __future__ import annotations

import copy
import math

import numpy as np
import pandapower.networks as pn
import pytest

from cosim import grid_models
from cosim.adapters.grid import pandapower_flow as pf
from cosim.adapters.grid.pandapower_flow import PowerFlow

pytestmark = pytest.mark.skipif(not pf._control_found(),
                                reason="another lightsim2grid than the one whose solver control is known: rebuilt each call")

NETS = {
    "ieee33": lambda: grid_models.load_network("ieee33"),
    "simbench:1-MV-rural--0-sw": lambda: grid_models.load_network("simbench:1-MV-rural--0-sw"),
    "case118": pn.case118,
    "case1354pegase": pn.case1354pegase,
}


def _run(net, keep: bool, scales: np.ndarray, monkeypatch) -> tuple[PowerFlow, list]:
    """Solve ``net`` with its loads scaled by each row of ``scales`` in turn; every result of every solve."""
    monkeypatch.setattr(pf, "_KEEP_ANALYSIS", keep)
    flow = PowerFlow(copy.deepcopy(net))
    p = {k: flow.p0[k].copy() for k in flow.p0}
    q = {k: flow.q0[k].copy() for k in flow.q0}
    got = []
    for row in scales:
        p["load"], q["load"] = flow.p0["load"] * row, flow.q0["load"] * row
        ok = flow.solve(p, q)
        got.append((ok, flow._V.copy(), flow.vm_pu.copy(), flow.line_loading_pct.copy(), flow.trafo_loading_pct.copy(),
                    flow.losses_mw, flow.p_import_mw, flow.q_import_mvar))
    return flow, got


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return np.array_equal(a.view(np.int64), b.view(np.int64))  # the bits (NaN and -0.0 too)
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("name", NETS)
def test_kept_analysis_gives_the_rebuilt_numbers(name, monkeypatch):
    net = NETS[name]()
    rng = np.random.default_rng(7)
    scales = 1.0 + 0.08 * rng.standard_normal((25, len(net.load)))
    kept_flow, kept = _run(net, True, scales, monkeypatch)
    _, rebuilt = _run(net, False, scales, monkeypatch)
    assert all(step[0] for step in kept)
    for step, (a, b) in enumerate(zip(kept, rebuilt)):
        assert all(_same(x, y) for x, y in zip(a, b)), f"{name}: step {step} differs"
    stats = kept_flow._nr.get_linear_solver_stats()
    # one analysis and one factorization for the whole run, the rest refactorizations
    assert (stats.nb_analyze, stats.nb_factorize) == (1, 1) and stats.nb_refactorize >= 25


def test_rebuilt_at_every_call_without_it(monkeypatch):
    flow, _ = _run(grid_models.load_network("ieee33"), False, np.linspace(0.9, 1.1, 6)[:, None], monkeypatch)
    assert flow._nr.get_linear_solver_stats().nb_analyze == 6  # one per solve
    assert not flow._analysis_kept


def test_a_failed_solve_has_the_analysis_rebuilt(monkeypatch):
    """Loads the feeder cannot carry (no convergence) between ordinary steps: the step after the failure
    rebuilds (the analysis counted anew), and every step has the numbers of a solver rebuilt every call."""
    net = grid_models.load_network("ieee33")
    scales = np.array([1.0, 1.05, 40.0, 1.1, 0.95, 1.0])[:, None] * np.ones(len(net.load))
    flow, kept = _run(net, True, scales[:3], monkeypatch)
    assert [s[0] for s in kept] == [True, True, False] and not flow._analysis_kept
    p = {k: flow.p0[k].copy() for k in flow.p0}
    q = {k: flow.q0[k].copy() for k in flow.q0}
    p["load"], q["load"] = flow.p0["load"] * 1.1, flow.q0["load"] * 1.1
    before = flow._nr.get_linear_solver_stats()
    assert flow.solve(p, q) and flow._analysis_kept
    after = flow._nr.get_linear_solver_stats()
    assert (after.nb_reset - before.nb_reset, after.nb_analyze - before.nb_analyze) == (1, 1)  # reset, analysed anew
    p["load"], q["load"] = flow.p0["load"] * 0.95, flow.q0["load"] * 0.95
    assert flow.solve(p, q)
    again = flow._nr.get_linear_solver_stats()
    assert (again.nb_reset, again.nb_analyze) == (after.nb_reset, after.nb_analyze)  # kept again

    _, kept = _run(net, True, scales, monkeypatch)
    _, rebuilt = _run(net, False, scales, monkeypatch)
    assert [s[0] for s in kept] == [True, True, False, True, True, True]
    for step, (a, b) in enumerate(zip(kept, rebuilt)):
        assert all(_same(x, y) for x, y in zip(a, b)), f"step {step} differs"


def test_a_solve_failing_with_the_kept_analysis_is_solved_again_rebuilt(monkeypatch):
    """A kept analysis refactors with its first pivots: when a solve fails so, the same solve runs again at
    once with everything rebuilt (and converges if a rebuilding solver would), from the same start."""
    monkeypatch.setattr(pf, "_KEEP_ANALYSIS", True)
    flow = PowerFlow(grid_models.load_network("ieee33"))
    p = {k: flow.p0[k].copy() for k in flow.p0}
    q = {k: flow.q0[k].copy() for k in flow.q0}
    assert flow.solve(p, q) and flow._analysis_kept
    newton, calls = flow._newton, []

    def fail_once_kept(sbus):
        calls.append(flow._analysis_kept)
        return False if len(calls) == 1 else newton(sbus)

    monkeypatch.setattr(flow, "_newton", fail_once_kept)
    p["load"] = flow.p0["load"] * 1.05
    assert flow.solve(p, q)
    assert calls == [True, False]  # kept, failed; then rebuilt, converged
    assert flow._analysis_kept  # kept again after the converged solve
    reference = PowerFlow(grid_models.load_network("ieee33"))
    monkeypatch.setattr(pf, "_KEEP_ANALYSIS", False)
    assert reference.solve({k: reference.p0[k].copy() for k in reference.p0}, q)
    assert reference.solve(p, q)
    assert np.array_equal(flow._V, reference._V)
