"""Site accounting: hand-computed examples for energy, cost, demand charges, carbon, CFE."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cosim.kpis import accounting
from cosim.roles import RunRoles

HOURS = pd.date_range("2024-07-15T00:00Z", periods=4, freq="1h")


def _ts(**columns) -> pd.DataFrame:
    return pd.DataFrame(columns, index=HOURS)


ROLES = RunRoles({"campus": "it", "pv": "clean_gen", "bess": "storage", "gt": "fossil_gen"})


def test_site_import_export_and_carbon_by_hand():
    """Load 2 MW; PV 0, 1, 3, 0; battery +1 (charge) in hour 3: net 2, 1, 0, 2 -> import 5 MWh.

    CI 400, 300, 200, 100 g/kWh: grid carbon = (2·400 + 1·300 + 0 + 2·100)/1000 = 1.3 t.
    """
    ts = _ts(**{"campus.p_mw": [2.0] * 4, "pv.p_mw": [0.0, 1.0, 3.0, 0.0], "bess.p_mw": [0.0, 0.0, 1.0, 0.0],
                "grid_ci.ci_g_kwh": [400.0, 300.0, 200.0, 100.0]})
    k = accounting.compute(ts, ROLES, 3600)
    assert k["site"]["import_mwh"] == pytest.approx(5.0)
    assert k["site"]["export_mwh"] == pytest.approx(0.0)
    assert k["carbon"]["grid_t"] == pytest.approx(1.3)
    assert k["storage"]["bess"]["charged_mwh"] == pytest.approx(1.0)


def test_export_and_energy_cost_by_hand():
    """Net −1, 2, 2, 0.5 MW; price 50, 100, 200, 40 $/MWh, export credit 20 $/MWh:
    energy cost = 2·100 + 2·200 + 0.5·40 − 1·20 = 600 $."""
    ts = _ts(**{"campus.p_mw": [1.0, 2.0, 2.0, 0.5], "pv.p_mw": [2.0, 0.0, 0.0, 0.0],
                "tou.price_usd_mwh": [50.0, 100.0, 200.0, 40.0], "tou.export_price_usd_mwh": [20.0] * 4})
    k = accounting.compute(ts, ROLES, 3600)
    assert k["site"]["export_mwh"] == pytest.approx(1.0)
    assert k["cost"]["energy_usd"] == pytest.approx(600.0)


def test_demand_charge_takes_the_highest_15_minute_average_where_it_applies():
    """1-min import: 3 MW for 10 min then 0 in 00:00–00:15 (avg 2 MW); 2.5 MW flat in 00:15–00:30
    (avg 2.5 MW, but rate 0 there); 1 MW after. Rate 10 000 $/MW-month where it applies:
    the billed peak is 2 MW -> 20 000 $."""
    index = pd.date_range("2024-07-15T00:00Z", periods=60, freq="1min")
    p = np.r_[np.full(10, 3.0), np.zeros(5), np.full(15, 2.5), np.full(30, 1.0)]
    rate = np.r_[np.full(15, 1e4), np.zeros(15), np.full(30, 1e4)]
    bills = accounting.demand_charge_usd(pd.Series(p, index), pd.Series(rate, index))
    assert bills == {"2024-07": {"peak_mw": pytest.approx(2.0), "rate_usd_mw": 1e4, "charge_usd": pytest.approx(2e4)}}


def test_cfe_score_by_hand():
    """Load 2 MW each hour; PV 0, 1, 3, 0; battery charges 1 MW in hour 3 and discharges 1 MW in hour 4;
    grid CFE 0.5 everywhere.

    hour 1: C=2, I=2 -> M = 1;   hour 2: C=2, PV 1 + I 1·0.5 -> M = 1.5;
    hour 3: C=3 (load + charge), PV 3, I=0 -> M = 3;  hour 4: C=1 (load − discharge), I=1 -> M = 0.5.
    score = (1 + 1.5 + 3 + 0.5) / (2 + 2 + 3 + 1) = 6/8 = 0.75.
    """
    ts = _ts(**{"campus.p_mw": [2.0] * 4, "pv.p_mw": [0.0, 1.0, 3.0, 0.0], "bess.p_mw": [0.0, 0.0, 1.0, -1.0],
                "grid_ci.cfe_frac": [0.5] * 4})
    k = accounting.compute(ts, ROLES, 3600)
    assert k["cfe"]["score_frac"] == pytest.approx(0.75)
    assert k["cfe"]["n_hours"] == 4


def test_cfe_with_export_does_not_count_exported_clean_energy():
    """PV 5 MW against a 2 MW load: 3 exported, the 2 consumed are matched: score 1; grid CFE 0."""
    ts = _ts(**{"campus.p_mw": [2.0] * 4, "pv.p_mw": [5.0] * 4, "grid_ci.cfe_frac": [0.0] * 4})
    k = accounting.compute(ts, ROLES, 3600)
    assert k["cfe"]["score_frac"] == pytest.approx(1.0)
    assert k["site"]["export_mwh"] == pytest.approx(12.0)


def test_onsite_combustion_curtailment_and_cycles():
    """A gas turbine emitting 0.1 kg/s for 4 h = 1.44 t; 0.5 MW curtailed for 2 h = 1 MWh."""
    ts = _ts(**{"campus.p_mw": [2.0] * 4, "gt.p_mw": [1.0] * 4, "gt.co2_kg_s": [0.1] * 4,
                "pv.p_mw": [0.0] * 4, "pv.p_curtailed_mw": [0.0, 0.5, 0.5, 0.0], "bess.p_mw": [0.0] * 4,
                "bess.n_cycles": [0.0, 0.1, 0.2, 0.25]})
    k = accounting.compute(ts, ROLES, 3600)
    assert k["carbon"]["onsite_t"] == pytest.approx(1.44)
    assert k["curtailment"]["curtailed_mwh"] == pytest.approx(1.0)
    assert k["storage"]["bess"]["n_cycles"] == pytest.approx(0.25)
    assert k["site"]["import_mwh"] == pytest.approx(4.0)


def test_column_roles_count_without_an_entity_role():
    """A scenario's per-column roles (``roles = { p_it_mw = "load" }``) make any recorded MW
    column a site load; a column role overrides its entity's role for that column."""
    ts = _ts(**{"dc.p_it_mw": [1.0] * 4, "dc.p_cooling_mw": [0.5] * 4, "trace.p_mw": [0.25] * 4})
    roles = RunRoles({"dc": "other", "trace": "it"}, {"dc.p_it_mw": "load", "dc.p_cooling_mw": "load",
                                                      "trace.p_mw": "clean_gen"})
    k = accounting.compute(ts, roles, 3600)
    assert k["site"]["load_mwh"] == pytest.approx(6.0) and k["site"]["clean_generation_mwh"] == pytest.approx(1.0)
    assert k["site"]["import_mwh"] == pytest.approx(5.0)


def test_nothing_to_account_gives_empty():
    assert accounting.compute(_ts(**{"feeder.p_import_mw": [1.0] * 4}), RunRoles({"feeder": "grid"}), 3600) == {}
    assert accounting.compute(pd.DataFrame(), RunRoles(), 60) == {}


def test_month_coverage():
    index = pd.date_range("2024-07-15T00:00Z", periods=7 * 24, freq="1h")
    cover = accounting.month_coverage_frac(index, 1.0)
    assert cover["2024-07"] == pytest.approx(7 / 31)
    assert math.isnan(accounting.cfe_score_frac(pd.DataFrame({"consumption_mwh": [0.0], "matched_mwh": [0.0]})))


def test_needed_columns_cover_what_compute_reads():
    columns = ["campus.p_mw", "pv.p_curtailed_mw", "tou.dc_on_peak_usd_mw", "tou.price_usd_mwh", "grid_ci.cfe_frac",
               "tou.export_price_usd_mwh", "gt.co2_kg_s", "bess.soc_frac", "plant.p_cooling_mw", "pv.p_clip_mw",
               "grid_ci.ci_g_kwh", "bess.n_cycles", "feeder.bus_3_vm_pu", "dc.p_it_mw"]
    roles = RunRoles({"campus": "it", "pv": "clean_gen", "bess": "storage", "gt": "fossil_gen", "plant": "cooling",
                      "feeder": "grid"}, {"dc.p_it_mw": "load"})
    needed = accounting.needed_columns(columns, roles)
    assert "feeder.bus_3_vm_pu" not in needed
    assert set(needed) == set(columns) - {"feeder.bus_3_vm_pu"}


def test_campus_pv_battery_day_end_to_end(tmp_path):
    """One day of scenarios/campus_pv_battery.toml through mosaik: the grid sees what the site
    entities report, the battery stays within its limits, and the accounting closes the balance:
    load + storage − PV = import − export, step by step."""
    from pathlib import Path

    from cosim.folder import read_timeseries
    from cosim.run import run

    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "campus_pv_battery.toml"
    result = run(scenario, out_dir=tmp_path, overrides={"scenario.duration_s": 86_400})
    assert result.ok, result.reason
    ts = read_timeseries(result.run_dir / "timeseries.parquet")
    np.testing.assert_allclose(ts["pv_gen.p_mw"], ts["pv.p_mw"])
    np.testing.assert_allclose(ts["bess_grid.p_mw"], ts["bess.p_mw"])
    assert ts["bess.soc_frac"].between(0.1 - 1e-12, 0.9 + 1e-12).all()
    assert ts["bess.p_mw"].abs().max() <= 2.0 + 1e-12
    assert ts["pv.p_mw"].max() > 3.0 and ts["pv.p_mw"].max() <= 6.0
    roles = result.folder.roles()
    assert roles.of("campus") == "it" and roles.of("pv") == "clean_gen" and roles.of("bess") == "storage"
    k = accounting.compute(ts, roles, 300)
    assert result.kpis["accounting"] == k
    # the runner loads only the needed columns: the result must not change
    assert accounting.compute(ts[accounting.needed_columns(list(ts.columns), roles)], roles, 300) == k
    dt_h = 300 / 3600
    net = (ts["campus.p_mw"] + ts["bess.p_mw"] - ts["pv.p_mw"]).sum() * dt_h
    assert k["site"]["import_mwh"] - k["site"]["export_mwh"] == pytest.approx(net)
    assert 0 < k["cfe"]["score_frac"] <= 1
    assert k["cost"]["total_usd"] > 0 and k["carbon"]["grid_t"] > 0


def test_cluster_and_cooling_plant_count_as_site_load():
    ts = _ts(**{"gpus.p_mw": [2.0] * 4, "gpus.p_it_mw": [1.9] * 4, "plant.p_cooling_mw": [0.4] * 4})
    k = accounting.compute(ts, RunRoles({"gpus": "it", "plant": "cooling"}), 3600)
    assert k["site"]["load_mwh"] == pytest.approx(9.6)
    assert k["site"]["columns"]["loads"] == ["gpus.p_mw", "plant.p_cooling_mw"]


def test_a_facility_on_backup_is_not_grid_import():
    """Load 2 MW; a ride-through's backup (role ``backup``, ``p_backup_mw``) carries it in hours 1-2
    and the grid recharges the UPS with 0.5 MW in hour 3: import 2 + 0 + 0 + 2.5 = 4.5 MWh, backup
    2 + 2 − 0.5 = 3.5 MWh; the carbon of the imports follows (CI 100 g/kWh: 0.45 t)."""
    roles = RunRoles({"campus": "it", "ups": "backup"})
    ts = _ts(**{"campus.p_mw": [2.0] * 4, "ups.p_backup_mw": [0.0, 2.0, 2.0, -0.5], "ci.ci_g_kwh": [100.0] * 4})
    k = accounting.compute(ts, roles, 3600)
    assert k["site"]["import_mwh"] == pytest.approx(4.5) and k["site"]["load_mwh"] == pytest.approx(8.0)
    assert k["site"]["backup_mwh"] == pytest.approx(3.5) and k["site"]["columns"]["backup"] == ["ups.p_backup_mw"]
    assert k["carbon"]["grid_t"] == pytest.approx(0.45) and k["site"]["import_peak_mw"] == pytest.approx(2.5)
    assert "backup_mwh" not in accounting.compute(ts, ROLES, 3600)["site"]  # no backup: as before
