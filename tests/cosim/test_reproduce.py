"""cosim reproduce: figure expressions, case files (every mistake named), judging, a toy case end to end,
on Dask, and the page's charts."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from cosim.cli import main
from cosim.errors import ScenarioError
from cosim.studies import figure_expr as fx
from cosim.studies import reproduce_page
from cosim.studies.reproduce import Figure, judge_figure, load_case, load_cases, run_cases

KPIS = {"a": {"x_mw": 2.0, "ys": [{"z_h": 4.0}]}, "b": {"x_mw": 0.5}}


def value(text, kpis=None):
    kpis = kpis or {"run": KPIS, "other": {"a": {"x_mw": 3.0}}}
    return fx.evaluate(fx.parse(text), lambda v: kpis[v or "run"])


def test_expressions_follow_arithmetic_precedence_and_read_paths():
    assert value("1 + 2 * 3") == 7.0
    assert value("(1 + 2) * 3") == 9.0
    assert value("-2 - -3") == 1.0
    assert value("1e3 / 4") == 250.0
    assert value("a.x_mw / b.x_mw") == 4.0                          # bare path: the first variant
    assert value("other:a.x_mw - run:a.x_mw") == 1.0
    assert value("a.ys.0.z_h") == 4.0                                # list index
    assert value("mean(abs(1 - 3), max(1, 5), min(2, 7))") == pytest.approx((2 + 5 + 2) / 3)


@pytest.mark.parametrize("text, fragment", [
    ("", "give an expression"), ("1 +", "expected"), ("a.x_mw )", "unexpected"),
    ("sqrt(4)", "unknown function"), ("1 $ 2", "cannot read"), ("abs(1, 2)", "takes 1 argument"),
    ("__import__('os')", "cannot read"),
])
def test_bad_expressions_say_what_is_wrong(text, fragment):
    with pytest.raises(fx.ExprError, match=fragment):
        value(text)


def test_a_missing_kpi_names_what_is_there():
    with pytest.raises(fx.MissingKpi, match=r"no 'q_mw' under a; there: x_mw, ys"):
        value("a.q_mw")
    with pytest.raises(fx.MissingKpi, match="not a number"):
        value("a.ys")
    with pytest.raises(ZeroDivisionError):
        value("1 / (a.x_mw - 2)")


@pytest.mark.parametrize("check, published, tol, ours, passed", [
    ("within", 10.0, 1.0, 10.9, True), ("within", 10.0, 1.0, 11.1, False),
    ("at_most", 1.0, 0.0, 1.0, True), ("at_most", 1.0, 0.0, 1.0001, False),
    ("at_least", 0.99, 0.0, 0.99, True), ("at_least", 0.99, 0.01, 0.979, False),
])
def test_judging_each_check(check, published, tol, ours, passed):
    fig = Figure("f", "a.x_mw", published, "s", check, tolerance=tol)
    result = judge_figure(fig, lambda v: {"a": {"x_mw": ours}}, quick=False)
    assert result.ours == ours and result.passed is passed
    assert (result.reason == "") is passed


def test_relative_tolerance_and_quick_only_figures():
    fig = Figure("f", "a.x_mw", 200.0, "s", tolerance_frac=0.02)
    assert fig.tol == 4.0 and fig.tolerance_text() == "±2 %"
    skipped = judge_figure(Figure("g", "a.x_mw", 1.0, "s", tolerance=0.0, quick=False), lambda v: KPIS, quick=True)
    assert skipped.passed is None and skipped.ours is None
    failed_run = judge_figure(Figure("h", "a.x_mw", 1.0, "s", tolerance=0.0), lambda v: None, quick=False)
    assert failed_run.passed is False and "did not finish ok" in failed_run.reason


BAD_CASE = """
[reproduce]
title = ""
colour = "red"
variants = { "bad name" = {}, ok = 3 }

[[reproduce.figures]]
name = "f"
expr = "nope:a.b + "
published = "1"
source = "s"
check = "roughly"

[[reproduce.figures]]
name = "g"
expr = "ok:a.b"
published = 1.0
source = "s"
"""


def test_a_malformed_case_lists_every_problem_with_key_value_and_fix(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(BAD_CASE)
    with pytest.raises(ScenarioError) as err:
        load_case(path)
    text = str(err.value)
    assert str(path) in text
    for fragment in ("reproduce.colour: unknown key; allowed: title", "reproduce.title = '': give a non-empty",
                     "reproduce.source = None", "reproduce.scenario: this file has no [scenario]",
                     "reproduce.variants.bad name: use letters", "reproduce.variants.ok = 3: give a table",
                     "reproduce.figures[0].published = '1': give the paper's number",
                     "reproduce.figures[0].check = 'roughly': use one of within, at_most, at_least",
                     "reproduce.figures[0].expr = 'nope:a.b + ': expected",
                     "reproduce.figures[1].tolerance: a 'within' figure needs tolerance"):
        assert fragment in text, fragment


TOY = """
[scenario]
name = "toy"
start = 2024-07-15T00:00:00Z
duration_s = 7200
step_s = 600

[sims]
src = { adapter = "toy_ramp" }

[entities]
a = { sim = "src", model = "Ramp", p0_mw = 1.0, slope_mw_h = 1.0 }

[reproduce]
title = "toy"
source = "hand-computed"

[reproduce.variants]
base = {}
flat = { "entities.a.slope_mw_h" = 0.0 }

[reproduce.quick]
"scenario.duration_s" = 3600

[[reproduce.figures]]
name = "energy, full"        # p = 1 + t_h held over 10-minute steps: sum(1 + k/6, k < 12) / 6 = 3.8333 MWh
expr = "base:entities.a.energy_mwh"
published = 3.8333333
tolerance = 1e-6
source = "hand"
quick = false

[[reproduce.figures]]
name = "ramp over flat"      # full: 3.8333 / 2; quick: (1 + 15/36) / 1 = 1.41667
expr = "base:entities.a.energy_mwh / flat:entities.a.energy_mwh"
published = 1.9166667
tolerance = 1e-6
source = "hand"
"""


def test_a_toy_case_runs_its_variants_and_judges_its_figures(tmp_path, toy_adapters):
    cases = tmp_path / "published"
    cases.mkdir()
    (cases / "toy.toml").write_text(TOY)
    (full,) = run_cases(load_cases(None, cases), tmp_path / "out", progress=None)
    assert [f.passed for f in full.figures] == [True, True] and full.passed
    assert set(full.runs) == {"base", "flat"} and all(r["status"] == "ok" for r in full.runs.values())
    (quick,) = run_cases(load_cases(["toy"], cases), tmp_path / "q", quick=True, progress=None)
    assert quick.figures[0].passed is None
    assert quick.figures[1].ours == pytest.approx(1 + 15 / 36) and quick.figures[1].passed is False
    assert not quick.passed


SCENARIO_FIGURE = """
[[reproduce.figures]]
name = "mean power over the scenario's p0 (reads the variant's scenario, overrides applied)"
expr = "flat:entities.a.energy_mwh / (flat:scenario.scenario.duration_s / 3600) / flat:scenario.entities.a.p0_mw + base:scenario.entities.a.slope_mw_h - flat:scenario.entities.a.slope_mw_h"
published = 2.0
tolerance = 1e-9
source = "hand: flat draws p0 = 1 MW for the whole run (full 2 h, quick 1 h), plus slope 1 - 0"
"""


def test_a_figure_reads_each_variants_scenario_as_run(tmp_path, toy_adapters):
    cases = tmp_path / "published"
    cases.mkdir()
    (cases / "toy.toml").write_text(TOY + SCENARIO_FIGURE)
    for quick in (False, True):      # quick: duration_s = 3600 from [reproduce.quick], read back as run
        (result,) = run_cases(load_cases(["toy"], cases), tmp_path / f"out{quick}", quick=quick, progress=None)
        assert result.figures[2].ours == pytest.approx(2.0) and result.figures[2].passed, result.figures[2]
    with pytest.raises(ValueError, match="rename that KPI block"):
        fx.with_scenario({"scenario": 1}, {})


def test_the_command_writes_json_and_html_and_exits_1_on_a_failure(tmp_path, toy_adapters, capsys):
    cases = tmp_path / "published"
    cases.mkdir()
    (cases / "toy.toml").write_text(TOY)
    out = tmp_path / "out"
    assert main(["reproduce", "--cases", str(cases), "--out", str(out), "--quiet"]) == 0
    data = json.loads((out / "reproduce.json").read_text())
    assert data["passed"] and data["cases"][0]["figures"][1]["ours"] == pytest.approx(1.9166667, abs=1e-6)
    page = (out / "reproduce.html").read_text()
    assert "ramp over flat" in page and "reproduces" in page and "<script" not in page
    assert main(["reproduce", "--cases", str(cases), "--out", str(tmp_path / "q"), "--quick", "--quiet"]) == 1
    printed = capsys.readouterr().out
    assert "FAIL ramp over flat: 1.417 is outside 1.917 ± 1e-06" in printed
    assert main(["reproduce", "nosuch", "--cases", str(cases)]) == 1
    assert "NAME = 'nosuch': no such case; known: toy" in capsys.readouterr().err
    assert not math.isnan(data["cases"][0]["figures"][0]["ours"])


@pytest.mark.parametrize("where", ["file", "file/sub"])
def test_an_out_that_is_a_file_is_refused_before_any_run(tmp_path, toy_adapters, capsys, where):
    """``--out FILE`` started the runs, then failed with NotADirectoryError; now it is one message
    naming the option and the path, and nothing runs."""
    cases = tmp_path / "published"
    cases.mkdir()
    (cases / "toy.toml").write_text(TOY)
    (tmp_path / "file").write_text("mine")
    assert main(["reproduce", "--cases", str(cases), "--out", str(tmp_path / where), "--quiet"]) == 1
    captured = capsys.readouterr()
    assert "--out = " in captured.err and "not a folder; give a folder" in captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert (tmp_path / "file").read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["file", "published"]


def test_a_case_with_nothing_checked_in_quick_mode_is_not_a_pass(tmp_path, toy_adapters, capsys):
    """Only full-run figures: under --quick nothing is judged, so the case is NOT CHECKED and the
    command exits 1 (it used to print PASS and exit 0 with nothing checked); the full run passes."""
    cases = tmp_path / "published"
    cases.mkdir()
    full_only = TOY.split("[[reproduce.figures]]")
    (cases / "toy.toml").write_text(full_only[0] + "[[reproduce.figures]]" + full_only[1])
    (quick,) = run_cases(load_cases(None, cases), tmp_path / "q", quick=True, progress=None)
    assert [f.passed for f in quick.figures] == [None] and not quick.checked
    assert not quick.passed and quick.verdict == "NOT CHECKED"
    assert main(["reproduce", "--cases", str(cases), "--out", str(tmp_path / "q2"), "--quick", "--quiet"]) == 1
    printed = capsys.readouterr().out
    assert "toy: toy — NOT CHECKED" in printed and "1 not checked in this mode" in printed
    data = json.loads((tmp_path / "q2" / "reproduce.json").read_text())
    assert data["cases"][0]["verdict"] == "NOT CHECKED" and not data["passed"]
    assert "not checked in this mode" in (tmp_path / "q2" / "reproduce.html").read_text()
    (full,) = run_cases(load_cases(None, cases), tmp_path / "f", progress=None)
    assert full.passed and full.verdict == "PASS"


def test_validate_checks_a_sidecar_case_and_its_variants(tmp_path, toy_adapters, capsys):
    """`cosim validate` on a sidecar (a [reproduce] file without [scenario]) validates the base
    scenario under every variant; it used to fail with "section [scenario] is missing"."""
    base, rest = TOY.split("[reproduce]")
    (tmp_path / "toy.toml").write_text(base)
    sidecar = tmp_path / "case.toml"
    sidecar.write_text('[reproduce]\nscenario = "toy.toml"' + rest)
    assert main(["validate", str(sidecar)]) == 0
    assert "published case case on toy.toml: 2 variants (base, flat), 2 figures" in capsys.readouterr().out
    sidecar.write_text('[reproduce]\nscenario = "toy.toml"' + rest.replace('"entities.a.slope_mw_h" = 0.0',
                                                                           '"entities.a.slope_mwh" = 0.0'))
    assert main(["validate", str(sidecar)]) == 1
    err = capsys.readouterr().err
    assert "variant 'flat' of toy.toml" in err and "slope_mwh" in err and "Traceback" not in err


def _daily_demand(path):
    """2023 daily demand: 100 MW, 110 MW on 15 July, 105 MW on 16 January."""
    days = pd.date_range("2023-01-01", periods=365, freq="D", tz="UTC")
    load = pd.Series(100.0, index=days)
    load[pd.Timestamp("2023-07-15", tz="UTC")] = 110.0
    load[pd.Timestamp("2023-01-16", tz="UTC")] = 105.0
    pd.DataFrame({"time_utc": days.strftime("%Y-%m-%dT%H:%M:%SZ"), "demand_mw": load.to_numpy()}).to_csv(
        path, index=False)


HEADROOM_CASE = """
[scenario]
name = "daily_headroom"
start = 2023-01-01T00:00:00Z
duration_s = 31_536_000
step_s = 86400

[kpis.headroom]
limits_pct = [1]

[sims.ba]
adapter = "signals"
file = "demand.csv"
columns = { p_system_load_mw = "demand_mw" }

[entities.ba]
sim = "ba"
model = "Series"

[reproduce]
title = "headroom of a daily series"
source = "hand-computed"

[reproduce.variants]
run = {}

[[reproduce.figures]]
name = "headroom at 1 %"
# thresholds 110 (Apr-Oct) and 105 (Nov-Mar); below 5 MW the 2 peak days curtail L (rate 2/365 = 0.55 %);
# above, the 150 other Nov-Mar days curtail L - 5: (2 L + 150 (L - 5)) / (365 L) = 0.01, L = 750 / 148.35
expr = "headroom.ba.at_1_pct.headroom_mw"
published = 5.0556
tolerance = 1e-4
source = "hand"
"""


@pytest.fixture
def headroom_case(tmp_path):
    cases = tmp_path / "published"
    cases.mkdir()
    _daily_demand(cases / "demand.csv")
    (cases / "daily_headroom.toml").write_text(HEADROOM_CASE)
    return cases


def test_reproduce_on_dask_gives_the_same_results_as_in_process(tmp_path, headroom_case):
    """Every run one Dask task (a local worker process, as ``cosim reproduce --workers 1``): the same
    figures as one after another in this process; the hand-computed headroom passes."""
    (here,) = run_cases(load_cases(None, headroom_case), tmp_path / "here", progress=None,
                        extra={"scenario.engine": "direct"})
    assert here.passed and here.figures[0].ours == pytest.approx(750 / 148.35, rel=1e-6)
    (dask,) = run_cases(load_cases(None, headroom_case), tmp_path / "dask", progress=None, workers=1,
                        extra={"scenario.engine": "direct"})
    assert dask.passed and dask.figures[0].ours == here.figures[0].ours
    assert dask.runs["run"]["run_dir"].startswith(str(tmp_path / "dask"))


def test_a_lost_dask_task_is_a_failed_run_not_a_crash(tmp_path, headroom_case, monkeypatch):
    """A task that raises (here: the run itself) is that run failing, with the error as its reason."""
    import cosim.studies.reproduce as rep

    monkeypatch.setattr(rep, "run_tasks", lambda func, calls, *a, **k: iter([(0, None, "RuntimeError: worker lost")]))
    (res,) = run_cases(load_cases(None, headroom_case), tmp_path / "x", progress=None, workers=1)
    assert res.runs["run"]["status"] == "failed" and "worker lost" in res.runs["run"]["reason"]
    assert res.figures[0].passed is False and not res.passed


def test_the_page_has_a_chart_per_case_and_load_duration_curves_for_headroom(tmp_path, headroom_case):
    out = tmp_path / "out"
    assert main(["reproduce", "--cases", str(headroom_case), "--out", str(out), "--quiet", "--engine", "direct"]) == 0
    page = (out / "reproduce.html").read_text()
    assert page.count("data:image/png;base64,") == 2  # the case's chart and its load-duration curves
    assert "daily_headroom: published vs ours" in page and "load-duration curves" in page
    data = json.loads((out / "reproduce.json").read_text())
    rows = reproduce_page.ratio_rows(data["cases"][0])
    assert rows[0]["ours"] == pytest.approx(750 / 148.35 / 5.0556, rel=1e-6)
    assert rows[0]["low"] == pytest.approx(1 - 1e-4 / 5.0556) and rows[0]["published"] == 1.0
