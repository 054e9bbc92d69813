"""Cross-site load shifting (OpenG2G's ``LoadShiftController`` rules): warm start only, last
resort, directional, capacity-aware, incremental; the moved demand is conserved, and through
two real Clusters the tokens the source stops serving are served at the destination.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from cosim.adapters.controllers.load_shift import LoadShiftParams, LoadShiftSim, Shifter
from cosim.adapters.datacenter import ClusterParams, build_cluster, knobs_from
from cosim.kpis.load_shift import BLOCK
from cosim.kpis._block import KpiInput

SITES = ["a", "b", "c"]


def shifter(**kw) -> Shifter:
    params = {"n_gpus_per_replica": 4, "n_gpus_per_shift": 8, "replicas": {"a": 10, "b": 10, "c": 10},
              "active": {"a": 8, "b": 5, "c": 9}, "rate_req_s": {"a": 80.0, "b": 50.0, "c": 90.0}, **kw}
    return Shifter(LoadShiftParams(**params), SITES)


def v(**kw):
    return {s: kw.get(s, 1.0) for s in SITES}


def test_undervoltage_moves_two_replicas_out_to_the_highest_voltage_site_with_a_warm_spare():
    sh = shifter()
    assert sh.n_per_shift == 2  # 8 GPUs per shift / 4 per replica
    sh.update(0, v(a=0.94, b=0.99, c=1.01), v(), {})
    # c has the highest vm_min and 1 spare (9 of 10 active): cut to 1 replica
    assert sh.active == {"a": 7, "b": 5, "c": 10}
    assert sh.demand["a"] == pytest.approx(80.0 * 7 / 8) and sh.demand["c"] == pytest.approx(90.0 + 10.0)
    sh.update(1, v(a=0.94, b=0.99, c=1.01), v(), {})  # c is full now: b takes 2
    assert sh.active == {"a": 5, "b": 7, "c": 10}
    assert sum(sh.demand.values()) == pytest.approx(220.0)  # conserved
    assert sh.demand["a"] / sh.active["a"] == pytest.approx(10.0)  # per-replica load at the source unchanged
    out = sh.outputs()
    assert out["replicas_a_frac"] == 0.5 and out["n_moved_in_a"] == -3 and out["n_shifts"] == 2
    assert out["demand_b_ratio"] == pytest.approx((50.0 + 20.0) / 50.0)
    assert out["moved_in_a_per_s"] + out["moved_in_b_per_s"] + out["moved_in_c_per_s"] == pytest.approx(0.0)


def test_warm_start_only_capacity_and_last_resort():
    cold = shifter(active={"a": 8, "b": 0, "c": 10})  # b does not run the model, c has no spare
    cold.update(0, v(a=0.94, b=1.02), v(), {})
    assert cold.n_shifts == 0
    sh = shifter()
    sh.update(0, v(a=0.94), v(), {"a": 0.0})  # a's own control not exhausted: no shift
    assert sh.n_shifts == 0
    sh.update(1, v(a=0.94, c=0.945), v(), {"a": 1.0, "c": 0.0})  # c is itself under: only b is a destination
    assert sh.active["b"] == 7 and sh.active["c"] == 9
    keep = shifter(active={"a": 2, "b": 5, "c": 5}, n_active_min=1)
    keep.update(0, v(a=0.90), v(), {})
    assert keep.active["a"] == 1  # keeps n_active_min serving: moves 1, not 2
    keep.update(1, v(a=0.90), v(), {})
    assert keep.active["a"] == 1 and keep.n_shifts == 1
    with pytest.raises(ValueError, match="cannot move"):
        keep.move("a", "b", 1)


def test_overvoltage_pulls_load_in_from_the_lowest_voltage_site_and_hold_time():
    sh = shifter(hold_s=10.0)
    sh.update(0, v(), v(b=1.06, a=1.02, c=1.01), {})
    assert sh.active == {"a": 8, "b": 7, "c": 7}  # from c, the lowest vm_max
    sh.update(5, v(), v(b=1.06, a=1.02, c=1.01), {})
    assert sh.n_shifts == 1  # b and c hold for 10 s
    sh.update(10, v(), v(b=1.06, a=1.02, c=1.01), {})
    assert sh.n_shifts == 2
    off = shifter(enabled=False)
    off.update(0, v(a=0.80), v(), {})
    assert off.n_shifts == 0


def test_params_and_site_checks():
    with pytest.raises(ValidationError, match="active"):
        LoadShiftParams(n_gpus_per_replica=1, replicas={"a": 1}, active={"a": 2}, rate_req_s={"a": 1.0})
    params = LoadShiftParams(n_gpus_per_replica=1, replicas={"a": 1}, rate_req_s={"a": 1.0, "x": 1.0})
    problems = LoadShiftSim.check_entity("LoadShift", params, None, LoadShiftSim.SimParams(sites=["a", "b"]))
    assert any("missing ['b']" in p for p in problems) and any("['x']" in p for p in problems)


FLEET = {"name": "chat", "model": "llama-3.1-8b", "replicas": 40, "max_batch": 256, "arrivals": "azure_conv",
         "diurnal_amp_frac": 0.0}


def _cluster(rate: float):
    params = ClusterParams.model_validate({"node": "DGX-H100", "n_gpus": 0, "training": {"n_jobs": 0},
                                           "inference": [{**FLEET, "rate_req_s": rate}]})
    return build_cluster(params, np.random.default_rng(1), 3600.0)


def test_moved_load_is_conserved_through_two_clusters():
    """Two sites serving the same trace shape, unsaturated (served = offered): after 10 of a's 30
    active replicas move to b, a serves 1/3 fewer tokens, b serves exactly those, and the two
    sites' tokens sum to the baseline's per step (to the fluid model's rounding), as does their IT energy."""
    sh = Shifter(LoadShiftParams(n_gpus_per_replica=1, n_gpus_per_shift=10, replicas={"a": 40, "b": 40},
                                 active={"a": 30, "b": 20}, rate_req_s={"a": 60.0, "b": 40.0}), ["a", "b"])
    sh.update(0, {"a": 0.94, "b": 1.0}, {"a": 1.0, "b": 1.0}, {})
    out = sh.outputs()
    assert out["n_active_a"] == 20 and out["n_active_b"] == 30
    base = {s: _cluster(r) for s, r in (("a", 60.0), ("b", 40.0))}
    moved = {s: _cluster(r) for s, r in (("a", 60.0), ("b", 40.0))}
    rows = []
    for k in range(120):
        t = 60.0 * k
        b0 = {s: base[s].step(t, 60.0, knobs_from({"replicas_chat_frac": f}, ["chat"]))
              for s, f in (("a", 30 / 40), ("b", 20 / 40))}
        b1 = {s: moved[s].step(t, 60.0, knobs_from({"replicas_chat_frac": out[f"replicas_{s}_frac"],
                                                    "demand_chat_ratio": out[f"demand_{s}_ratio"]}, ["chat"]))
              for s in ("a", "b")}
        rows.append({f"{w}_{s}": r[s]["tokens_per_s"] for w, r in (("base", b0), ("moved", b1)) for s in ("a", "b")})
        rows[-1].update({f"p_{w}_{s}": r[s]["p_it_mw"] for w, r in (("base", b0), ("moved", b1)) for s in ("a", "b")})
    df = pd.DataFrame(rows)
    assert (df.moved_a + df.moved_b).to_numpy() == pytest.approx((df.base_a + df.base_b).to_numpy(), rel=1e-6)
    assert df.moved_a.to_numpy() == pytest.approx(df.base_a.to_numpy() * 2 / 3, rel=1e-6)
    assert (df.moved_b - df.base_b).to_numpy() == pytest.approx((df.base_a / 3).to_numpy(), rel=1e-6)
    # both sites carry 2 req/s per active replica before and after: the moved replicas draw at b
    # what they drew at a, so the two sites' IT energy is conserved too
    assert (df.p_moved_a + df.p_moved_b).sum() == pytest.approx((df.p_base_a + df.p_base_b).sum(), rel=1e-6)
    assert df.p_moved_a.sum() < df.p_base_a.sum()


def test_kpi_block_sums_the_moved_requests_to_zero():
    idx = pd.date_range("2024-01-01", periods=3, freq="60s", tz="UTC")
    ts = pd.DataFrame({"ls.n_shifts": [0, 1, 1], "ls.n_moved_in_a": [0, -2, -2], "ls.n_moved_in_b": [0, 2, 2],
                       "ls.moved_in_a_per_s": [0.0, -5.0, -5.0], "ls.moved_in_b_per_s": [0.0, 5.0, 5.0],
                       "a.tokens_per_s": [10.0, 8.0, 8.0], "a.itl_p99_ms": [0.0, 40.0, 50.0]}, index=idx)
    cols = BLOCK.columns(list(ts.columns), None)
    assert "a.tokens_per_s" in cols and "ls.n_shifts" in cols
    out = BLOCK.compute(KpiInput(ts=ts[cols], dt_h=1 / 60, step_s=60, roles=None))["load_shift"]["ls"]
    assert out["n_shifts"] == 1 and out["a"]["n_moved_in_final"] == -2
    assert out["a"]["n_requests_moved_in"] == -600.0 and out["b"]["n_requests_moved_in"] == 600.0
    assert out["a"]["n_tokens"] == 26.0 * 60 and out["a"]["itl_p99_mean_ms"] == 45.0
    assert math.isclose(out["a"]["tokens_mean_per_s"], 26.0 / 3)


def test_latch_carries_the_site_to_the_margin_even_as_its_own_control_releases():
    """Started by a saturated violation, shifting goes on while the site is within margin_pu of
    the band, even when its rule has begun releasing (exhausted 0); with margin 0 it stops at
    the band (OpenG2G's condition)."""
    sh = shifter(margin_pu=0.01)
    sh.update(0, v(a=0.945, b=0.99, c=0.98), v(), {"a": 1.0})
    assert sh.n_shifts == 1
    sh.update(1, v(a=0.955, b=0.99, c=0.98), v(), {"a": 0.0})  # in band, released, inside the margin
    assert sh.n_shifts == 2
    sh.update(2, v(a=0.961, b=0.99, c=0.98), v(), {"a": 0.0})  # past the margin: latch cleared
    sh.update(3, v(a=0.955, b=0.99, c=0.98), v(), {"a": 0.0})  # back inside the margin, not saturated
    assert sh.n_shifts == 2
    plain = shifter()
    plain.update(0, v(a=0.945, b=0.99), v(), {"a": 1.0})
    plain.update(1, v(a=0.951, b=0.99), v(), {"a": 1.0})  # in band: no shift without a margin
    assert plain.n_shifts == 1


def test_carbon_variant_moves_toward_the_cleanest_site_only_with_voltage_room():
    sh = shifter(ci_gap_g_kwh=100.0, margin_pu=0.01)
    ci = {"a": 450.0, "b": 120.0, "c": 300.0}
    sh.update(0, v(), v(), {}, ci)  # all at 1.0 pu: a (dirtiest) -> b (cleanest)
    assert sh.active == {"a": 6, "b": 7, "c": 9}
    assert sum(sh.demand.values()) == pytest.approx(220.0)
    sh.update(1, v(b=0.955), v(), {}, ci)  # b within the margin: not a destination; c is
    assert sh.active == {"a": 5, "b": 7, "c": 10}  # c had one spare
    sh.update(2, v(b=0.955), v(), {}, {"a": 350.0, "b": 120.0, "c": 300.0})  # c full, b no room
    assert sh.n_shifts == 2
    small = shifter(ci_gap_g_kwh=200.0)
    small.update(0, v(), v(), {}, {"a": 300.0, "b": 150.0, "c": 200.0})  # gap 150 <= 200
    assert small.n_shifts == 0
    volt = shifter(ci_gap_g_kwh=0.0)
    volt.update(0, v(a=0.94), v(), {}, {"a": 100.0, "b": 500.0, "c": 500.0})  # voltage first, no carbon move
    assert volt.n_shifts == 1 and volt.active["a"] == 6


def test_shift_on_signal_moves_load_out_of_an_in_band_site_while_its_signal_is_1():
    """``shift_on_signal`` (for OFO's ``shift_when_throttled``): every site in band; a and c signalled move 2
    replicas out each to the in-band site with the highest voltage whose own signal is 0 (b: c is
    signalled, so not a destination); no latch: nothing moves once the signals drop; a site whose signal
    is unconnected is a destination. Without the flag nothing moves (a's own bus is in band)."""
    last_resort = shifter()
    last_resort.update(0, v(a=0.97, b=0.99, c=1.01), v(), {"a": 1.0, "b": 0.0, "c": 1.0})
    assert last_resort.n_shifts == 0
    sh = shifter(shift_on_signal=True)
    sh.update(0, v(a=0.97, b=0.99, c=1.01), v(), {"a": 1.0, "b": 0.0, "c": 1.0})
    assert sh.active == {"a": 6, "b": 9, "c": 7}
    sh.update(1, v(a=0.97, b=0.99, c=1.01), v(), {"a": 0.0, "b": 0.0, "c": 0.0})  # the signals drop: stop
    assert sh.n_shifts == 2
    sh.update(2, v(a=0.97, b=0.99, c=1.01), v(), {"a": 1.0, "b": 0.0})  # c's signal unconnected: a destination
    assert sh.active == {"a": 4, "b": 9, "c": 9}
