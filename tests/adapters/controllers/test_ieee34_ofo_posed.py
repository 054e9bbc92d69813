"""scenarios/ieee34_multisite_ofo.toml is posed so that the all-bus band is the datacenters' to hold
(issue #15, round 5): the feeder at the scenario's held taps is in band without the sites and with
both sites at their floor power, and out of band with them at full power; and OFO holds the band
over the first 90 s without pinning either site at its floor (the file's earlier sizing, 0.88 MW of
sites whose floor alone, 0.68 MW, took the feeder under 0.95 pu, had OFO hold both sites at
allowance 0 for the whole run and lose 91 % of the tokens); and with the file's shifting priced by
OFO's duals, `down`'s replicas move to `up` and `down` gets its allowance back.

The site powers are the file's, measured with `cosim run` (the header gives the commands): at full
allowance up 0.1845 MW + 0.0375 Mvar, down 0.4016 + 0.0816; at the floor (GPU cap 200 W) up 0.1517 +
0.0308, down 0.3025 + 0.0614. The feeder is grid_models/ieee34.dss (Kersting 2001), whose
published solution holds its regulators at the taps the scenario holds.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim import grid_models
from cosim.adapters.grid.opendss_flow import OpenDssFlow

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "scenarios" / "ieee34_multisite_ofo.toml"
RAW = tomllib.loads(SCENARIO.read_text())
NOMINAL = [(0.1845, 0.0375), (0.4016, 0.0816)]   # (p_mw, q_mvar) of up, down at full allowance
FLOOR = [(0.1517, 0.0308), (0.3025, 0.0614)]     # ... at the floor (GPU cap 200 W)


def monitored_vm_pu(sites: list[tuple[float, float]]) -> np.ndarray:
    """Every monitored bus-phase's voltage with the sites drawing ``sites`` at the scenario's buses."""
    grid = RAW["sims"]["grid"]
    flow = OpenDssFlow(grid_models.dss_file(grid["network"]), regulators=grid["regulators"],
                       tap_positions=grid["tap_positions"])
    for name in ("pcc_up", "pcc_down"):
        flow.attach("load", RAW["entities"][name]["bus"], 0.0, 0.0, name)
    p, q = np.array([s[0] for s in sites]), np.array([s[1] for s in sites])
    empty = np.zeros(0)
    assert flow.solve({"load": p, "sgen": empty, "storage": empty}, {"load": q, "sgen": empty, "storage": empty})
    excluded = set(grid["exclude_buses"])
    keep = [i for i, attr in enumerate(flow.phase_attrs) if attr.split("_")[1] not in excluded]
    return flow.phase_vm_pu()[keep]


@pytest.mark.parametrize(("sites", "in_band"), [
    ([(0.0, 0.0), (0.0, 0.0)], True),   # the feeder alone: 0.976-1.048 pu measured
    (FLOOR, True),                       # both sites at their floor: min 0.957 pu
    (NOMINAL, False),                    # both at full power: min 0.947 pu (854 a, 830 a)
], ids=["no_datacenter", "sites_at_floor", "sites_at_full_power"])
def test_the_band_is_the_sites_to_hold(sites, in_band):
    vm = monitored_vm_pu(sites)
    margin = RAW["entities"]["ofo"].get("margin_pu", 0.002)
    # OFO's margin below; the highs (802, next to the 1.05 pu source) are the feeder's own
    inside = vm.min() >= 0.95 + margin and vm.max() <= 1.05
    assert inside == in_band, (vm.min(), vm.max())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("ieee34_ofo")
    short = {"scenario.duration_s": 90, "scenario.engine": "direct"}
    alone = cosim.run(SCENARIO, out_dir=out / "alone", overrides={**short, "entities.shift.enabled": False})
    shifted = cosim.run(SCENARIO, out_dir=out / "shifted", overrides=short)
    assert alone.ok and shifted.ok, (alone.reason, shifted.reason)
    return alone, shifted


def test_ofo_holds_the_band_without_pinning_a_site_at_its_floor(runs):
    for result in runs:
        ts = result.timeseries()
        assert (ts["feeder.allbus_vm_min_pu"].iloc[20:] >= 0.95).all()  # in band from 20 s (17 s measured)
        assert result.kpis["feeder"]["allbus_violation_s"] <= 20
        assert (ts["ofo.allowance_up_frac"].iloc[-30:] > 0.99).all()    # 850's column is the smaller: untouched
    late = runs[0].timeseries().iloc[-30:]
    assert (late["ofo.allowance_down_frac"] > 0.15).all()                # ~0.29 measured; the old sizing: 0


def test_shifting_priced_by_the_duals_moves_down_s_load_to_up_and_gives_it_its_allowance_back(runs):
    """OFO's ``shift_when_throttled`` with load_shift's ``shift_on_signal``: `down` (throttled, the dearer
    MW at 854 a / 830 a) moves replicas to `up`'s warm spares (all 50, from 7 to 31 s, measured) while
    its own bus is in band, replicas are conserved and within capacity, and `down` ends the window less throttled
    than with OFO alone."""
    alone, shifted = (r.timeseries() for r in runs)
    active = shifted["shift.n_active_up"] + shifted["shift.n_active_down"]
    assert (active == 120).all() and (shifted["shift.n_active_up"] <= 80).all()
    assert shifted["shift.n_active_up"].iloc[-1] >= 70
    assert (shifted["pcc_down.vm_phase_min_pu"] >= 0.95).all()           # not the last-resort rule
    late = "ofo.allowance_down_frac"
    assert shifted[late].iloc[-30:].mean() > alone[late].iloc[-30:].mean() + 0.2
