"""A pandapower flow copied (``copy.deepcopy``) or pickled after it has solved: lightsim2grid's solver cannot be
copied, so the copy makes its own and brings it to the state of the original's (the analysis the original keeps
is made again from the solve that made it, pandapower_flow.PowerFlow._solver); stepped side by side, original
and copy give the bits of a flow that was never copied, through a failed solve and its retry too."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pandapower.networks as pn
import pytest

from cosim import grid_models
from cosim.adapters.grid import pandapower_flow as pf
from cosim.adapters.grid.pandapower_flow import PowerFlow

NETS = {"ieee33": lambda: grid_models.load_network("ieee33"), "case118": pn.case118}


def _loads(flow: PowerFlow, scales: np.ndarray):
    for row in scales:
        p = {k: flow.p0[k].copy() for k in flow.p0}
        q = {k: flow.q0[k].copy() for k in flow.q0}
        p["load"], q["load"] = flow.p0["load"] * row, flow.q0["load"] * row
        yield p, q


def _step(flow: PowerFlow, p, q) -> tuple:
    ok = flow.solve(p, q)
    return (ok, flow._V.copy(), flow.vm_pu.copy(), flow.line_loading_pct.copy(), flow.trafo_loading_pct.copy(),
            np.array([flow.losses_mw, flow.p_import_mw, flow.q_import_mvar]))


def _bits(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and all(np.array_equal(x.view(np.int64), y.view(np.int64)) for x, y in zip(a[1:], b[1:]))


def _scales(n_loads: int, fail_at: int | None = None, n: int = 12) -> np.ndarray:
    rng = np.random.default_rng(11)
    scales = 1.0 + 0.1 * rng.standard_normal((n, n_loads))
    if fail_at is not None:
        scales[fail_at] = 40.0  # more than the feeder carries: no convergence, the next step rebuilds
    return scales


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
@pytest.mark.parametrize("name", NETS)
def test_a_copy_after_solves_steps_as_the_original(name, how):
    net = NETS[name]()
    scales = _scales(len(net.load))
    reference = PowerFlow(copy.deepcopy(net))
    expected = [_step(reference, p, q) for p, q in _loads(reference, scales)]

    original = PowerFlow(copy.deepcopy(net))
    got = [_step(original, p, q) for p, q in _loads(original, scales[:5])]
    copied = copy.deepcopy(original) if how == "deepcopy" else pickle.loads(pickle.dumps(original))
    assert copied._nr is None and copied._analysis_kept == original._analysis_kept
    rest = list(_loads(original, scales[5:]))
    from_original, from_copy = [], []
    for p, q in rest:  # interleaved: nothing of one may leak into the other
        from_copy.append(_step(copied, p, q))
        from_original.append(_step(original, p, q))
    assert all(_bits(a, b) for a, b in zip(got + from_original, expected))
    assert all(_bits(a, b) for a, b in zip(from_copy, expected[5:]))
    if pf._KEEP_ANALYSIS:  # the copy's solver kept the replayed analysis: one analysis, one factorization
        stats = copied._nr.get_linear_solver_stats()
        assert (stats.nb_analyze, stats.nb_factorize) == (1, 1)


def test_a_copy_after_a_failed_solve_and_a_copy_of_a_copy():
    """Copied right after a failure (the next solve rebuilds the analysis in both) and after the retry's
    rebuilt analysis; a copy of a copy that never solved replays the same analysis."""
    net = grid_models.load_network("ieee33")
    scales = _scales(len(net.load), fail_at=3)
    reference = PowerFlow(copy.deepcopy(net))
    expected = [_step(reference, p, q) for p, q in _loads(reference, scales)]
    assert [e[0] for e in expected].count(False) == 1

    flow = PowerFlow(copy.deepcopy(net))
    steps = list(_loads(flow, scales))
    got = [_step(flow, *pq) for pq in steps[:4]]
    after_failure = copy.deepcopy(flow)
    assert not after_failure._analysis_kept
    got += [_step(flow, *pq) for pq in steps[4:6]]
    after_retry = copy.deepcopy(flow)
    twice = copy.deepcopy(after_retry)
    assert _bits_all([_step(after_failure, *pq) for pq in steps[4:]], expected[4:])
    assert _bits_all([_step(after_retry, *pq) for pq in steps[6:]], expected[6:])
    assert _bits_all([_step(twice, *pq) for pq in steps[6:]], expected[6:])
    assert _bits_all(got + [_step(flow, *pq) for pq in steps[6:]], expected)


def _bits_all(a: list, b: list) -> bool:
    return len(a) == len(b) and all(_bits(x, y) for x, y in zip(a, b))


def test_a_copy_replays_the_analysis_its_original_keeps():
    """The copy's solver is brought to the original's state before its first solve: the solve that built the
    original's analysis made again (one analysis, one factorization) and the solver told to keep it; a copy
    of a flow whose next solve rebuilds anyway (after a failure) gets a new solver as it is (control)."""
    if not pf._KEEP_ANALYSIS:
        pytest.skip("the analysis is rebuilt at every solve with this lightsim2grid")
    net = grid_models.load_network("ieee33")
    flow = PowerFlow(net)
    steps = list(_loads(flow, _scales(len(net.load), fail_at=4)))
    for pq in steps[:3]:
        _step(flow, *pq)
    replayed = copy.deepcopy(flow)._solver()
    stats = replayed.get_linear_solver_stats()
    assert (stats.nb_analyze, stats.nb_factorize) == (1, 1)
    assert _control(replayed) == b"\x00" * pf._SOLVER_CONTROL[2]  # nothing changed: keep the analysis
    _step(flow, *steps[3])
    assert not _step(flow, *steps[4])[0]
    fresh = copy.deepcopy(flow)._solver()
    assert fresh.get_linear_solver_stats().nb_analyze == 0
    assert _control(fresh) == b"\x01" * pf._SOLVER_CONTROL[2]  # as made: everything rebuilt at its first solve


def _control(nr) -> bytes:
    import ctypes

    return ctypes.string_at(pf._solver_control_address(nr), pf._SOLVER_CONTROL[2])
