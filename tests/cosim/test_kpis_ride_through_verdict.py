"""Ride-through envelopes as data (cosim/scenario/envelopes.py) and the verdict KPI block
(cosim/kpis/ride_through_verdict.py): the shipped files against the tables they cite, a user's own
file and its validation, and the verdict's margins on synthetic trajectories computed by hand."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cosim.errors import ScenarioError
from cosim.kpis import ride_through_verdict as rtv
from cosim.kpis._block import KpiInput
from cosim.roles import RunRoles
from cosim.scenario import envelopes, load_scenario

ROOT = Path(__file__).resolve().parents[2]
FAULT_SCENARIO = ROOT / "scenarios" / "ieee13_fault_ride_through.toml"


# -- the shipped files -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", envelopes.shipped())
def test_every_shipped_envelope_is_valid_and_cites_its_source(name):
    data = tomllib.loads((envelopes.ENVELOPE_DIR / f"{name}.toml").read_text())
    assert envelopes.envelope_problems(data) == []
    env = envelopes.load(name)
    assert env.name == name and env.source["document"] and env.source["date"]
    if env.status == "placeholder":
        assert env.points == () and env.source["note"]  # says why there are no values
    else:
        assert env.points[0][0] == 0.0 and len(env.points) >= 2


def test_itic_lower_against_the_iti_curve():
    """ITI (CBEMA) curve application note (2000): any voltage for 20 ms, 70 % to 0.5 s, 80 % to 10 s, 90 % on."""
    env = envelopes.load("itic_lower")
    assert [env.boundary(t) for t in (0.0, 0.019, 0.02, 0.3, 0.5, 9.9, 10.0, 100.0)] == \
        [0.0, 0.0, 0.7, 0.7, 0.8, 0.8, 0.9, 0.9]
    assert env.time_limit(0.0) == 0.02 and env.time_limit(0.7) == 0.5 and env.time_limit(0.85) == 10.0
    assert env.time_limit(0.95) == math.inf
    assert env.voltage_definition == "worst_phase" and env.must_stay == "above"


def test_itic_upper_against_the_iti_curve():
    """ITI curve: 120 % from 3 ms to 0.5 s, 110 % beyond 0.5 s (swells)."""
    env = envelopes.load("itic_upper")
    assert env.boundary(0.01) == 1.2 and env.boundary(0.49) == 1.2 and env.boundary(0.5) == 1.1
    assert env.time_limit(1.2) == 0.5 and env.time_limit(1.1) == math.inf and env.must_stay == "below"


def test_semi_f47_against_its_test_points():
    """SEMI F47-0706: 50 % for 200 ms, 70 % for 0.5 s, 80 % for 1 s; nothing required below 50 ms."""
    env = envelopes.load("semi_f47")
    assert env.time_limit(0.5) == 0.2 and env.time_limit(0.7) == 0.5
    assert env.boundary(0.04) == 0.0 and env.boundary(0.1) == 0.5 and env.boundary(0.3) == 0.7
    assert env.boundary(0.9) == 0.8


# -- a user's own file and its validation ------------------------------------------------------------
USER = """
[envelope]
name = "utility_lvrt"
title = "A utility's LVRT"
quantity = "voltage"
must_stay = "above"
voltage_definition = "positive_sequence"
points = [[0.0, 0.0], [0.15, 0.45], [0.3, 0.65], [2.0, 0.9]]

[source]
document = "Utility interconnection handbook"
table = "Table 4"
date = "2026-01"
"""


def _user(tmp_path, **replace) -> Path:
    text = USER
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "env.toml"
    path.write_text(text)
    return path


def test_a_user_envelope_file_loads(tmp_path):
    env = envelopes.load(str(_user(tmp_path)))
    assert env.boundary(0.2) == 0.45 and env.continuous == 0.9


@pytest.mark.parametrize("old, new, message", [
    ("[[0.0, 0.0], [0.15, 0.45], [0.3, 0.65]", "[[0.0, 0.0], [0.3, 0.45], [0.15, 0.65]", "not increasing"),
    ("[0.3, 0.65]", "[0.15, 0.65]", "overlaps points[1]"),
    ('"positive_sequence"', '"average"', "unknown voltage definition"),
    ("[2.0, 0.9]", "[2.0, 2.5]", "outside 0-2 pu"),
    ("[0.3, 0.65]", "[0.3, 0.4]", "loosens with time"),
    ("[[0.0, 0.0], [0.15", "[[0.1, 0.0], [0.15", "first point is at t_s = 0"),
    ('must_stay = "above"', 'must_stay = "inside"', "must_stay"),
    ('quantity = "voltage"', 'quantity = "current"', "envelope.quantity"),
    ('table = "Table 4"', 'note = ""', "section or table"),
])
def test_a_bad_envelope_file_is_one_problem(tmp_path, old, new, message):
    with pytest.raises(envelopes.EnvelopeError) as err:
        envelopes.load(str(_user(tmp_path, **{old: new})))
    assert len(err.value.problems) == 1 and message in err.value.problems[0]
    assert str(tmp_path / "env.toml") in str(err.value)


def _verdict_scenario(refs):
    return load_scenario(FAULT_SCENARIO, {"kpis.ride_through_verdict.envelopes": refs})


PLACEHOLDERS = [name for name in envelopes.shipped() if envelopes.load(name).status == "placeholder"]


@pytest.mark.parametrize("name", PLACEHOLDERS)
def test_validation_refuses_a_verdict_of_every_placeholder(name):
    """Each placeholder, named next to a published envelope, is the one problem, and the message
    carries the file's own reason for having no values."""
    with pytest.raises(ScenarioError) as err:
        _verdict_scenario({"pcc": ["itic_lower", name]})
    text = str(err.value)
    assert "kpis.ride_through_verdict.envelopes.pcc[1]" in text and "placeholder" in text
    assert len(err.value.problems) == 1
    assert envelopes.load(name).source["note"][:60] in text


@pytest.mark.parametrize("name", PLACEHOLDERS)
def test_every_placeholder_says_where_its_table_is_and_why_it_is_empty(name):
    """A placeholder names the attachment, clause or section its values are in, when the primary text
    was looked for, and that no value was taken from a secondary copy."""
    env = envelopes.load(name)
    assert env.points == () and env.source["section"]
    note = env.source["note"]
    assert "checked 6 December 2026" in note and "into your own envelope file" in note
    assert "secondary" in note.lower()


def test_validation_names_an_unknown_envelope_and_entity():
    with pytest.raises(ScenarioError) as err:
        _verdict_scenario({"pcc": ["itic_lowr"], "nowhere": ["semi_f47"]})
    text = str(err.value)
    assert "nearest: itic_lower" in text and "nowhere" in text and len(err.value.problems) == 2


def test_validation_refuses_a_verdict_on_an_unrecorded_point_of_connection():
    with pytest.raises(ScenarioError) as err:
        load_scenario(FAULT_SCENARIO, {"kpis.ride_through_verdict.envelopes": {"pcc": ["itic_lower"]},
                                       "record.include": ["campus.p_mw"]})
    assert len(err.value.problems) == 1 and "records none of pcc.v1_pu" in str(err.value)


def test_validation_reads_a_user_file_relative_to_the_scenario(tmp_path):
    scn = _verdict_scenario({"pcc": [str(_user(tmp_path, **{'voltage_definition = "positive_sequence"':
                                                            'voltage_definition = "worst_phase"'}))]})
    assert scn.kpis.ride_through_verdict.envelopes["pcc"][0] == str(tmp_path / "env.toml")
    with pytest.raises(ScenarioError, match="overlaps"):
        _verdict_scenario({"pcc": [str(_user(tmp_path, **{"[0.3, 0.65]": "[0.15, 0.65]"}))]})


# -- the verdict on synthetic trajectories ----------------------------------------------------------
def _trajectory(dt_s, n, events):
    """1.0 pu everywhere but ``(t_start_s, duration_s, value)`` events. ``(t [s], v)``."""
    t = np.round(np.arange(n) * dt_s, 9)
    v = np.ones(n)
    for start, length, value in events:
        v[(t >= start - 1e-9) & (t < start + length - 1e-9)] = value
    return t, v


def test_a_sag_inside_itic_passes_with_hand_computed_margins():
    """0.75 pu for 0.1 s at 10 ms steps: below 90 % (a disturbance); boundary 0 for 20 ms then 0.7:
    smallest margin 0.75 − 0.7 = 0.05 pu from t = 1.02 s; 0.75 may be held until the 80 % level at
    0.5 s, so the time margin is 0.5 − 0.1 = 0.4 s at the last step (t = 1.09 s)."""
    env = envelopes.load("itic_lower")
    t, v = _trajectory(0.01, 300, [(1.0, 0.1, 0.75)])
    (d,) = rtv.judge(env, t, v, 0.01)
    assert d["pass"] is True and d["t_start_s"] == 1.0 and d["duration_s"] == pytest.approx(0.1)
    assert d["min_pu"] == 0.75 and d["margin_pu"] == pytest.approx(0.05) and d["t_margin_s"] == pytest.approx(1.02)
    assert d["margin_time_s"] == pytest.approx(0.4) and d["t_margin_time_s"] == pytest.approx(1.09)


def test_a_deeper_sag_fails_with_negative_margins():
    """0.6 pu for 50 ms: 0.1 pu below the 70 % level from 20 ms (t = 1.02 s); 0.6 pu may be held
    for 20 ms only: the time margin is 0.02 − 0.05 = −0.03 s at t = 1.04 s."""
    env = envelopes.load("itic_lower")
    t, v = _trajectory(0.01, 300, [(1.0, 0.05, 0.6)])
    (d,) = rtv.judge(env, t, v, 0.01)
    assert d["pass"] is False and d["margin_pu"] == pytest.approx(-0.1) and d["t_margin_s"] == pytest.approx(1.02)
    assert d["margin_time_s"] == pytest.approx(-0.03) and d["t_margin_time_s"] == pytest.approx(1.04)


def test_a_value_is_held_over_its_step():
    """An outage recorded at 0.1 s steps lasted 0.1 s: past ITIC's 20 ms (the boundary over the step
    reaches 0.7): fails by 0.7 pu and 0.08 s. At the boundary exactly (0.7 pu for 0.5 s) it passes, margin 0."""
    env = envelopes.load("itic_lower")
    t, v = _trajectory(0.1, 50, [(1.0, 0.1, 0.0)])
    (d,) = rtv.judge(env, t, v, 0.1)
    assert d["pass"] is False and d["margin_pu"] == pytest.approx(-0.7) and d["margin_time_s"] == pytest.approx(-0.08)
    t, v = _trajectory(0.1, 50, [(1.0, 0.5, 0.7)])
    (d,) = rtv.judge(env, t, v, 0.1)
    assert d["pass"] is True and d["margin_pu"] == pytest.approx(0.0) and d["margin_time_s"] == pytest.approx(0.0)


def test_a_swell_against_the_upper_boundary():
    """1.15 pu for 0.6 s: 0.05 pu under the 120 % level, then 0.05 pu over the 110 % level from 0.5 s
    (t = 1.5 s); 1.15 pu may be held for 0.5 s: time margin 0.5 − 0.6 = −0.1 s."""
    env = envelopes.load("itic_upper")
    t, v = _trajectory(0.1, 50, [(1.0, 0.6, 1.15)])
    (d,) = rtv.judge(env, t, v, 0.1)
    assert d["max_pu"] == 1.15 and d["pass"] is False
    assert d["margin_pu"] == pytest.approx(-0.05) and d["t_margin_s"] == pytest.approx(1.5)
    assert d["margin_time_s"] == pytest.approx(-0.1)


def test_frequency_envelope_two_disturbances_and_one_open_at_the_end(tmp_path):
    """A user's frequency envelope (57 Hz, 59 Hz from 10 s, 59.5 Hz from 60 s): 58.5 Hz for 20 s
    fails at 10 s by 0.5 Hz; 59.2 Hz for 5 s passes by 2.2 Hz (the 57 Hz
    level holds for its 5 s; 59.2 Hz may be held until the 59.5 Hz level at 60 s: 55 s to spare); a dip
    running into the end is flagged open."""
    path = tmp_path / "f.toml"
    path.write_text('[envelope]\nname = "f"\ntitle = "f"\nquantity = "frequency"\nmust_stay = "above"\n'
                    'points = [[0.0, 57.0], [10.0, 59.0], [60.0, 59.5]]\n'
                    '[source]\ndocument = "d"\nsection = "s"\ndate = "2026"\n')
    env = envelopes.load(str(path))
    t = np.arange(200.0)
    f = np.full(200, 60.0)
    f[10:30], f[100:105], f[195:] = 58.5, 59.2, 59.0
    d1, d2, d3 = rtv.judge(env, t, f, 1.0)
    assert (d1["pass"], d1["margin_hz"], d1["t_margin_s"], d1["margin_time_s"]) == (False, pytest.approx(-0.5), 20.0, -10.0)
    assert (d2["pass"], d2["margin_hz"], d2["margin_time_s"]) == (True, pytest.approx(2.2), 55.0)
    assert d3["open_at_end"] is True and d1["open_at_end"] is False


def _input(frame: pd.DataFrame, envelopes_by_entity) -> KpiInput:
    return KpiInput(frame, (frame.index[1] - frame.index[0]).total_seconds() / 3600, 0.1, RunRoles({}),
                    params={rtv.NAME: {"envelopes": envelopes_by_entity}})


def test_block_judges_both_definitions_and_decides_on_the_file_s():
    index = pd.date_range("2024-01-01", periods=40, freq="100ms", tz="UTC")
    frame = pd.DataFrame({"pcc.v1_pu": 1.0, "pcc.v_worst_pu": 1.0, "pcc.vm_phase_min_pu": 1.0}, index=index)
    frame.iloc[10:12, :] = [0.82, 0.02, 0.02]
    frame.loc[frame.index[10:12], "pcc.v1_pu"] = 0.82
    out = rtv.compute(_input(frame, {"pcc": ["itic_lower", "semi_f47"]}))[rtv.NAME]["pcc"]
    assert out["itic_lower"]["positive_sequence"]["pass"] is True
    assert out["itic_lower"]["worst_phase"]["pass"] is False and out["itic_lower"]["pass"] is False
    d1 = out["itic_lower"]["worst_phase"]["disturbances"]["d1"]
    assert d1["t_start_s"] == pytest.approx(1.0) and d1["margin_pu"] == pytest.approx(0.02 - 0.7)
    assert out["semi_f47"]["positive_sequence"]["n_disturbances"] == 0  # 0.82 pu is inside F47's 80 %


def test_block_on_a_balanced_engine_judges_the_bus_voltage():
    """Without phases (vm_pu only) a worst-phase envelope is judged on the bus voltage, and says so."""
    index = pd.date_range("2024-01-01", periods=20, freq="100ms", tz="UTC")
    frame = pd.DataFrame({"pcc.vm_pu": 1.0}, index=index)
    frame.iloc[5:7, 0] = 0.5
    out = rtv.compute(_input(frame, {"pcc": ["itic_lower"]}))[rtv.NAME]["pcc"]["itic_lower"]
    assert "worst_phase" not in out and out["applies_to_judged_on"] == "positive_sequence"
    assert out["pass"] is False and out["positive_sequence"]["margin_pu"] == pytest.approx(0.5 - 0.7)


def test_the_report_draws_each_trajectory_over_its_envelope(tmp_path):
    """End to end on scenarios/ieee13_fault_ride_through.toml: the verdicts in kpis.json, the
    trajectories over the envelopes in report.html (absent, and not listed as missing, without verdicts)."""
    from cosim.run import run

    result = run(FAULT_SCENARIO, tmp_path / "with", overrides={"scenario.engine": "direct"}, report=True)
    verdict = result.kpis[rtv.NAME]["pcc"]
    assert verdict["itic_lower"]["pass"] is False and verdict["itic_upper"]["pass"] is False
    assert verdict["semi_f47"]["worst_phase"]["disturbances"]["d1"]["duration_s"] == pytest.approx(0.2)
    html = (result.run_dir / "report.html").read_text()
    assert "id='fig-ride_through'" in html and "Ride-through envelopes" in html
    bare = run(FAULT_SCENARIO, tmp_path / "without", report=True,
               overrides={"scenario.engine": "direct", "kpis.ride_through_verdict.envelopes": {}})
    html = (bare.run_dir / "report.html").read_text()
    assert "id='fig-ride_through'" not in html and "no ride-through verdicts" not in html
    assert set(bare.kpis[rtv.NAME]) == {"cessations"}


def test_cosim_validate_checks_an_envelope_file(tmp_path, capsys):
    """``cosim validate`` on a user's envelope file: ok with a summary, or every problem and exit 1."""
    from cosim.cli import main

    assert main(["validate", str(_user(tmp_path))]) == 0
    assert "ok — envelope utility_lvrt (voltage, positive_sequence): 4 points" in capsys.readouterr().out
    bad = _user(tmp_path, **{"[0.3, 0.65]": "[0.15, 0.65]", '"positive_sequence"': '"rms"'})
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}: 2 problems:") and "overlaps points[1]" in err and "unknown voltage definition" in err
    assert main(["validate", str(envelopes.ENVELOPE_DIR / "prc_029_1_voltage.toml")]) == 0
    assert "placeholder" in capsys.readouterr().out


def test_verdicts_on_the_andes_interconnection_study(tmp_path):
    """scenarios/interconnection_study.toml (ANDES, balanced: the campus bus's lowest voltage in each
    step, ``pcc.vm_min_pu``, is the positive-sequence voltage), cut to its first 100 ms fault at 10 s:
    bus 16 at v ≈ 0.64 pu for one 0.1 s step fails ITIC (70 % from 20 ms: margin v − 0.7, time margin
    0.02 − 0.1 = −0.08 s) and passes SEMI F47 (50 % from 50 ms to 0.2 s: margin v − 0.5, time margin
    0.2 − 0.1 = 0.1 s); both envelopes apply to the worst phase and are judged on the bus voltage."""
    from cosim.run import run

    result = run(ROOT / "scenarios" / "interconnection_study.toml", tmp_path,
                 overrides={"scenario.engine": "direct", "scenario.duration_s": 14,
                            "kpis.ride_through_verdict.envelopes": {"pcc": ["itic_lower", "semi_f47"]}})
    verdict = result.kpis[rtv.NAME]["pcc"]
    ts = pd.read_parquet(result.run_dir / "timeseries.parquet")
    v = float(ts["pcc.vm_min_pu"].min())
    itic = verdict["itic_lower"]["positive_sequence"]["disturbances"]["d1"]
    f47 = verdict["semi_f47"]["positive_sequence"]["disturbances"]["d1"]
    assert itic["t_start_s"] == pytest.approx(10.0) and itic["duration_s"] == pytest.approx(0.1) and 0.6 < v < 0.7
    assert itic["pass"] is False and itic["margin_pu"] == pytest.approx(v - 0.7) and itic["margin_time_s"] == pytest.approx(-0.08)
    assert f47["pass"] is True and f47["margin_pu"] == pytest.approx(v - 0.5) and f47["margin_time_s"] == pytest.approx(0.1)
    assert verdict["itic_lower"]["applies_to_judged_on"] == "positive_sequence"
    assert "worst_phase" not in verdict["itic_lower"]
