"""Site accounting while a facility rides on backup: a toy load_loss_event run.

A 0.5 MW facility behind a ride-through on IEEE 33 bus 3; a 1 s sag to 0.3 pu at 10 s is outside
the ITI curve (70 % for at most 20 ms), so it transfers to backup (UPS 10 s, then the generator),
returns after 30 s and recharges its UPS at 1 MW. Energy balance: the site's grid import is
what the grid served (the grid element's draw), i.e. the demand minus what the UPS and the
generator carried plus the recharge; not the demand (the accounting counted the demand before).
"""

from __future__ import annotations

import pytest

import cosim

SCENARIO = """
[scenario]
name = "backup_accounting"
start = 2024-07-10T23:00:00Z
duration_s = 90
step_s = 1
engine = "direct"

[sims.facility]
adapter = "load"

[sims.faults]
adapter = "faults"

[sims.rt]
adapter = "ride_through"

[sims.grid]
adapter = "grid"
network = "ieee33"

[entities.site]
sim = "facility"
model = "FacilityLoad"
file = "p.csv"
time_column = "time"

[entities.line]
sim = "faults"
model = "Faults"
events = [[10.0, 1.0, 0.3]]

[entities.ups]
sim = "rt"
model = "RideThrough"
off_s = 30.0
recharge_mw = 1.0

[entities.pcc]
sim = "grid"
model = "Load"
bus = "3"

[entities.feeder]
sim = "grid"
model = "Grid"

[[connect]]
src = "site"
dst = "ups"
attrs = [["p_mw", "p_load_mw"], ["q_mvar", "q_load_mvar"]]

[[connect]]
src = "line"
dst = "ups"
attrs = ["vm_sag_pu", "t_sag_s"]

[[connect]]
src = "ups"
dst = "pcc"
attrs = ["p_mw", "q_mvar"]
"""


def test_grid_import_is_what_the_grid_served_while_on_backup(tmp_path):
    (tmp_path / "p.csv").write_text("time,p_mw\n2024-07-10T00:00:00Z,0.5\n2024-07-11T00:00:00Z,0.5\n", encoding="utf-8")
    (tmp_path / "s.toml").write_text(SCENARIO, encoding="utf-8")
    result = cosim.run(tmp_path / "s.toml", out_dir=tmp_path / "runs")
    assert result.ok, result.reason
    assert result.metadata["roles"]["entities"]["ups"] == "backup"
    ts = result.timeseries()
    site, lost = result.kpis["accounting"]["site"], result.kpis["load_loss"]["ups"]
    h = 1 / 3600
    served = ts["pcc.p_mw"].sum() * h  # the grid's own element
    assert lost["first_trip_s"] == 10.0 and lost["returned"] and lost["recharge_mwh"] > 0
    assert site["load_mwh"] == pytest.approx(0.5 * 90 * h)
    assert site["import_mwh"] == pytest.approx(served, abs=2e-9)
    assert site["import_mwh"] == pytest.approx(site["load_mwh"] - lost["ups_mwh"] - lost["genset_mwh"]
                                               + lost["recharge_mwh"], abs=2e-9)
    assert site["backup_mwh"] == pytest.approx(site["load_mwh"] - site["import_mwh"], abs=2e-9)
    assert lost["backup_s"] == 30.0 and lost["ups_mwh"] == pytest.approx(0.5 * 10 * h, abs=2e-9)  # then the genset
    # 60 s on the grid, and the 10 s of UPS energy back at 95 % (the default efficiency)
    assert site["import_mwh"] == pytest.approx(0.5 * 60 * h + 0.5 * 10 * h / 0.95, abs=2e-9)
    assert site["import_peak_mw"] == pytest.approx(1.5)  # the load and the 1 MW recharge
    on_backup = ts["ups.in_service"].astype(float) < 0.5
    drop = ts["feeder.p_import_mw"][~on_backup].iloc[:5].mean() - ts["feeder.p_import_mw"][on_backup].mean()
    assert drop == pytest.approx(0.5, rel=0.1)  # the feeder indeed lost the load (and its losses)
