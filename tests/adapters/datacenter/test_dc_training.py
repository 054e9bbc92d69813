"""Training workload: trace reading and its errors, Philly extract, Acme power draws, Zeus cap curves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.adapters.datacenter import training as tr


def _write(tmp_path, text, name="jobs.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_philly_extract_matches_its_readme():
    """README of the extract: 4,206 jobs; 2 GPUs: 385, 4: 1,843, 8: 1,642, 16: 264, 128: 3."""
    frame = tr.read_job_trace(tr.PHILLY_FILE)
    assert len(frame) == 4206
    counts = frame["n_gpus"].value_counts()
    assert (counts[2], counts[4], counts[8], counts[16], counts[128]) == (385, 1843, 1642, 264, 3)
    assert frame["submit_s"].iloc[0] == 0 and frame["submit_s"].is_monotonic_increasing
    assert (frame["work_s"] >= 3600).all()  # DRE kept jobs running at least 60 min


def test_speedup_compresses_submissions():
    slow = tr.read_job_trace(tr.PHILLY_FILE)
    fast = tr.read_job_trace(tr.PHILLY_FILE, time_scale=10.0)
    np.testing.assert_allclose(fast["submit_s"], slow["submit_s"] / 10.0)


@pytest.mark.parametrize("text, where", [
    ("submitted_time,num_gpus\n2017-10-01 00:00:00,8\n", "missing column 'runtime_s'"),
    ("submitted_time,runtime_s,num_gpus\n2017-10-01 00:00:00,60,8\n2017-10-01 00:01:00,-5,8\n",
     r"row 2 \(line 3\), column 'runtime_s': -5 is negative"),
    ("submitted_time,runtime_s,num_gpus\n2017-10-01 00:00:00,60,8\nyesterday,60,8\n",
     r"row 2 \(line 3\), column 'submitted_time': cannot parse 'yesterday'"),
    ("submitted_time,runtime_s,num_gpus\n2017-10-01 00:00:00,60,eight\n",
     r"row 1 \(line 2\), column 'num_gpus': 'eight' is not a number"),
    ("submit_s,runtime_s,num_gpus,priority\n0,60,8,urgent\n", r"column 'priority': 'urgent' is not one of"),
])
def test_malformed_trace_names_file_row_and_column(tmp_path, text, where):
    path = _write(tmp_path, text)
    with pytest.raises(tr.TraceError, match="jobs.csv: .*" + where):
        tr.read_job_trace(path)


def test_trace_with_own_classes_keeps_them(tmp_path):
    path = _write(tmp_path, "submit_s,runtime_s,num_gpus,priority,flexible\n0,60,8,low,1\n30,90,2,high,0\n")
    jobs = tr.jobs_from_trace(tr.read_job_trace(path), np.random.default_rng(0))
    assert list(jobs.prio) == [2, 0] and list(jobs.flexible) == [True, False]


def test_synthetic_jobs_are_seeded_and_within_bounds():
    a = tr.synthetic_jobs(np.random.default_rng(5), 500, 86400.0)
    b = tr.synthetic_jobs(np.random.default_rng(5), 500, 86400.0)
    np.testing.assert_array_equal(a.work_s, b.work_s)
    assert (np.diff(a.submit_s) >= 0).all() and a.submit_s.max() < 86400.0
    assert set(np.unique(a.n_gpus)) <= set(tr.SIZES_GPUS)
    assert a.work_s.max() <= 168 * 3600 and not a.flexible[a.prio == 0].any()


def test_power_draws_follow_the_acme_busy_distribution():
    """Hu et al. (NSDI 2024) per-GPU power CDFs, A100, Seren and Kalos: the pooled draws above the
    75 W idle plateau fall, quantile by quantile, between the two clusters' own busy quantiles."""
    data = pd.read_csv(tr.ACME_FILE)
    data = data[data["metric"] == "gpu_power"]
    frac = tr.sample_power_frac(np.random.default_rng(0), 200_000)
    power_w = tr.ACME_IDLE_W + frac * (tr.ACME_TDP_W - tr.ACME_IDLE_W)
    for q in (25, 50, 75):
        bounds = []
        for _, cdf in data.groupby("cluster"):
            f0 = np.interp(tr.ACME_BUSY_W, cdf["value"], cdf["cdf_pct"])
            bounds.append(np.interp(f0 + q * (100 - f0) / 100, cdf["cdf_pct"], cdf["value"]))
        assert min(bounds) - 5 <= np.percentile(power_w, q) <= max(bounds) + 5
    assert frac.min() >= 0 and frac.max() == 1.0  # draws above the A100's 400 W TDP clip to it


def test_cap_curves_reproduce_zeus_medians_and_are_monotone():
    """Zeus (You et al., NSDI 2023), V100 and A40 sweeps: at a cap of ~0.5x the uncapped draw
    training runs at ~0.5x speed; at ~0.8x it keeps >= 90 %; at >= 1.3x it is unaffected."""
    xs, speed, power = tr.cap_curves()
    assert (np.diff(xs) > 0).all() and (np.diff(speed) >= 0).all() and (np.diff(power) >= 0).all()
    s, p = tr.capped(np.array([0.5, 0.8, 1.3, 3.0]))
    assert 0.4 <= s[0] <= 0.6 and s[1] >= 0.9 and s[2] == s[3] == 1.0
    assert p[0] <= 0.55 and p[2] == 1.0
