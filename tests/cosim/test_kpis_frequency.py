"""Frequency and load-loss KPI blocks on hand-made 0.1 s series (cosim/kpis/frequency.py,
cosim/kpis/load_loss.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim import kpis
from cosim.roles import RunRoles

ROLES = RunRoles({"area": "other", "ups": "other", "net": "grid"})


def _series(n: int, **columns) -> pd.DataFrame:
    index = pd.date_range("2024-07-10T23:00:00Z", periods=n, freq=pd.Timedelta(milliseconds=100))
    return pd.DataFrame(columns, index=index)


def test_frequency_block_counts_real_seconds_outside_the_bands():
    f = np.full(100, 60.0)
    f[20:50] = 60.25  # 3 s above +200 mHz
    f[50:60] = 60.15  # then 1 s between 100 and 200 mHz
    f[60] = 59.4      # one sample 600 mHz low
    rocof = np.zeros(100)
    rocof[20] = 0.3
    out = kpis.compute(_series(100, **{"area.f_hz": f, "area.rocof_hz_s": rocof}), 0.1, ROLES)["frequency"]["area"]
    assert out["f_zenith_hz"] == 60.25 and out["t_zenith_s"] == pytest.approx(2.0)
    assert out["f_nadir_hz"] == 59.4 and out["t_nadir_s"] == pytest.approx(6.0)
    assert out["outside_100mhz_s"] == pytest.approx(4.1)
    assert out["outside_200mhz_s"] == pytest.approx(3.1)
    assert out["outside_500mhz_s"] == pytest.approx(0.1)
    assert out["rocof_max_hz_s"] == 0.3 and out["dev_max_hz"] == pytest.approx(0.6)


def test_load_loss_block_reports_mw_lost_duration_energy_and_overvoltage():
    n = 100
    on = np.array([True] * 30 + [False] * 70)
    lost = np.where(on, 0.0, 200.0)
    vm = np.where(on, 1.02, 1.05)
    recharge = np.zeros(n)
    recharge[10:20] = 20.0  # as after an earlier return: 1 s at 20 MW
    ts = _series(n, **{"ups.in_service": on, "ups.p_lost_mw": lost, "ups.n_trips": (~on).astype(int),
                       "ups.t_backup_s": np.cumsum(~on) * 0.1, "ups.p_ups_mw": np.where(on, 0.0, 200.0),
                       "ups.p_recharge_mw": recharge, "net.vm_max_pu": vm})
    out = kpis.compute(ts, 0.1, ROLES)["load_loss"]["ups"]
    assert out["n_trips"] == 1 and out["first_trip_s"] == pytest.approx(3.0)
    assert out["recharge_mwh"] == pytest.approx(20.0 / 3600.0)
    assert out["lost_mw"] == 200.0 and out["backup_s"] == pytest.approx(7.0) and out["returned"] is False
    assert out["ups_mwh"] == pytest.approx(200.0 * 7.0 / 3600.0)
    assert (out["vm_before_max_pu"], out["vm_after_max_pu"]) == (1.02, 1.05)
    quiet = kpis.compute(_series(5, **{"ups.in_service": [True] * 5, "ups.p_lost_mw": [0.0] * 5}), 0.1, ROLES)
    assert quiet["load_loss"]["ups"] == {"n_trips": 0}


def test_load_loss_reports_a_missing_reading_as_unknown_not_as_zero():
    """A step without a p_lost_mw reading (NaN) is not 0 MW lost: the trip's loss, the largest loss and
    whether the site came back are unknown where the readings are."""
    on = np.array([True] * 3 + [False] * 4 + [True] * 3)
    lost = np.array([0.0] * 3 + [np.nan, 150.0, 200.0, 180.0] + [0.0] * 2 + [np.nan])
    out = kpis.compute(_series(10, **{"ups.in_service": on, "ups.p_lost_mw": lost}), 0.1, ROLES)["load_loss"]["ups"]
    assert out["lost_mw"] is None and out["lost_max_mw"] == 200.0 and out["returned"] is None
    lost[-1] = 0.0
    out = kpis.compute(_series(10, **{"ups.in_service": on, "ups.p_lost_mw": lost}), 0.1, ROLES)["load_loss"]["ups"]
    assert out["returned"] is True


def _ride_through_series(perc1: dict | None, f_of_k, grid_share_of_k=None, n: int = 100) -> pd.DataFrame:
    """The outputs of a 100 MW RideThrough stepped at 0.1 s, as the recorder writes them."""
    from cosim.adapters.ride_through import RideThrough, RideThroughParams

    model = RideThrough(RideThroughParams(perc1=perc1, genset_start_s=2.0))
    rows = []
    for k in range(n):
        m = {"p_load_mw": 100.0, "q_load_mvar": 10.0, "vm_pu": 1.0, "f_hz": f_of_k(k)}
        if grid_share_of_k is not None:
            m["p_grid_connected_frac"] = m["q_grid_connected_frac"] = grid_share_of_k(k)
        rows.append(model.step(k * 0.1, 0.1, m))
    frame = pd.DataFrame(rows)
    return _series(n, **{f"ups.{c}": frame[c].to_numpy() for c in frame.columns})


def _balance(ts: pd.DataFrame, out: dict) -> None:
    """UPS + generator + unserved + grid = demand (the recharge is 0 here: the UPS never refills)."""
    grid_mwh = ((1.0 - ts["ups.p_lost_mw"] / 100.0) * 100.0).sum() * 0.1 / 3600.0
    demand_mwh = 100.0 * len(ts) * 0.1 / 3600.0
    assert out["ups_mwh"] + out["genset_mwh"] + out["unserved_mwh"] + grid_mwh == pytest.approx(demand_mwh)


def test_load_loss_counts_a_perc1_frequency_trip_and_its_backup_energy():
    """PERC1's frequency trip takes the whole load off the grid with in_service staying 1: the KPI
    still reports the trip, the time on backup and the UPS / generator energy."""
    perc1 = {"f_trip_low_hz": 59.5, "t_f_trip_low_s": 0.5}
    ts = _ride_through_series(perc1, lambda k: 59.0 if k >= 20 else 60.0)
    assert ts["ups.in_service"].all() and ts["ups.n_trips"].iloc[-1] == 0 and ts["ups.n_perc1_trips"].iloc[-1] == 1
    out = kpis.compute(ts, 0.1, ROLES)["load_loss"]["ups"]
    first = int(np.flatnonzero(ts["ups.p_lost_mw"].to_numpy() > 0)[0])
    assert out["n_trips"] == 1 and out["first_trip_s"] == pytest.approx(first * 0.1)
    assert out["lost_mw"] == 100.0 and out["returned"] is False
    assert out["backup_s"] == pytest.approx((100 - first) * 0.1)
    assert out["ups_mwh"] > 0 and out["genset_mwh"] > 0
    _balance(ts, out)


def test_load_loss_counts_the_share_a_native_perc1_ceased():
    """Shares fed back from a PERC1 inside the grid model: all of the load on backup from step 30,
    no trip of the UPS logic: the time and energy on backup are reported, no trip."""
    ts = _ride_through_series(None, lambda k: 60.0, lambda k: 0.0 if k >= 30 else 1.0)
    out = kpis.compute(ts, 0.1, ROLES)["load_loss"]["ups"]
    assert out["n_trips"] == 0 and "first_trip_s" not in out and out["returned"] is False
    assert out["backup_s"] == pytest.approx(7.0) and out["lost_max_mw"] == 100.0
    assert out["ups_mwh"] == pytest.approx(100.0 * 2.0 / 3600.0)
    assert out["genset_mwh"] == pytest.approx(100.0 * 5.0 / 3600.0)
    _balance(ts, out)
