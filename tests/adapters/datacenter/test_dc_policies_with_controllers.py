"""The DR and carbon controllers work unchanged with every scheduling policy (issue 18's "done when"):
scenarios/dr_event.toml, fleet_dr.toml and carbon_aware.toml on a short window, once per
registered policy (a new policy file is run here with no edit). The direct engine gives the
mosaik engine's results (tests/run/test_engines_equal.py) and is faster.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

import cosim
from cosim.adapters.datacenter.policies import available

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
SHORT = {"scenario.engine": "direct", "entities.campus.training.warmup_h": 3.0}


def _run(name: str, policy: str, tmp_path, **over):
    result = cosim.run(SCENARIOS / f"{name}.toml", out_dir=tmp_path,
                       overrides={**SHORT, "entities.campus.training.policy": policy, **over})
    assert result.ok, result.reason
    return result


@pytest.mark.parametrize("policy", sorted(available()))
def test_controllers_run_with_every_policy(policy, tmp_path):
    # dr_event: 1.5 h of baseline, then the first 30 minutes of the 0.5 MW event
    dr = _run("dr_event", policy, tmp_path, **{"scenario.start": datetime(2024, 7, 16, 17, 30, tzinfo=timezone.utc),
                                                    "scenario.duration_s": 7200})
    assert dr.kpis["dr"]["responder"]["delivered_frac"] > 0.9
    # fleet_dr: an hour before and the first hour of the event; the allocator's split lowers the draw
    ts = _run("fleet_dr", policy, tmp_path, **{"scenario.duration_s": 7200}).timeseries()
    active = ts["events.event_active"].astype(bool)
    drop_mw = ts.loc[~active, "campus.p_mw"].mean() - ts.loc[active, "campus.p_mw"].iloc[10:].mean()
    assert drop_mw > 0.4
    # carbon_aware: four hours of the capacity curves on the campus's inflexible load
    ts = _run("carbon_aware", policy, tmp_path, **{"scenario.duration_s": 14_400,
                                                   "entities.campus.training.warmup_h": 6.0}).timeseries()
    assert (ts["batch.p_mw"] <= ts["vcc.p_flex_limit_mw"] + 1e-9).all() and ts["batch.e_served_mwh"].iloc[-1] > 0
