"""The multi-site catalogue scenarios (issue #15 item 6), first 2 minutes: load shifting takes the
violated site back into band where its own (rule-based batch) control alone cannot, the
replicas and the requests moved are conserved, and each site's throughput is in kpis.json.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cosim

ROOT = Path(__file__).resolve().parents[3]
IEEE34 = ROOT / "scenarios" / "ieee34_multisite.toml"


@pytest.fixture(scope="module")
def ieee34(tmp_path_factory):
    out = tmp_path_factory.mktemp("ieee34")
    short = {"scenario.duration_s": 120, "scenario.engine": "direct"}
    on = cosim.run(IEEE34, out_dir=out / "on", overrides=short)
    local = cosim.run(IEEE34, out_dir=out / "local", overrides={**short, "entities.shift.enabled": False})
    assert on.ok and local.ok, (on.reason, local.reason)
    return on, local


def test_ieee34_shifting_clears_the_far_site_that_local_control_cannot(ieee34):
    on, local = ieee34
    k_on, k_local = on.kpis, local.kpis
    down_on, down_local = k_on["points_of_connection"]["pcc_down"], k_local["points_of_connection"]["pcc_down"]
    assert down_local["violation_s"] == 120  # batch control alone: 840 never back in band
    assert down_on["violation_s"] < 60 and down_on["violation_pu_s"] < 0.4 * down_local["violation_pu_s"]
    ts = on.timeseries()
    assert (ts["pcc_down.vm_phase_min_pu"].iloc[-30:] >= 0.95).all()
    assert (ts["pcc_up.vm_phase_min_pu"] >= 0.95).all()  # the destination stays in band
    shift = k_on["load_shift"]["shift"]
    assert shift["n_shifts"] > 0 and shift["up"]["n_moved_in_final"] == -shift["down"]["n_moved_in_final"] > 0
    # more served than with local control alone: the moved requests are served at the destination
    both = shift["up"]["n_tokens"] + shift["down"]["n_tokens"]
    both_local = sum(k_local["load_shift"]["shift"][s]["n_tokens"] for s in ("up", "down"))
    assert both > 1.2 * both_local


def test_ieee34_moved_replicas_and_demand_are_conserved(ieee34):
    on, _ = ieee34
    ts = on.timeseries()
    assert (ts["shift.n_active_up"] + ts["shift.n_active_down"] == 180).all()  # 50 + 130 active, always
    assert (ts["shift.n_active_up"] <= 120).all() and (ts["shift.n_active_down"] >= 1).all()  # within capacity
    moved = ts["shift.moved_in_up_per_s"] + ts["shift.moved_in_down_per_s"]
    assert moved.abs().max() < 1e-9
    shift = on.kpis["load_shift"]["shift"]
    assert shift["up"]["n_requests_moved_in"] == pytest.approx(-shift["down"]["n_requests_moved_in"], rel=1e-9)


IEEE123 = ROOT / "scenarios" / "ieee123_multisite.toml"


def test_ieee123_shifting_clears_the_mid_feeder_site_and_the_whole_feeder(tmp_path):
    short = {"scenario.duration_s": 120, "scenario.engine": "direct"}
    on = cosim.run(IEEE123, out_dir=tmp_path / "on", overrides=short)
    local = cosim.run(IEEE123, out_dir=tmp_path / "local", overrides={**short, "entities.shift.enabled": False})
    assert on.ok and local.ok, (on.reason, local.reason)
    k_on, k_local = on.kpis, local.kpis
    assert k_local["points_of_connection"]["pcc_z3"]["violation_s"] == 120
    assert k_on["points_of_connection"]["pcc_z3"]["violation_s"] < 60
    assert k_on["feeder"]["allbus_violation_s"] < 70 and k_local["feeder"]["allbus_violation_s"] == 120
    ts = on.timeseries()
    assert (ts["feeder.allbus_vm_min_pu"].iloc[-30:] >= 0.95).all()
    active = ts[["shift.n_active_z1", "shift.n_active_z2", "shift.n_active_z3"]].sum(axis=1)
    assert (active == 550).all()  # replicas only move
    assert (ts["shift.n_active_z1"] <= 250).all() and (ts["shift.n_active_z2"] <= 250).all()  # within capacity
    shift = k_on["load_shift"]["shift"]
    assert sum(shift[s]["n_requests_moved_in"] for s in ("z1", "z2", "z3")) == pytest.approx(0.0, abs=1e-6)
