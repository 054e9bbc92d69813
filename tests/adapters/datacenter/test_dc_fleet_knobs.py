"""Per-fleet inference knobs (issue #3: ``max_batch`` and ``replicas`` per inference model):
``n_batch_max_<fleet>`` and ``replicas_<fleet>_frac`` act on their fleet only; the tighter of a
fleet's and the global knob applies; unknown fleet knobs are refused by validation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.adapters.datacenter import ClusterParams, DatacenterSim, build_cluster, cluster_problems, knobs_from
from cosim.scenario import ScenarioError, load_scenario

TWO_FLEETS = {
    "node": "DGX-H100", "n_gpus": 8, "training": {"n_jobs": 0},
    "inference": [{"name": "chat", "model": "llama-3.1-70b", "replicas": 8, "rate_req_s": 60.0},
                  {"name": "code", "model": "llama-3.1-70b", "replicas": 8, "rate_req_s": 60.0}],
}


def run(values: dict, steps: int = 60) -> pd.DataFrame:
    cluster = build_cluster(ClusterParams.model_validate(TWO_FLEETS), np.random.default_rng(3), 86400.0)
    knobs = knobs_from(values, ["chat", "code"])
    return pd.DataFrame([cluster.step(k * 60.0, 60.0, knobs) for k in range(steps)])


def test_fleet_replicas_knob_acts_on_its_fleet_only():
    """Switching chat's replicas off loses chat's tokens only (half of two identical fleets'),
    while the global knob at 0.5 keeps half of *each* fleet serving, which still carries this
    load: same tokens as the base run."""
    base, chat_off, half = run({}), run({"replicas_chat_frac": 0.0}), run({"replicas_frac": 0.5})
    assert chat_off["tokens_per_s"].mean() == pytest.approx(base["tokens_per_s"].mean() / 2, rel=0.05)
    assert chat_off["p_infer_mw"].mean() < base["p_infer_mw"].mean()
    assert half["tokens_per_s"].mean() == pytest.approx(base["tokens_per_s"].mean(), rel=0.02)


def test_tighter_of_fleet_and_global_batch_cap_applies():
    loose_fleet = run({"n_batch_max": 4, "n_batch_max_chat": 256})
    tight_global = run({"n_batch_max": 4})
    pd.testing.assert_frame_equal(loose_fleet, tight_global)  # the global 4 binds either way
    one_fleet = run({"n_batch_max_code": 4})
    assert tight_global["tokens_per_s"].mean() < one_fleet["tokens_per_s"].mean() < run({})["tokens_per_s"].mean()


def test_demand_ratio_scales_the_fleets_arrivals_only():
    """``demand_chat_ratio`` multiplies chat's arrivals (load shifting routes requests with it): at
    0.5 chat serves half its tokens (unsaturated: served = offered), code is unchanged."""
    base, half = run({}), run({"demand_chat_ratio": 0.5})
    one = run({"demand_chat_ratio": 1.0})
    pd.testing.assert_frame_equal(one, base)  # 1 = the fleet's own demand
    assert half["tokens_per_s"].mean() == pytest.approx(0.75 * base["tokens_per_s"].mean(), rel=0.02)
    with pytest.raises(ValueError, match="demand_chat_ratio = -1 is negative"):
        run({"demand_chat_ratio": -1.0}, steps=1)


def test_fleet_knob_out_of_range_is_an_error():
    with pytest.raises(ValueError, match="replicas_chat_frac = 1.5 is outside"):
        run({"replicas_chat_frac": 1.5}, steps=1)


def test_entity_inputs_and_validation(tmp_path):
    params = ClusterParams.model_validate(TWO_FLEETS)
    assert DatacenterSim.entity_inputs("Cluster", params) == [
        "n_batch_max_chat", "replicas_chat_frac", "demand_chat_ratio",
        "n_batch_max_code", "replicas_code_frac", "demand_code_ratio"]
    twice = {**TWO_FLEETS, "inference": [TWO_FLEETS["inference"][0]] * 2}
    assert any("used twice" in p for p in cluster_problems(ClusterParams.model_validate(twice), 3600))
    scenario = tmp_path / "s.toml"
    scenario.write_text('''
[scenario]
name = "fk"
start = 2024-07-15T00:00:00Z
duration_s = 3600
step_s = 60

[sims]
dc = { adapter = "datacenter" }
ctl = { adapter = "signals", file = "knobs.csv", columns = { n_batch_max_chat = "b" } }

[entities]
campus = { sim = "dc", model = "Cluster", node = "DGX-H100", n_gpus = 8, training = { n_jobs = 0 }, inference = [{ name = "chat", model = "llama-3.1-70b", replicas = 8, rate_req_s = 60.0 }] }
knob = { sim = "ctl", model = "Series" }

[[connect]]
src = "knob"
dst = "campus"
attrs = [["n_batch_max_chat", "n_batch_max_nope"]]
''')
    (tmp_path / "knobs.csv").write_text("time_utc,b\n2024-07-15T00:00:00Z,4\n2024-07-15T02:00:00Z,4\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(scenario)
    assert any("campus has no input 'n_batch_max_nope'" in str(p) and "n_batch_max_chat" in str(p)
               for p in info.value.problems)
    scenario.write_text(scenario.read_text().replace("n_batch_max_nope", "n_batch_max_chat"))
    load_scenario(scenario)  # the fleet's own knob is accepted
