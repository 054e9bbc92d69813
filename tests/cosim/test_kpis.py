"""KPI functions on hand-computed series."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim import kpis
from cosim.roles import RunRoles


def frame(**columns) -> pd.DataFrame:
    n = len(next(iter(columns.values())))
    index = pd.date_range("2024-07-15", periods=n, freq="15min", tz="UTC")
    return pd.DataFrame(columns, index=index)


def test_energy_is_power_held_over_each_step():
    # 4 quarter-hours at 1, 2, 3, 4 MW -> (1+2+3+4) * 0.25 h = 2.5 MWh
    ts = frame(**{"dc.p_mw": [1.0, 2.0, 3.0, 4.0]})
    out = kpis.compute(ts, 900, RunRoles({"dc": "it"}))
    assert out["entities"]["dc"]["energy_mwh"] == pytest.approx(2.5) and out["entities"]["dc"]["role"] == "it"
    assert out["entities"]["dc"]["peak_mw"] == 4.0 and out["duration_h"] == 1.0


def test_grid_import_export_violations_and_carbon():
    ts = frame(**{
        "grid.p_import_mw": [2.0, -1.0, 4.0, 0.0],
        "grid.vm_min_pu": [0.97, 0.94, 0.96, 0.96],
        "grid.vm_max_pu": [1.00, 1.00, 1.06, 1.01],
        "grid.losses_mw": [0.1, 0.1, 0.2, 0.0],
        "grid.max_loading_pct": [50.0, 60.0, 101.0, 20.0],
        "carbon.ci_g_kwh": [400.0, 400.0, 100.0, 100.0],
    })
    out = kpis.compute(ts, 900, RunRoles({"grid": "grid", "carbon": "signal"}))
    g = out["grid"]
    assert g["import_mwh"] == pytest.approx((2 + 4) * 0.25)
    assert g["export_mwh"] == pytest.approx(0.25)
    assert g["import_peak_mw"] == 4.0
    assert g["voltage_violation_s"] == pytest.approx(2 * 900)  # steps 2 (low) and 3 (high)
    assert g["undervoltage_s"] == pytest.approx(900) and g["overvoltage_s"] == pytest.approx(900)
    assert g["voltage_violation_pu_s"] == pytest.approx((0.01 + 0.01) * 900)  # 0.95-0.94, 1.06-1.05
    assert g["line_overload_s"] == pytest.approx(900)  # 101 % in step 3
    assert g["vm_min_pu"] == 0.94 and g["vm_max_pu"] == 1.06 and g["max_loading_pct"] == 101.0
    assert g["losses_mwh"] == pytest.approx(0.1)
    # carbon: 0.5 MWh at 400 g/kWh + 1.0 MWh at 100 g/kWh = 200 kg + 100 kg = 0.3 t
    assert out["carbon"]["feeder_import_t"] == pytest.approx(0.3)
    assert "whole feeder" in out["carbon"]["scope"]
    # without the grid role nothing is a grid: no grid block, no feeder carbon
    assert "grid" not in kpis.compute(ts, 900, RunRoles()) and "carbon" not in kpis.compute(ts, 900, RunRoles())


def test_single_row_uses_the_given_step():
    out = kpis.compute(frame(**{"x.p_mw": [6.0]}), 600, RunRoles({"x": "load"}))
    assert out["entities"]["x"]["energy_mwh"] == pytest.approx(1.0)


def test_needed_columns_keep_kpis_identical():
    """Reading only the KPI columns (to keep memory flat on long runs) changes no KPI."""
    ts = frame(**{
        "grid.p_import_mw": [2.0, -1.0], "grid.vm_min_pu": [0.97, 0.94], "grid.vm_max_pu": [1.0, 1.0],
        "grid.bus_3_vm_pu": [0.99, 0.98], "tmy.t_dry_c": [20.0, 21.0], "ci.ci_g_kwh": [100.0, 200.0],
        "dc.p_mw": [1.0, 1.0], "dc.q_mvar": [0.2, 0.2],
    })
    roles = RunRoles({"grid": "grid", "tmy": "signal", "ci": "signal", "dc": "it"})
    subset = kpis.needed_columns(list(ts.columns), roles)
    assert "grid.bus_3_vm_pu" not in subset and "tmy.t_dry_c" not in subset
    assert kpis.compute(ts[subset], 900, roles) == kpis.compute(ts, 900, roles)


def test_each_block_on_its_own_columns_keeps_kpis_identical():
    """The KPIs of a run on disk read each block's columns only (a year of the union peaked at
    ~2x its size): the same KPIs and index as from the whole series, and no frame of all columns."""
    ts = frame(**{
        "grid.p_import_mw": [2.0, -1.0], "grid.vm_min_pu": [0.97, 0.94], "grid.vm_max_pu": [1.0, 1.0],
        "grid.bus_3_vm_pu": [0.99, 0.98], "tmy.t_dry_c": [20.0, 21.0], "ci.ci_g_kwh": [100.0, 200.0],
        "dc.p_mw": [1.0, 1.0], "dc.q_mvar": [0.2, 0.2], "pv.p_mw": [-0.5, -0.25],
    })
    roles = RunRoles({"grid": "grid", "tmy": "signal", "ci": "signal", "dc": "it", "pv": "clean_gen"})
    asked = []

    def read(columns):
        asked.append(list(columns))
        return ts[columns]

    names = list(ts.columns)
    got = kpis.compute_reading(read, names, 900, roles)
    assert got == kpis.compute_indexed(ts[kpis.needed_columns(names, roles)], 900, roles)
    assert got[0]["accounting"] and got[0]["grid"]
    assert asked[0] == [] and all(a == [c for c in names if c in a] for a in asked)  # recorded order
    assert max(len(a) for a in asked) < len(kpis.needed_columns(names, roles))


def test_pue_and_wue_on_a_hand_computed_series():
    """PUE = (IT + cooling) / IT; WUE = water [L] / IT [kWh] (The Green Grid, ISO/IEC 30134-2/-9)."""
    ts = frame(**{
        "dc.p_it_mw": [2.0, 2.0, 2.0, 2.0],       # 2 MWh of IT in the hour
        "plant.p_cooling_mw": [0.3, 0.3, 0.5, 0.5],  # 0.4 MWh
        "hall.p_fans_mw": [0.1, 0.1, 0.1, 0.1],      # 0.1 MWh
        "plant.water_m3": [1.0, 2.0, 3.0, 4.0],      # cumulative: 4 m³ = 4000 L
        "plant.q_unmet_mw": [0.0, 0.0, 0.4, 0.0],
        "hall.dt_inlet_excursion_k": [0.0, 0.5, 0.0, 0.0],
    })
    roles = RunRoles({"dc": "it", "plant": "cooling", "hall": "air_handler"})
    f = kpis.compute(ts, 900, roles)["facility"]
    assert f["it_mwh"] == pytest.approx(2.0) and f["cooling_mwh"] == pytest.approx(0.5)
    assert f["pue_ratio"] == pytest.approx(1.25)
    assert f["wue_l_kwh"] == pytest.approx(4000 / 2000)
    assert f["unmet_cooling_mwh"] == pytest.approx(0.1) and f["inlet_excursion_s"] == pytest.approx(900)
    assert "facility" not in kpis.compute(ts, 900, RunRoles())  # no IT entity, no PUE


def test_lean_reader_equals_pandas_read(tmp_path):
    """The row-group reader the runner uses for KPIs (memory on year-long runs) returns the same
    values and UTC index as pandas, with flags as 0/1 and nulls as NaN."""
    from cosim.run.recorder import ParquetRecorder
    from cosim.folder import numeric_reader, read_numeric_columns, read_timeseries

    path = tmp_path / "ts.parquet"
    rec = ParquetRecorder(path, ["a.p_mw", "g.converged", "b.q_mvar"], chunk_rows=3)
    index = pd.date_range("2024-07-15", periods=8, freq="60s", tz="UTC")
    for k, t in enumerate(index):
        rec.append(t, {"a.p_mw": float(k), "g.converged": k % 2 == 0, "b.q_mvar": None if k == 4 else -k / 2})
    rec.close()
    lean = read_numeric_columns(path, ["a.p_mw", "g.converged", "b.q_mvar"])
    full = read_timeseries(path)
    assert (lean.index == full.index).all() and str(lean.index.tz) == "UTC"
    np.testing.assert_array_equal(lean["a.p_mw"], full["a.p_mw"])
    np.testing.assert_array_equal(lean["g.converged"], [1, 0, 1, 0, 1, 0, 1, 0])
    assert np.isnan(lean["b.q_mvar"].iloc[4]) and lean["b.q_mvar"].iloc[5] == -2.5
    read = numeric_reader(path)  # several reads of one file (a KPI block's columns at a time)
    first, second = read(["b.q_mvar"]), read(["g.converged", "a.p_mw"])
    assert first.index is second.index and (second.index == full.index).all()
    pd.testing.assert_frame_equal(second, lean[["g.converged", "a.p_mw"]])
    pd.testing.assert_frame_equal(first, lean[["b.q_mvar"]])
    assert read([]).shape == (8, 0)


def test_pue_per_it_entity_follows_the_connections():
    """Two halls with their own IT in one run: each IT entity's PUE counts only the cooling it
    feeds (air: 0.5 MW cooling on 2 MW -> 1.25; liquid: 0.2 MW on 2 MW -> 1.10); the combined
    block counts both (0.7 on 4 -> 1.175)."""
    ts = frame(**{"it_a.p_it_mw": [2.0] * 4, "it_l.p_it_mw": [2.0] * 4, "hall.p_fans_mw": [0.1] * 4,
                  "plant.p_cooling_mw": [0.4] * 4, "dlc.p_cooling_mw": [0.2] * 4})
    roles = RunRoles({"it_a": "it", "it_l": "it", "hall": "air_handler", "plant": "cooling", "dlc": "cooling"})
    links = {"it_a": {"hall"}, "hall": {"plant"}, "plant": {"hall"}, "it_l": {"dlc"}}
    out = kpis.compute(ts, 900, roles, links)
    assert out["facility"]["pue_ratio"] == pytest.approx(1.175)
    assert out["facility_by_it"]["it_a"]["pue_ratio"] == pytest.approx(1.25)
    assert out["facility_by_it"]["it_l"]["pue_ratio"] == pytest.approx(1.10)
    assert "facility_by_it" not in kpis.compute(ts[["it_a.p_it_mw", "hall.p_fans_mw", "plant.p_cooling_mw"]], 900,
                                                roles, links)  # one IT entity: the facility block says it all
