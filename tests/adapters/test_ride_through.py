"""Ride-through at the point of connection, and the fault events that drive it.

Curves: ITI (CBEMA) Curve Application Note (ITI, 2000): the lower boundary tolerates any
voltage for 20 ms, 70 % for 0.5 s, 80 % for 10 s; SEMI F47-0706: 50 % for 200 ms, 70 % for
0.5 s, 80 % for 1 s. The dip counter stands for the UPS logic behind NERC's 10 July 2024
incident (six faults within 82 s; ~1,500 MW of data centers transferred to backup).
"""

from __future__ import annotations

import pytest

from cosim.adapters.faults import Faults, FaultsParams
from cosim.adapters.ride_through import RideThrough, RideThroughParams


def _rt(**kw) -> RideThrough:
    return RideThrough(RideThroughParams.model_validate(kw))


def _sag_run(rt: RideThrough, faults: list, dt: float, duration_s: float, p_mw: float = 100.0) -> list[dict]:
    line = Faults(FaultsParams.model_validate({"events": faults}))
    rows = []
    for k in range(round(duration_s / dt)):
        sag = line.over(k * dt, dt)
        rows.append(rt.step(k * dt, dt, {"p_load_mw": p_mw, "q_load_mvar": 0.2 * p_mw, **sag}))
    return rows


@pytest.mark.parametrize("dt", [0.01, 0.1, 1.0])
@pytest.mark.parametrize("curve, sag, rides", [
    ("itic", [1.0, 0.4, 0.75], True), ("itic", [1.0, 0.6, 0.75], False),     # 70-80 %: 0.5 s
    ("itic", [1.0, 0.02, 0.3], True), ("itic", [1.0, 0.05, 0.3], False),     # below 70 %: 20 ms
    ("itic", [1.0, 9.0, 0.85], True), ("itic", [1.0, 11.0, 0.85], False),    # 80-90 %: 10 s
    ("semi_f47", [1.0, 0.15, 0.55], True), ("semi_f47", [1.0, 0.3, 0.55], False),  # 50 %: 200 ms
    ("semi_f47", [1.0, 0.05, 0.45], False),                                   # below 50 %: none
])
def test_the_curves_whatever_the_step(curve, sag, rides, dt):
    """The sag's length comes with it (t_sag_s), so 20 ms is 20 ms also at 1 s steps."""
    rows = _sag_run(_rt(curve=curve), [sag], dt, 13.0)
    assert all(r["in_service"] for r in rows) is rides


def test_the_dip_counter_trips_on_the_third_dip_within_a_minute():
    faults = [[10.0, 0.1, 0.75], [22.0, 0.1, 0.75], [34.0, 0.1, 0.75]]
    rows = _sag_run(_rt(n_dips_to_trip=3, dip_window_s=60.0), faults, 0.1, 40.0)
    first_off = next(k for k, r in enumerate(rows) if not r["in_service"])
    assert first_off == 340 and rows[-1]["n_trips"] == 1
    spread = [[10.0, 0.1, 0.75], [50.0, 0.1, 0.75], [90.0, 0.1, 0.75]]
    assert all(r["in_service"] for r in _sag_run(_rt(n_dips_to_trip=3), spread, 0.1, 100.0))
    assert all(r["in_service"] for r in _sag_run(_rt(), faults, 0.1, 40.0))  # no counter: each dip rides


def test_backup_carries_the_load_ups_then_generator_and_energy_balances():
    """Grid draw drops to 0 within the step; the UPS carries 10 s, then the generator; nothing
    is lost; the UPS energy falls by exactly what it delivered."""
    rt = _rt(curve="itic", e_ups_mwh=1.0, genset_start_s=10.0)
    rows = _sag_run(rt, [[1.0, 1.0, 0.3]], 0.1, 30.0)
    k = next(i for i, r in enumerate(rows) if not r["in_service"])
    assert rows[k]["p_mw"] == 0.0 and rows[k]["q_mvar"] == 0.0 and rows[k]["p_lost_mw"] == 100.0
    ups_mwh = sum(r["p_ups_mw"] for r in rows) * 0.1 / 3600.0
    assert ups_mwh == pytest.approx(100.0 * 10.0 / 3600.0, rel=1e-9)
    assert rows[-1]["e_ups_mwh"] == pytest.approx(1.0 - ups_mwh, rel=1e-12)
    for r in rows:
        assert r["p_mw"] + r["p_ups_mw"] + r["p_genset_mw"] + r["p_unserved_mw"] == pytest.approx(100.0)
    assert all(r["p_unserved_mw"] == 0 for r in rows) and rows[-1]["p_genset_mw"] == 100.0


def test_without_a_generator_the_load_is_lost_when_the_ups_runs_out():
    rows = _sag_run(_rt(genset_start_s=None, ups_autonomy_s=5.0), [[1.0, 1.0, 0.3]], 0.1, 20.0)
    assert rows[-1]["e_ups_mwh"] == 0.0 and rows[-1]["p_unserved_mw"] == 100.0
    assert sum(r["p_ups_mw"] for r in rows) * 0.1 == pytest.approx(100.0 * 5.0, rel=1e-9)


def test_return_after_off_s_with_a_ramp():
    rows = _sag_run(_rt(off_s=10.0, ramp_s=5.0, recharge_mw=0.0), [[1.0, 1.0, 0.3]], 0.5, 30.0)
    k = next(i for i, r in enumerate(rows) if not r["in_service"])
    back = k + 20  # 10 s at 0.5 s
    assert rows[back - 1]["p_mw"] == 0.0 and rows[back]["in_service"]
    assert [rows[back + i]["p_mw"] for i in range(0, 12, 2)] == pytest.approx([0.0, 20.0, 40.0, 60.0, 80.0, 100.0])
    assert rows[-1]["t_backup_s"] == pytest.approx(10.0 + 5.0)


@pytest.mark.parametrize("dt", [0.1, 1.0])
def test_ups_recharges_after_the_return_and_the_grid_serves_discharged_over_efficiency(dt):
    """Energy balance: the UPS gives E on backup and takes E back; the grid serves E / efficiency
    on top of the load (the recharge), at the set rate, and stops when the UPS is full."""
    rt = _rt(off_s=20.0, genset_start_s=10.0, e_ups_mwh=1.0, recharge_mw=20.0, recharge_efficiency_frac=0.9)
    rows = _sag_run(rt, [[1.0, 1.0, 0.3]], dt, 120.0)
    discharged = sum(r["p_ups_mw"] for r in rows) * dt / 3600.0
    recharged = sum(r["p_recharge_mw"] for r in rows) * dt / 3600.0
    assert discharged == pytest.approx(100.0 * 10.0 / 3600.0, rel=1e-9)
    assert recharged == pytest.approx(discharged / 0.9, rel=1e-9) and rows[-1]["e_ups_mwh"] == pytest.approx(1.0)
    back = next(k for k, r in enumerate(rows) if k and r["in_service"] and not rows[k - 1]["in_service"])
    assert rows[back]["p_mw"] == pytest.approx(120.0) and rows[back]["p_recharge_mw"] == 20.0
    charging = [r for r in rows if r["p_recharge_mw"] > 0]
    assert len(charging) * dt == pytest.approx(discharged / 0.9 / 20.0 * 3600.0, abs=dt)  # at the set rate
    assert rows[-1]["p_mw"] == 100.0 and rows[-1]["p_recharge_mw"] == 0.0
    for r in rows:  # the demand is met by the grid and the backup; the grid also feeds the recharge
        assert r["p_mw"] + r["p_ups_mw"] + r["p_genset_mw"] + r["p_unserved_mw"] == pytest.approx(100.0 + r["p_recharge_mw"])
        assert r["p_backup_mw"] == pytest.approx(100.0 - r["p_mw"])
        # what it is made of: the backup's supply, the unserved rest, less the grid's recharge
        assert r["p_backup_mw"] == pytest.approx(r["p_ups_mw"] + r["p_genset_mw"] + r["p_unserved_mw"] - r["p_recharge_mw"])
    default = _sag_run(_rt(off_s=20.0), [[1.0, 1.0, 0.3]], 1.0, 60.0)
    assert max(r["p_recharge_mw"] for r in default) == pytest.approx(10.0)  # 10 % of the first load
    assert all(r["p_recharge_mw"] == 0 for r in _sag_run(_rt(off_s=20.0, recharge_mw=0.0), [[1.0, 1.0, 0.3]], 1.0, 60.0))


def test_a_frequency_excursion_trips_after_its_delay():
    """Outside from t = 1.0 s, held over each 0.1 s step: the delay of 0.5 s is reached within
    the step from 1.4 s, which transfers (as a sag's trip happens within its step)."""
    rt = _rt(curve="none", f_max_hz=60.5, f_delay_s=0.5)
    seen = [rt.step(k * 0.1, 0.1, {"p_load_mw": 50.0, "f_hz": 60.6 if k >= 10 else 60.0})["in_service"]
            for k in range(30)]
    assert seen.index(False) == 14


def test_fault_events_from_a_file_and_their_checks(tmp_path):
    path = tmp_path / "faults.csv"
    path.write_text("# a reclose sequence\nt_s,duration_s,vm_pu\n1.0,0.1,0.5\n3.0,0.2,0.8\n")
    line = Faults(FaultsParams.model_validate({"file": str(path)}))
    assert line.over(0.0, 1.0) == {"vm_sag_pu": 1.0, "t_sag_s": 0.0, "n_faults": 0}
    assert line.over(1.0, 1.0) == pytest.approx({"vm_sag_pu": 0.5, "t_sag_s": 0.1, "n_faults": 1})
    assert line.over(3.1, 0.05)["t_sag_s"] == pytest.approx(0.05)
    with pytest.raises(ValueError, match="retained voltage"):
        FaultsParams.model_validate({"events": [[1.0, 0.1, 1.2]]})


# --- PERC1-equivalent ceasing and reconnection --------------------------------------------------
# PowerWorld Simulator help, "Load Characteristic Model: PERC1" (2025): after a full cease the
# load returns to 1 - Fcease + Frecon * Fcease of its demand; ceasing between Vt1 and Vt0 (low)
# and Vt2 and Vt3 (high); separate P and Q lead-lags; low and high frequency deadbands.

def _perc_run(perc1: dict, voltages: list[float], dt: float = 0.1, f_hz: float = 60.0, **kw) -> list[dict]:
    rt = _rt(curve="none", genset_start_s=None, e_ups_mwh=100.0, perc1=perc1, **kw)
    return [rt.step(k * dt, dt, {"p_load_mw": 100.0, "q_load_mvar": 20.0, "vm_pu": v, "f_hz": f_hz})
            for k, v in enumerate(voltages)]


@pytest.mark.parametrize("fcease, frecon", [(1.0, 1.0), (1.0, 0.0), (1.0, 0.5), (0.6, 0.5), (0.3, 0.0), (0.0, 0.7)])
def test_perc1_settles_at_1_minus_fcease_plus_frecon_fcease(fcease, frecon):
    rows = _perc_run({"fcease_frac": fcease, "frecon_frac": frecon, "t_recon_s": 1.0},
                     [1.0] * 5 + [0.3] * 2 + [1.0] * 40)
    assert rows[4]["p_mw"] == pytest.approx(100.0)
    assert rows[5]["p_mw"] == pytest.approx(100.0 * (1.0 - fcease))          # ceases within the step
    assert rows[-1]["p_connected_frac"] == pytest.approx(1.0 - fcease + frecon * fcease)
    assert rows[-1]["q_mvar"] == pytest.approx(20.0 * (1.0 - fcease + frecon * fcease))
    assert all(r["in_service"] for r in rows)                               # ceasing is not a transfer


@pytest.mark.parametrize("vm, ceased", [(0.75, 0.0), (0.7, 0.0), (0.6, 0.5), (0.55, 0.75), (0.5, 1.0), (0.2, 1.0),
                                        (1.15, 0.0), (1.25, 0.5), (1.3, 1.0)])
def test_perc1_ceases_linearly_between_the_thresholds(vm, ceased):
    rows = _perc_run({"fcease_frac": 1.0, "frecon_frac": 1.0}, [1.0, vm, vm])
    assert rows[1]["p_connected_frac"] == pytest.approx(1.0 - ceased)
    assert rows[2]["p_connected_frac"] == pytest.approx(1.0 - ceased)


def test_perc1_latches_the_deepest_point_and_reconnects_after_delay_over_the_ramp():
    v = [1.0, 0.5, 0.65, 1.0, 1.0, 1.0] + [1.0] * 30
    rows = _perc_run({"frecon_frac": 1.0, "t_recon_delay_s": 0.2, "t_recon_s": 1.0}, v)
    shares = [r["p_connected_frac"] for r in rows]
    assert shares[1] == shares[2] == 0.0          # 0.65 pu after 0.5 pu: still all ceased (latched)
    assert shares[3] == shares[4] == 0.0          # back in band: 0.1 s, 0.2 s of the 0.2 s delay
    assert shares[5] == pytest.approx(0.1)        # 0.1 s into the 1 s ramp
    assert all(b >= a for a, b in zip(shares[3:], shares[4:]))
    assert shares[14] == pytest.approx(1.0) and shares[-1] == 1.0


def test_perc1_repeated_disturbances_compound_what_stays_off():
    one = [1.0, 0.3] + [1.0] * 20
    rows = _perc_run({"fcease_frac": 1.0, "frecon_frac": 0.5, "t_recon_s": 0.5}, one * 3)
    assert rows[-1]["p_connected_frac"] == pytest.approx(0.5 ** 3)


def test_perc1_ceased_load_rides_on_the_ups_and_energy_balances():
    rt = _rt(curve="none", genset_start_s=2.0, e_ups_mwh=1.0, recharge_mw=0.0,
             perc1={"fcease_frac": 0.8, "frecon_frac": 0.5, "t_recon_s": 1.0})
    dt, rows = 0.1, []
    for k in range(60):
        rows.append(rt.step(k * dt, dt, {"p_load_mw": 100.0, "q_load_mvar": 10.0, "vm_pu": 0.4 if k == 3 else 1.0}))
    for r in rows:
        assert r["p_mw"] + r["p_ups_mw"] + r["p_genset_mw"] + r["p_unserved_mw"] == pytest.approx(100.0)
        assert r["p_backup_mw"] == pytest.approx(100.0 - r["p_mw"])
    ups_mwh = sum(r["p_ups_mw"] for r in rows) * dt / 3600
    assert rows[-1]["e_ups_mwh"] == pytest.approx(1.0 - ups_mwh)
    assert rows[-1]["p_mw"] == pytest.approx(100.0 * (1 - 0.8 + 0.5 * 0.8))
    assert rows[-1]["p_genset_mw"] == pytest.approx(100.0 - rows[-1]["p_mw"])  # what stays off is on the generator


def test_perc1_lead_lag_paths_are_first_order_and_separate():
    import math
    rows = _perc_run({"fcease_frac": 1.0, "frecon_frac": 1.0, "t_recon_s": 0.0, "tbp_s": 0.5, "tbq_s": 0.0},
                     [1.0, 0.3] + [1.0] * 30)
    # P lags the share: after the cease (share 0 over one step) it decays, then recovers with tau 0.5 s
    assert rows[1]["p_connected_frac"] == pytest.approx(1.0)          # output at the start of the step
    assert rows[2]["p_connected_frac"] == pytest.approx(math.exp(-0.1 / 0.5))
    assert rows[1]["q_connected_frac"] == 0.0                           # Q has no lag
    assert 0.99 < rows[-1]["p_connected_frac"] <= 1.0


@pytest.mark.parametrize("f_hz, share", [(60.0, 1.0), (60.03, 1.0), (59.97, 1.0), (60.136, 1.0 + 0.5 * 0.1),
                                         (59.836, 1.0 - 0.5 * 0.128)])
def test_perc1_frequency_acts_outside_the_deadband_only(f_hz, share):
    rows = _perc_run({"kpf_frac_per_hz": 0.5, "dbfl_hz": 0.036, "dbfh_hz": 0.036}, [1.0, 1.0], f_hz=f_hz)
    assert rows[-1]["p_connected_frac"] == pytest.approx(min(share, 1.0))


def test_perc1_thresholds_out_of_order_are_refused():
    with pytest.raises(ValueError, match="vt0_pu < vt1_pu"):
        _rt(perc1={"vt0_pu": 0.8, "vt1_pu": 0.7})
