"""bench/bench_scaling.py runs the smallest case of each axis and reports figures of the right shape.

No timing is asserted (speed lives in the benchmark's output); the cases are cut to an hour so
the test takes seconds.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_scaling.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_scaling", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def smallest(bench):
    """The smallest case of each axis, cut to an hour, run in this process."""
    axes = {}
    for name, cases in bench.axis_cases(quick=True).items():
        work, label, spec = cases[0]
        axes[name] = bench.measure_axis(name, [(work, label, {**spec, "duration_s": 3600})], run=bench.one_case)
    return {"meta": {"date": "today", "load_1min": 0.0, "n_cpus": 2}, "axes": axes}


def test_each_axis_has_the_cases_the_brief_names(bench):
    full = bench.axis_cases(quick=False)
    assert [w for w, _, _ in full["duration"]] == [1, 7, 30, 365]
    assert [w for w, _, _ in full["gpus"]] == [1e3, 1e4, 1e5, 1e6]
    assert [w for w, _, _ in full["campuses"]][::len(full["campuses"]) - 1] == [1, 100]
    assert min(w for w, _, _ in full["buses"]) <= 33 and max(w for w, _, _ in full["buses"]) == 4876
    assert all(len(cases) == 2 for cases in bench.axis_cases(quick=True).values())


def test_scenarios_hold_the_work_of_each_case(bench):
    full = bench.axis_cases(quick=False)
    hundred = bench.scenario_toml(full["campuses"][-1][2])
    assert hundred.count('model = "Cluster"') == 100 and hundred.count('model = "Load"') == 100
    million = bench.scenario_toml(full["gpus"][-1][2])
    assert "[sims.grid]" not in million and "n_gpus = 800000" in million and "replicas = 50000" in million
    year = bench.scenario_toml(full["duration"][-1][2])
    assert f"duration_s = {365 * 86400}" in year


def test_smallest_cases_run_and_report_every_figure(smallest):
    assert set(smallest["axes"]) == {"duration", "gpus", "campuses", "buses"}
    for name, axis in smallest["axes"].items():
        (point,) = axis["points"]
        assert point["ok"], name
        assert point["n_steps"] == 12
        assert min(point[k] for k in ("setup_s", "first_step_s", "step_ms", "rss_mib", "n_columns")) > 0
        assert math.isnan(axis["growth"]["slope"]) and axis["growth"]["verdict"] == "one point: no slope"


def test_slopes_on_log_log_axes_and_where_growth_stops_being_linear(bench):
    assert bench.loglog_slope([1, 10, 100], [3, 300, 30000]) == pytest.approx(2.0)
    points = [{"work": w, "label": f"{w:g}", "step_ms": ms, "n_steps": 10, "rss_mib": 100.0, "setup_s": 1.0,
               "first_step_s": 0.1, "n_columns": 10 * w, "recorder_ms": 0.01 * w}
              for w, ms in ((1, 1.0), (10, 5.0), (100, 50.0), (1000, 5000.0))]
    g = bench.growth("gpus", points)
    assert g["local_slopes"] == pytest.approx([math.log10(5), 1.0, 2.0])
    assert g["recorder_slope"] == pytest.approx(1.0)  # the recorder's time against cells recorded
    # cells nearly the same at every point (the buses axis): no slope against them, whatever the times
    narrow = [{**p, "n_columns": 100 + p["work"] // 100} for p in points]
    assert math.isnan(bench.growth("gpus", narrow)["recorder_slope"])
    assert g["stops_linear_at"] == "1000" and g["rss_slope"] == pytest.approx(0.0)
    # on the duration axis the cost is the whole stepping time: a constant time per step is linear
    flat = [{**p, "step_ms": 1.0, "n_steps": int(p["work"] * 288)} for p in points]
    assert bench.growth("duration", flat)["slope"] == pytest.approx(1.0)
    assert bench.growth("duration", flat)["verdict"] == "linear over the axis"


def test_plot_draws_one_panel_per_axis(bench, smallest, tmp_path):
    path = tmp_path / "scaling.png"
    fig = bench.plot(smallest, path)
    panels = [ax for ax in fig.axes if ax.get_ylabel() == "time per step [ms]"]
    assert len(panels) == 4 and len(fig.axes) == 8  # each panel with its RSS twin
    assert all(ax.get_xscale() == ax.get_yscale() == "log" for ax in fig.axes)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_repeated_runs_stand_at_the_fastest_and_call_super_linear_only_beyond_their_spread(bench, tmp_path):
    """Each case runs ``repeat`` times, the cases in turn; a point stands at its fastest run; a neighbour's slope
    above 1.2 at the fastest runs is super-linear only when it stays above 1.2 from the lower point's slowest run."""
    order = []
    times = {1.0: [1.0, 1.9], 10.0: [15.0, 16.0], 100.0: [400.0, 410.0]}  # ms per step by work, run by run

    def run(spec):
        order.append(spec["w"])
        ms = times[spec["w"]][order.count(spec["w"]) - 1]
        return {"step_ms": ms, "n_steps": 10, "rss_mib": 100.0, "setup_s": 1.0, "first_step_s": 0.1,
                "n_columns": 10, "recorder_ms": 0.01, "ok": True}

    cases = [(w, f"{w:g}", {"w": w}) for w in times]
    axis = bench.measure_axis("gpus", cases, run=run, repeat=2)
    assert order == [1.0, 10.0, 100.0, 1.0, 10.0, 100.0]  # the cases in turn, not each one twice in a row
    assert [p["step_ms"] for p in axis["points"]] == [1.0, 15.0, 400.0]
    assert axis["points"][0]["step_ms_runs"] == [1.0, 1.9]
    g = axis["growth"]
    # 1 -> 10: slope log10(15) = 1.18 at the fastest, 0.90 from the slowest: linear; 10 -> 100: 1.43 and 1.40
    assert g["local_slopes"] == pytest.approx([math.log10(15), math.log10(400 / 15)])
    assert g["spread_slopes"] == pytest.approx([math.log10(15 / 1.9), math.log10(400 / 16)])
    assert g["stops_linear_at"] == "100" and "beyond the spread of 2 runs" in g["verdict"]
    times[100.0] = [250.0, 600.0]  # above 1.2 at the fastest runs (1.22), 1.19 from the slowest
    order.clear()
    g = bench.measure_axis("gpus", cases, run=run, repeat=2)["growth"]
    assert g["stops_linear_at"] is None and g["verdict"].startswith("linear within this machine's spread (from 100")
    fig = bench.plot({"meta": {"date": "today", "load_1min": 0.0, "n_cpus": 2}, "axes": {"gpus": axis}},
                     tmp_path / "spread.png")
    assert any("spread" in text.get_text() for ax in fig.axes for text in (ax.get_legend().get_texts()
                                                                            if ax.get_legend() else []))
