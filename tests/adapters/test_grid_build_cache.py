"""PowerFlow's build cache (adapters/grid/pandapower_flow.py, ``key``): a flow of the same net and the
same attached elements starts from a copy of the model built before and solves to the same bits
as a flow built from scratch, several solves in a row; a flow whose net was changed before its
first solve (a line switched) is built, not served from the cache."""

from __future__ import annotations

import numpy as np

from cosim import grid_models
from cosim.adapters.grid import pandapower_flow as G

OUT = ("vm_pu", "line_loading_pct", "trafo_loading_pct")


def _flow(key, attach=(("load", "3", 1.0, 0.2), ("sgen", "3", 0.5, 0.0))):
    flow = G.PowerFlow(grid_models.load_network("ieee33"), key=key)
    for i, (kind, bus, p, q) in enumerate(attach):
        flow.attach(kind, bus, p, q, f"el{i}")
    return flow


def _run(flow, seed=1, n=4) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        p = {k: v * rng.uniform(0.5, 1.5, len(v)) for k, v in flow.p0.items()}
        q = {k: v * rng.uniform(0.5, 1.5, len(v)) for k, v in flow.q0.items()}
        assert flow.solve(p, q)
        out += [getattr(flow, a).copy() for a in OUT] + [np.array([flow.p_import_mw, flow.losses_mw])]
    return out


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_a_cached_model_solves_to_the_same_bits_as_a_fresh_build():
    key = ("test-cache", 1)
    fresh = _run(_flow(None))
    first = _flow(key)
    _same(_run(first), fresh)  # built and stored
    assert any(r[0] == key for r in G._BUILT)
    again = _flow(key)
    _same(_run(again), fresh)  # restored from the cache
    assert again._V is not first._V and again._vm_ext is not first._vm_ext  # its own arrays


def test_other_elements_or_a_switched_line_are_not_served_the_cached_model():
    key = ("test-cache", 2)
    _run(_flow(key))
    other = _flow(key, attach=(("load", "5", 2.0, 0.3),))
    _same(_run(other), _run(_flow(None, attach=(("load", "5", 2.0, 0.3),))))
    switched = _flow(key)
    switched.set_line_in_service(3, False)
    assert switched._recipe is None
    reference = _flow(None)
    reference.set_line_in_service(3, False)
    _same(_run(switched), _run(reference))
    assert not np.array_equal(_run(switched, seed=2)[0], _run(_flow(key), seed=2)[0])  # the line matters


def test_the_cache_keeps_at_most_a_few_models():
    """A hosting scan attaches a new load size per run: each is another model; the process keeps only the newest few,
    and a flow served from the bounded cache still solves."""
    G._BUILT.clear()
    for k in range(G._BUILT_MAX + 5):
        _run(_flow(("cap-test",), attach=(("load", "3", 0.1 * (k + 1), 0.0),)), n=1)
    assert len(G._BUILT) == G._BUILT_MAX
    _run(_flow(("cap-test",), attach=(("load", "3", 0.1 * (G._BUILT_MAX + 5), 0.0),)), n=1)  # the newest: a copy
    G._BUILT.clear()



def _switched(flow, pos=3):
    flow.set_line_in_service(pos, False)
    return flow


def test_a_deep_copy_shares_the_net_until_it_edits_it():
    """``copy.deepcopy`` of a flow (a gym reset's copy of a grid set up once) shares the pandapower net;
    a copy that switches a line takes its own net first: the original and its other copies keep the
    line, and every copy solves to the same bits as a flow built anew with the same edits."""
    import copy

    key = ("test-cache", 3)
    _run(_flow(key))  # the model of this key is built and kept, as after a gym env's first episode
    kept = _flow(key)
    a, b, c = copy.deepcopy(kept), copy.deepcopy(kept), copy.deepcopy(kept)
    assert a.net is kept.net and b.net is kept.net  # shared, not copied
    _same(_run(a), _run(_flow(None)))
    assert a.net is kept.net  # a solve on the restored model edits nothing in the net
    b.set_line_in_service(3, False)
    assert b.net is not kept.net and not bool(b.net.line["in_service"].iat[3])
    assert bool(kept.net.line["in_service"].iat[3]) and bool(c.net.line["in_service"].iat[3])
    _same(_run(b), _run(_switched(_flow(None))))
    _same(_run(c), _run(_flow(None)))  # the other copy solves on the net as it was
    _switched(c)  # a rebuild after a restored model (its pending net keys written in first)
    assert c.net is not kept.net and "_options" in c.net
    _same(_run(c, seed=3), _run(_switched(_flow(None)), seed=3))
    assert bool(kept.net.line["in_service"].iat[3])


def test_flows_restored_from_one_model_share_its_matrices_and_solve_apart():
    """Two flows served the same kept model share its read-only arrays (admittances, maps) and each have
    their own state (voltages, the buffers a solve writes): solved in turn, each gives the bits of a
    fresh flow."""
    key = ("test-cache", 4)
    _run(_flow(key), n=1)
    one, two = _flow(key), _flow(key)
    runs_one, runs_two = [], []
    for seed in (5, 6, 7):  # interleaved: a write into a shared array would show in the other
        runs_one += _run(one, seed=seed, n=2)
        runs_two += _run(two, seed=seed + 10, n=2)
    assert one._ybus is two._ybus and one._inj_factor is two._inj_factor
    assert one._V is not two._V and one._vm_ext is not two._vm_ext and one._loading_ext is not two._loading_ext
    fresh_one, fresh_two = _flow(None), _flow(None)
    _same(runs_one, sum((_run(fresh_one, seed=s, n=2) for s in (5, 6, 7)), []))
    _same(runs_two, sum((_run(fresh_two, seed=s + 10, n=2) for s in (5, 6, 7)), []))
