"""Golden run of the datacenter adapter through mosaik, and the scenario-level error reports.

``tests/scenarios/datacenter_short.toml`` (two hours, the ~2 MW Philly-trace cluster at bus 3
of IEEE 33, a one-hour facility limit fed from a CSV through the signals adapter) is run end
to end and compared with ``tests/golden/datacenter_short.csv`` at relative 1e-7 / absolute
1e-9 (round-off across machines; any change of physics, data or scheduling shows). Refresh
with ``pytest tests/adapters/datacenter/test_dc_golden.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import cosim
from cosim.adapters.datacenter import ClusterParams, cluster_problems
from cosim.scenario import ScenarioError, load_scenario
from golden import check_golden

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "tests" / "scenarios" / "datacenter_short.toml"
GOLDEN = ROOT / "tests" / "golden" / "datacenter_short.csv"
RTOL, ATOL = 1e-7, 1e-9


def test_golden_datacenter_short(tmp_path, update_golden):
    result = cosim.run(SCENARIO, out_dir=tmp_path)
    assert result.ok, result.reason
    check_golden(result.timeseries(), GOLDEN, update_golden, RTOL, ATOL)
    ts = result.timeseries()
    # the demand-response window is honoured through mosaik, and the grid sees the campus
    window = ts.iloc[30:90]
    assert (window["campus.p_mw"] <= 1.6 + 1e-9).all() and ts["campus.p_mw"].iloc[:30].max() > 1.7
    np.testing.assert_allclose(ts["pcc.p_mw"], ts["campus.p_mw"])


def _scenario(tmp_path, campus: str) -> Path:
    path = tmp_path / "dc.toml"
    path.write_text(f"""
[scenario]
name = "dc"
start = 2024-07-15T00:00:00Z
duration_s = 3600
step_s = 60
seed = 1

[sims.dc]
adapter = "datacenter"

[entities.campus]
sim = "dc"
model = "Cluster"
{campus}
""")
    return path


def test_validation_reports_impossible_requests(tmp_path):
    trace = tmp_path / "jobs.csv"
    trace.write_text("submitted_time,runtime_s,num_gpus\n2017-10-03 04:00:00,3600,8\n2017-10-03 05:00:00,-60,8\n")
    path = _scenario(tmp_path, f'n_gpus = 64\ntraining = {{ source = "file", file = "{trace.name}" }}')
    with pytest.raises(ScenarioError, match=r"jobs.csv: row 2 \(line 3\), column 'runtime_s': -60 is negative"):
        load_scenario(path)
    path = _scenario(tmp_path, 'n_gpus = 64\ntraining = { n_jobs = 10, sizes_gpus = [8, 128], size_weights = [1, 1] }')
    with pytest.raises(ScenarioError, match=r"job sizes \[128\] GPUs exceed the cluster's n_gpus = 64"):
        load_scenario(path)
    path = _scenario(tmp_path, 'p_cap_w = 150.0')
    with pytest.raises(ScenarioError, match=r"p_cap_w = 150 W is outside the H100-SXM's settable power limit range"):
        load_scenario(path)
    path = _scenario(tmp_path, 'node = "DGX-A100"\ninference = [{ model = "llama-3.1-8b" }]')
    with pytest.raises(ScenarioError, match="no ML.ENERGY inference data for A100-80GB-SXM"):
        load_scenario(path)


def test_campus_week_cluster_is_possible():
    """scenarios/ai_campus_week.toml's campus passes the datacenter's own checks (the full scenario
    is validated and run by hand: it loads a SimBench HV grid)."""
    raw = tomllib.loads((ROOT / "scenarios" / "ai_campus_week.toml").read_text())["entities"]["campus"]
    params = ClusterParams.model_validate({k: v for k, v in raw.items() if k not in ("sim", "model")})
    assert cluster_problems(params, 604_800) == []
    assert params.n_gpus + sum(f.replicas * (2 if "B200" in (f.node or "") else 1) for f in params.inference) > 40_000
