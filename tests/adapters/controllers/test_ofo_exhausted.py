"""OFO's per-site last-resort signal ``exhausted_<site>_frac`` (adapters/controllers/ofo/, ``sites``)
and load shifting driven by it (adapters/controllers/load_shift.py).

The signal has rule_voltage's meaning (``exhausted_frac``: the site's own control at its limit): 1
while the site's allowance is at its floor ``u_min_frac`` with an under-voltage dual active on its
own bus's phases (at 1 with an over-voltage dual for an over-voltage), else 0. Checked by hand on
the three-bus radial feeder of test_ofo_sites.py (near site at mid, end site at far): only the far
bus is driven low, so only the end site's signal may turn 1, and only once its allowance is at the
floor; a reading back in band clears the dual and the signal.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.adapters.controllers.load_shift import LoadShiftParams, Shifter
from cosim.adapters.controllers.ofo import FeederSensitivity, OFOController, OFOParams, OFOSim, OFOSimParams

from .test_ofo_sites import SITES, three_bus  # noqa: F401  (the feeder fixture)

PHASES = "abc"


def measured(mid: float, far: float) -> dict[str, float]:
    return {**{f"bus_mid_{ph}_vm_pu": mid for ph in PHASES}, **{f"bus_far_{ph}_vm_pu": far for ph in PHASES}}


SITE_POWER = {"p_dc_near_mw": 1.0, "q_dc_near_mvar": 0.25, "p_dc_end_mw": 1.0, "q_dc_end_mvar": 0.25}


def controller(network) -> OFOController:
    p = OFOParams(network=str(network), sites=SITES, margin_pu=0.0, u_min_frac=0.0)
    return OFOController(p, FeederSensitivity(p))


def test_signal_is_zero_with_room_one_at_the_floor_with_the_bus_low_and_zero_back_in_band(three_bus):  # noqa: F811
    """far at 0.93 pu, mid in band at 0.97: the end site's dual grows and its allowance falls; its
    signal is 0 while the allowance has room, 1 from the step it reaches 0 (the floor) as long as
    far stays low; the near site's own bus never violates, so its signal stays 0 even if the shared
    duals throttle it too. far back at 0.97: the dual decays to 0 and the signal clears."""
    ctl = controller(three_bus)
    ctl.update(0, measured(0.97, 0.97), SITE_POWER)  # in band: nothing to do
    out = ctl.outputs()
    assert out["exhausted_near_frac"] == 0.0 and out["exhausted_end_frac"] == 0.0
    assert ctl.us.tolist() == [1.0, 1.0]
    seen_room, t_floor = False, None
    for t in range(1, 200):
        ctl.update(t, measured(0.97, 0.93), SITE_POWER)
        out = ctl.outputs()
        assert out["exhausted_near_frac"] == 0.0  # its own bus is in band
        if ctl.us[1] > 1e-3:
            seen_room = True
            assert out["exhausted_end_frac"] == 0.0, (t, ctl.us)
        else:
            t_floor = t if t_floor is None else t_floor
            assert out["exhausted_end_frac"] == 1.0
    assert seen_room and t_floor is not None and out["allowance_end_frac"] == 0.0
    cleared = None
    for t in range(200, 600):
        ctl.update(t, measured(0.97, 0.97), SITE_POWER)
        if ctl.outputs()["exhausted_end_frac"] == 0.0:
            cleared = t if cleared is None else cleared
        else:
            assert cleared is None  # once cleared (in band), it stays 0
    assert cleared is not None and ctl.outputs()["exhausted_end_frac"] == 0.0


def test_over_voltage_signal_at_the_top(three_bus):  # noqa: F811
    """An over-voltage at the end site's bus with its allowance already at 1 (it cannot draw more):
    signal 1 at once; the under-voltage signal needs the floor instead."""
    ctl = controller(three_bus)
    ctl.update(0, measured(1.0, 1.06), SITE_POWER)
    assert ctl.us[1] == 1.0 and ctl.outputs()["exhausted_end_frac"] == 1.0


def test_signal_is_declared_only_with_sites():
    """``exhausted_<site>_frac`` is in the meta with ``[sims.<id>] sites``; without them the meta is unchanged."""
    with_sites = set(OFOSim.meta_for(OFOSimParams(sites=["near", "end"]))["models"]["OFO"]["attrs"])
    assert {"exhausted_near_frac", "exhausted_end_frac"} <= with_sites
    assert not any(a.startswith("exhausted") for a in OFOSim.meta_for(OFOSimParams())["models"]["OFO"]["attrs"])


def test_shifter_moves_replicas_only_after_ofos_signal(three_bus):  # noqa: F811
    """The loop OFO -> load_shift with the end site low (far 0.93 pu) and the near site in band: the
    shifter gets OFO's ``exhausted_end_frac`` each step and moves nothing while OFO still has room,
    then 2 replicas (8 GPUs / 4) per step from end to near from the step OFO's signal turns 1."""
    ctl = controller(three_bus)
    sh = Shifter(LoadShiftParams(n_gpus_per_replica=4, n_gpus_per_shift=8, replicas={"near": 20, "end": 20},
                                 active={"near": 10, "end": 18}, rate_req_s={"near": 100.0, "end": 180.0}),
                 ["near", "end"])
    first_signal, first_shift = None, None
    for t in range(200):
        ctl.update(t, measured(0.97, 0.93), SITE_POWER)
        out = ctl.outputs()
        sh.update(t, {"near": 0.97, "end": 0.93}, {"near": 0.97, "end": 0.93},
                  {"near": out["exhausted_near_frac"], "end": out["exhausted_end_frac"]})
        if out["exhausted_end_frac"] == 1.0 and first_signal is None:
            first_signal = t
        if sh.n_shifts and first_shift is None:
            first_shift = t
            n_first = sh.n_shifts
    assert first_signal is not None and first_signal > 0
    assert first_shift == first_signal and n_first == 1
    assert sh.active["end"] < 18 and sh.active["near"] > 10 and sh.active["near"] + sh.active["end"] == 28
    assert sum(sh.demand.values()) == pytest.approx(280.0)
    assert np.all(ctl.us >= 0.0)


def test_dead_bus_phases_get_no_row_on_ieee123():
    """IEEE 123's buses behind its normally-open switches (251, 350, 451) have no voltage (NaN) on
    the feeder copy: they get no row of J, so the allowances stay finite (they were NaN before)."""
    p = OFOParams(network="ieee123", sites=[{"name": "z1", "dc_bus": "8", "p_flex_mw": 0.1},
                                            {"name": "z3", "dc_bus": "60", "p_flex_mw": 0.4}])
    ctl = OFOController(p, FeederSensitivity(p))
    names = ctl.model.flow.phase_attrs
    measured = {n: 0.94 for n in names}
    ctl.update(0, measured, {"p_dc_z1_mw": 0.6, "q_dc_z1_mvar": 0.15, "p_dc_z3_mw": 1.5, "q_dc_z3_mvar": 0.4})
    assert "bus_350_a_vm_pu" in names and "bus_350_a_vm_pu" not in ctl.rows
    assert np.isfinite(ctl.jac).all() and np.isfinite(ctl.us).all() and (ctl.us < 1.0).all()


def test_ieee123_ofo_scenario_shifts_only_once_ofo_is_exhausted(tmp_path):
    """scenarios/ieee123_multisite_ofo.toml, first 50 s (direct engine): no shift before OFO's
    ``exhausted_z3_frac`` first turns 1 (z3's allowance at its floor, 60 still low), the first in that
step (the shifter reads the signal of the same step); then replicas
    leave z3 for z1/z2, the total stays 550 and the whole feeder is in band by the end of the window.
    OFO alone over the same window moves nothing and keeps z3 at allowance 0."""
    path = Path(__file__).resolve().parents[3] / "scenarios" / "ieee123_multisite_ofo.toml"
    short = {"scenario.duration_s": 50, "scenario.engine": "direct"}
    on = cosim.run(path, out_dir=tmp_path / "on", overrides=short)
    alone = cosim.run(path, out_dir=tmp_path / "alone", overrides={**short, "entities.shift.enabled": False})
    assert on.ok and alone.ok, (on.reason, alone.reason)
    ts = on.timeseries()
    signal = ts["ofo.exhausted_z3_frac"].to_numpy()
    shifts = ts["shift.n_shifts"].to_numpy()
    first_signal = int(np.argmax(signal >= 0.5))
    assert signal.max() == 1.0 and first_signal > 0
    assert shifts[:first_signal].max() == 0 and shifts[first_signal] == 1  # the shifter reads the signal in its step
    assert shifts[-1] > 1
    assert ts["shift.n_active_z3"].iloc[-1] < 350
    assert (ts[["shift.n_active_z1", "shift.n_active_z2", "shift.n_active_z3"]].sum(axis=1) == 550).all()
    assert (ts["feeder.allbus_vm_min_pu"].iloc[-10:] >= 0.95).all()
    ts_alone = alone.timeseries()
    assert (ts_alone["shift.n_shifts"] == 0).all() and ts_alone["ofo.allowance_z3_frac"].iloc[-1] == 0.0


def test_own_bus_is_matched_exactly_not_by_prefix(tmp_path):
    """Buses ``x`` and ``x_1`` (src -(Z1)- x -(Z2)- x_1): only ``x_1`` is held low, and the shared
    duals throttle both sites to the floor; the site at ``x`` must not take ``bus_x_1_*`` for its own
    bus (a prefix match on ``bus_x_`` did: review 2026-12-01), so its signal stays 0."""
    path = tmp_path / "xbus.dss"
    path.write_text(THREE_BUS_X)
    sites = [{"name": "near", "dc_bus": "x", "p_flex_mw": 0.6}, {"name": "end", "dc_bus": "x_1", "p_flex_mw": 0.6}]
    p = OFOParams(network=str(path), sites=sites, margin_pu=0.0, u_min_frac=0.0)
    ctl = OFOController(p, FeederSensitivity(p))
    low = {**{f"bus_x_{ph}_vm_pu": 0.97 for ph in PHASES}, **{f"bus_x_1_{ph}_vm_pu": 0.93 for ph in PHASES}}
    power = {"p_dc_near_mw": 1.0, "q_dc_near_mvar": 0.25, "p_dc_end_mw": 1.0, "q_dc_end_mvar": 0.25}
    for t in range(400):
        ctl.update(t, low, power)
        out = ctl.outputs()
        assert out["exhausted_near_frac"] == 0.0, (t, ctl.us)
    assert ctl.us[0] < 1e-3 and out["exhausted_end_frac"] == 1.0  # both at the floor; only x_1 is low


THREE_BUS_X = """Clear
New Circuit.xbus basekv=12.47 pu=1.0 phases=3 bus1=src MVAsc3=1000000 MVAsc1=1000000
New Line.l1 bus1=src bus2=x phases=3 r1=1.0 x1=2.0 r0=1.0 x0=2.0 c1=0 c0=0 length=1 units=none
New Line.l2 bus1=x bus2=x_1 phases=3 r1=1.5 x1=3.0 r0=1.5 x0=3.0 c1=0 c0=0 length=1 units=none
Set VoltageBases=[12.47]
CalcVoltageBases
"""
