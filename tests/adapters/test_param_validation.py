"""Param mistakes that used to pass validation and fail mid-run (found in review) are refused
by the param models, so `cosim validate` names them before any simulator starts."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cosim.adapters.fmu.description import AttrSpec
from cosim.adapters.datacenter import ClusterParams, cluster_problems
from cosim.adapters.wind import WindFarmParams as WindParams


def test_wind_log_profile_needs_heights_above_roughness():
    with pytest.raises(ValidationError, match="above the roughness length"):
        WindParams(roughness_m=4.0, measurement_height_m=2.0)
    WindParams(roughness_m=4.0, measurement_height_m=2.0, profile="power")  # the power law has no such limit


def test_fmu_scale_zero_is_refused():
    with pytest.raises(ValidationError, match="scale = 0 cannot be inverted"):
        AttrSpec(name="q_load_mw", scale=0.0)


@pytest.mark.parametrize("training", [
    {"sizes_gpus": [0, 8], "size_weights": [0.5, 0.5]},
    {"sizes_gpus": [8, 16], "size_weights": [0.5, -0.2]},
    {"sizes_gpus": [8, 16], "size_weights": [0.0, 0.0]},
    {"class_fracs": [0, 0, 0]},
])
def test_synthetic_job_mix_must_be_a_distribution(training):
    with pytest.raises(ValidationError):
        ClusterParams.model_validate({"n_gpus": 64, "training": training})


def test_global_cap_is_checked_on_the_fleets_gpus():
    """p_cap_w applies to inference fleets without p_cap_infer_w: 120 W is settable on an A100
    (100-400 W) but not on an H100 fleet (200-700 W)."""
    params = ClusterParams.model_validate({
        "node": "DGX-A100", "n_gpus": 8, "training": {"n_jobs": 0}, "p_cap_w": 120,
        "inference": [{"name": "f", "node": "DGX-H100", "model": "llama-3.1-8b"}]})
    assert any("H100-SXM's settable power limit range" in p for p in cluster_problems(params, 3600))


def test_union_branch_noise_is_dropped(tmp_path):
    from cosim.scenario import ScenarioError, load_scenario

    path = tmp_path / "s.toml"
    path.write_text('[scenario]\nname = "f"\nstart = 2024-07-15T00:00:00Z\nduration_s = 3600\nstep_s = 60\n'
                    '[sims]\nf = { adapter = "fmu", fmu = "ChillerPlant", attrs = { q_load = { name = "q_load_mw", scale = 0.0 } } }\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert [p.message for p in info.value.problems] == [
        "scale = 0 cannot be inverted for inputs; give the factor from FMU to scenario units"]
