"""The model-quality test battery (cosim/studies/battery.py): criteria on synthetic series, the cases
it builds per engine, bad input, and `cosim battery` end to end on the shipped interconnection study."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cosim.cli import main
from cosim.errors import ScenarioError
from cosim.studies import battery, bundle
from cosim.studies.battery import (ENGINES, REPEATED_N, REPEATED_SPAN_S, SUPPORT, TESTS, Case, build_cases, corners,
                                   find_site, judge_case)
from cosim.studies.battery_criteria import Tolerances, drift_verdict, poc_channels

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "scenarios" / "interconnection_study.toml"
TOL = Tolerances()


def channels(p_mw, n_trips=None, v_pu=None, f_hz=None, dt_s=0.1) -> pd.DataFrame:
    p = np.asarray(p_mw, dtype=float)
    n = len(p)
    return pd.DataFrame({"t_s": np.arange(n) * dt_s, "p_mw": p, "q_mvar": 0.2 * p,
                         "v_pu": np.ones(n) if v_pu is None else np.asarray(v_pu, float),
                         "f_hz": np.full(n, 60.0) if f_hz is None else np.asarray(f_hz, float),
                         "n_trips": np.zeros(n) if n_trips is None else np.asarray(n_trips, float)})


# -- criteria: a synthetic pass and a synthetic fail for every test --------------------------
def _disturbed(recovered: bool, tripped: bool) -> pd.DataFrame:
    """100 MW, a cease to 0 at 2 s for 0.5 s, back to 100 (or to 50) MW; a transfer at 2 s or none."""
    t = np.arange(0, 30, 0.1)
    p = np.where((t >= 2.0) & (t < 2.5), 0.0, 100.0)
    if not recovered:
        p = np.where(t >= 2.5, 50.0, p)
    trips = np.where(t >= 2.0, 1.0, 0.0) if tripped else np.zeros_like(t)
    return channels(p, trips, v_pu=np.where((t >= 2.0) & (t < 2.5), 0.5, 1.0))


@pytest.mark.parametrize("test", sorted(TESTS))
def test_every_criterion_passes_a_ride_through_and_fails_a_trip(test):
    """Each test's criterion on synthetic series: a campus that holds (flat) or ceases and recovers passes;
    one that transfers to backup (or, flat start, drifts 5 %) fails."""
    case = Case(test, "synthetic", "imposed", {}, t_event_s=2.0, t_clear_s=2.5)
    if test == "flat_start":
        good, bad = channels(np.full(200, 100.0)), channels(np.linspace(100.0, 105.0, 200))
    else:
        good, bad = _disturbed(recovered=True, tripped=False), _disturbed(recovered=True, tripped=True)
    assert judge_case(case, good, TOL)[0] is True
    assert judge_case(case, bad, TOL)[0] is False


@pytest.mark.parametrize("test", ["voltage_step", "lvrt", "hvrt", "frequency_step", "repeated_faults"])
def test_recovery_criteria_fail_a_load_that_does_not_come_back(test):
    """Ceasing without a transfer still fails when P stays at half of its pre-disturbance value
    (below the 90 % recovery threshold within 5 s)."""
    case = Case(test, "synthetic", "imposed", {}, t_event_s=2.0, t_clear_s=2.5)
    passed, measured = judge_case(case, _disturbed(recovered=False, tripped=False), TOL)
    assert passed is False and "needs 90" in measured


@pytest.mark.parametrize("channel, limit", [("p_mw", 0.01), ("q_mvar", 0.01), ("v_pu", 0.005), ("f_hz", 0.01)])
def test_flat_start_drift_of_each_channel_just_inside_and_just_outside(channel, limit):
    """Drift is max - min after the first step; P and Q relative to the initial |S| (100 MW, 20 Mvar)."""
    base = channels(np.full(50, 100.0))
    scale = math.hypot(100.0, 20.0) if channel in ("p_mw", "q_mvar") else 1.0
    for factor, expected in ((0.9, True), (1.1, False)):
        ch = base.copy()
        ch.loc[25:, channel] = ch.loc[25:, channel] + factor * limit * scale
        assert drift_verdict(ch, TOL)[0] is expected, (channel, factor)


def test_flat_start_without_a_recorded_frequency_judges_the_rest():
    """A stiff source (OpenDSS) records no frequency: f is not judged, P, Q and V are."""
    flat = channels(np.full(50, 100.0), f_hz=np.full(50, np.nan))
    passed, text = drift_verdict(flat, TOL)
    assert passed and "f_hz not recorded" in text
    flat.loc[25:, "v_pu"] = 1.01
    assert drift_verdict(flat, TOL)[0] is False


def test_poc_channels_apply_the_imposed_factor_and_frequency():
    index = pd.date_range("2024-01-01", periods=3, freq="100ms")
    ts = pd.DataFrame({"pcc.p_mw": [1.0, 2.0, 3.0], "pcc.q_mvar": [0.0] * 3, "pcc.vm_pu": [1.04] * 3,
                       "pcc.f_hz": [60.0] * 3, "battery_poc_events.vm_sag_pu": [1.0, 0.5, 1.0],
                       "battery_poc_events.f_hz": [60.0, 60.25, 60.5], "ups.n_trips": [0, 0, 1]}, index=index)
    ch = poc_channels(ts, "pcc", "ups")
    assert ch["v_pu"].tolist() == pytest.approx([1.04, 0.52, 1.04])
    assert ch["f_hz"].tolist() == [60.0, 60.25, 60.5]
    assert ch["t_s"].tolist() == pytest.approx([0.0, 0.1, 0.2])


# -- the cases per engine ----------------------------------------------------------------
def test_support_table_names_every_test_on_every_engine():
    """Every test is native, imposed or not applicable with its reason on each engine; never silent."""
    assert set(SUPPORT) == set(TESTS)
    for test, by in SUPPORT.items():
        assert set(by) == set(ENGINES), test
        for how in by.values():
            assert how in ("native", "imposed") or (how.startswith("not applicable: ") and len(how) > 30)


def test_envelope_corners_follow_the_shipped_files():
    """ITIC's lower boundary (ITI, CBEMA Curve Application Note, 2000): 70 % for 0.5 s, 80 % for 10 s; its
    0 V for 20 ms cannot be held at 0.1 s steps and is named. SEMI F47-0706: 50 % for 0.2 s, 70 % for 0.5 s."""
    site = find_site(STUDY)
    found, skipped = corners(["itic_lower", "semi_f47"], "above", site)
    assert [(lvl, dur) for _, lvl, dur in found] == [(0.7, 0.5), (0.8, 10.0), (0.5, 0.2), (0.7, 0.5)]
    assert any("0.02 s" in s and "shorter than one step" in s for s in skipped)
    upper, _ = corners(["itic_upper"], "below", site)
    assert [(lvl, dur) for _, lvl, dur in upper] == [(1.2, 0.5)]


def test_andes_cases_native_and_imposed():
    """On the ANDES study: six bus faults in 82 s at the point of connection's bus (NERC, Incident Review:
    Considering Simultaneous Voltage-Sensitive Load Reductions, 2025), the largest machine tripped, steps
    imposed through a PocEvents entity feeding the ride-through entity; shared corners run once."""
    site = find_site(STUDY)
    assert (site.poc, site.engine, site.ride_through) == ("pcc", "andes", "ups")
    cases, how = build_cases(site, list(TESTS), flat_start_s=20.0)
    assert how["phase_jump"].startswith("not applicable")
    faults = next(c for c in cases if c.test == "repeated_faults").overrides["sims.tgrid.faults"]
    assert len(faults) == REPEATED_N and faults[0][0] == battery.PRE_S
    assert faults[-1][0] - faults[0][0] == pytest.approx(REPEATED_SPAN_S)
    assert all(f[2] == 16 for f in faults)
    trip = next(c for c in cases if c.test == "loss_of_largest_unit").overrides["sims.tgrid.gen_trips"]
    assert trip == [[battery.PRE_S, "GENROU_9"]]  # 1684.1 MVA, the ieee39 case's largest Sn
    step = next(c for c in cases if c.test == "voltage_step")
    assert step.overrides["entities.battery_poc_events"]["voltage"] == [[battery.PRE_S, battery.STEP_HOLD_S, 1.05]]
    keys = [json.dumps(c.overrides, sort_keys=True) for c in cases if c.overrides]
    assert len(keys) == len(set(keys))


def test_opendss_cases_fault_the_point_of_connection_bus():
    """On the OpenDSS feeder (a stiff source): repeated faults are three-phase Fault elements at the campus's
    bus 675, the loss of a unit is not applicable, the scenario's own SLG fault is removed."""
    site = find_site(ROOT / "scenarios" / "ieee13_fault_ride_through.toml")
    assert (site.engine, site.poc, site.ride_through) == ("opendss", "pcc", "ups")
    cases, how = build_cases(site, list(TESTS))
    assert how["loss_of_largest_unit"].startswith("not applicable") and "stiff" in how["loss_of_largest_unit"]
    faults = next(c for c in cases if c.test == "repeated_faults").overrides["sims.grid.faults"]
    assert len(faults) == REPEATED_N and {(f["bus"], f["kind"]) for f in faults} == {("675", "3ph")}
    flat = next(c for c in cases if c.test == "flat_start")
    assert flat.overrides["sims.grid.faults"] == []


def test_imposed_tests_need_a_ride_through_entity(tmp_path):
    text = STUDY.read_text().replace('src = "ups"\ndst = "pcc"', 'src = "campus"\ndst = "pcc"')
    path = tmp_path / "bare.toml"
    path.write_text(text)
    site = find_site(path)
    assert site.ride_through is None
    _, how = build_cases(site, ["voltage_step", "repeated_faults"])
    assert how["voltage_step"].startswith("not applicable") and "ride-through" in how["voltage_step"]
    assert how["repeated_faults"] == "native"


# -- bad input -----------------------------------------------------------------------------
@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace("step_s = 0.1\ntick_s = 0.1", "step_s = 1\ntick_s = 1"), "sub-second steps"),
    (lambda t: t.replace('src = "ups"\ndst = "pcc"', 'src = "ups"\ndst = "campus"'), "point of connection"),
])
def test_battery_refuses_a_scenario_it_cannot_test(tmp_path, capsys, edit, words):
    path = tmp_path / "bad.toml"
    path.write_text(edit(STUDY.read_text()))
    assert main(["battery", str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert words in err and "bad.toml" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_set_applies_before_the_checks(tmp_path, capsys):
    """``--set`` overrides reach the site: 1 s steps given on the command line are refused like those in the file."""
    code = main(["battery", str(STUDY), "--set", "scenario.step_s=1", "--set", "scenario.tick_s=1",
                 "--out", str(tmp_path / "out")])
    assert code == 1 and "sub-second steps" in capsys.readouterr().err
    site = find_site(STUDY, overrides={"scenario.step_s": 0.05})
    assert site.step_s == 0.05


def test_unknown_test_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["battery", str(STUDY), "--only", "flat_starts"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err
    with pytest.raises(ScenarioError, match="unknown test"):
        battery.run_battery(STUDY, "/nonexistent", only=["flat_starts"])


# -- end to end (ANDES, a few seconds of simulated time) ---------------------------------------
@pytest.fixture(scope="module")
def short_battery(tmp_path_factory):
    """`cosim battery --only flat_start hvrt` on the shipped study, spans shortened: 2 s flat start, and
    the HVRT corner (ITIC upper boundary 1.2 pu for 0.5 s) with 1 s before and 3 s after."""
    out = tmp_path_factory.mktemp("battery") / "b"
    patch = pytest.MonkeyPatch()
    patch.setattr(battery, "PRE_S", 1.0)
    patch.setattr(battery, "POST_S", 3.0)
    try:
        code = main(["battery", str(STUDY), "--only", "flat_start", "hvrt", "--flat-start-s", "2", "--out", str(out),
                     "--quiet"])
    finally:
        patch.undo()
    assert code == 0
    return out


def test_battery_end_to_end(short_battery):
    record = json.loads((short_battery / "battery.json").read_text())
    by_test = {c["test"]: c for c in record["cases"] if c["verdict"] != "not applicable"}
    assert set(by_test) == {"flat_start", "hvrt"}
    assert all(c["verdict"] in ("pass", "fail") and c["criterion"] for c in by_test.values())
    hvrt = by_test["hvrt"]
    assert hvrt["how"] == "imposed" and hvrt["verdict"] == "pass"  # PERC1 ceases above 1.2 pu and comes back
    na = [c for c in record["cases"] if c["verdict"] == "not applicable"]
    assert any("1.4 pu for 0.003 s" in c["case"] for c in na)
    table = pd.read_csv(short_battery / "verdicts.csv")
    assert len(table) == len(record["cases"])
    for name in ("plots/flat_start.png", "plots/hvrt.png", "battery.html"):
        assert (short_battery / name).stat().st_size > 1000
    page = (short_battery / "battery.html").read_text()
    assert "not applicable" in page and "plots/hvrt.png" in page and "ERCOT" in page


@pytest.fixture(scope="module")
def battery_copy(short_battery, tmp_path_factory):
    """A copy the bundle tests may change."""
    dest = tmp_path_factory.mktemp("copy") / "b"
    shutil.copytree(short_battery, dest)
    return dest


# -- the bundle ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def packed(battery_copy, tmp_path_factory):
    path = tmp_path_factory.mktemp("zip") / "battery.zip"
    assert main(["bundle", str(battery_copy), "--out", str(path)]) == 0
    return path


def test_bundle_holds_what_a_planner_needs(packed):
    import zipfile

    names = set(zipfile.ZipFile(packed).namelist())
    manifest = json.loads(zipfile.ZipFile(packed).read("manifest.json"))
    for name in ("README.md", "versions.txt", "verdicts.csv", "battery.html", "plots/hvrt.png",
                 "inputs/interconnection_study.toml", "model/perc1_parameters.csv", "model/perc1_dyr.txt"):
        assert name in names, name
    assert set(manifest["files"]) == names - {"manifest.json"}
    assert manifest["allow_failed"] is False and len(manifest["runs"]) == 2
    run = manifest["runs"][0]
    poc = pd.read_csv(io.BytesIO(zipfile.ZipFile(packed).read(f"runs/{run['name']}/poc.csv")))
    assert list(poc.columns) == ["t_s", "p_mw", "q_mvar", "v_pu", "f_hz", "n_trips"]
    assert np.diff(poc["t_s"]).round(9).tolist() == [0.1] * (len(poc) - 1)  # the solver's step
    table = pd.read_csv(io.BytesIO(zipfile.ZipFile(packed).read("model/perc1_parameters.csv")))
    values, given = dict(zip(table["key"], table["value"])), dict(zip(table["key"], table["given"]))
    assert float(values["perc1.frecon_frac"]) == 0.9 and given["perc1.frecon_frac"]
    assert float(values["perc1.vt2_pu"]) == 1.2 and not given["perc1.vt2_pu"]  # the default, filled in
    record = zipfile.ZipFile(packed).read("model/perc1_dyr.txt").decode().strip()  # model-record's writer
    assert record.startswith("16 'PERC1' 'ups' ") and record.endswith(" /"), record
    assert "git commit" in zipfile.ZipFile(packed).read("versions.txt").decode()


def test_bundle_writes_the_dyr_record_through_its_hook(battery_copy, tmp_path, monkeypatch):
    import zipfile

    seen = []

    def record(bus, device_id, perc1):
        seen.append(perc1)
        return f"{bus} 'PERC1' '{device_id}' {perc1['vt1_pu']:g} /"

    monkeypatch.setattr(bundle, "DYR_RECORD", record)
    path = bundle.make_bundle(battery_copy, tmp_path / "dyr.zip")
    assert zipfile.ZipFile(path).read("model/perc1_dyr.txt").decode() == "16 'PERC1' 'ups' 0.7 /\n"
    assert len(seen[0]) > 10  # every perc1 key, the defaults filled in


def test_bundle_verify_re_runs_to_identical_hashes(packed, capsys):
    assert main(["bundle", "--verify", str(packed)]) == 0
    out = capsys.readouterr().out
    assert out.count(": identical (") == 2 and "DIFFERS" not in out


def test_result_hash_is_of_values_not_files():
    index = pd.date_range("2024-01-01", periods=3, freq="100ms")
    a = pd.DataFrame({"x.p_mw": [1.0, 2.0, 3.0], "y.vm_pu": [1.0, 1.0, 0.9]}, index=index)
    assert bundle.result_hash(a) == bundle.result_hash(a[["y.vm_pu", "x.p_mw"]])
    b = a.copy()
    b.iloc[1, 0] = 2.0 + 1e-12
    assert bundle.result_hash(a) != bundle.result_hash(b)


@pytest.mark.parametrize("member", ["verdicts.csv", "inputs/interconnection_study.toml"])
def test_tampered_bundle_names_the_file(packed, tmp_path, capsys, member):
    import zipfile

    bad = tmp_path / "tampered.zip"
    with zipfile.ZipFile(packed) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            dst.writestr(item, data + b"\n# edited\n" if item.filename == member else data)
    assert main(["bundle", "--verify", str(bad)]) == 1
    err = capsys.readouterr().err
    assert member in err and "SHA-256 differs" in err and "Traceback" not in err


@pytest.mark.parametrize("status", ["failed", "degraded"])
def test_bundle_refuses_a_run_not_ok_unless_allowed(short_battery, tmp_path, capsys, status):
    runs = tmp_path / "runs"
    record = json.loads((short_battery / "battery.json").read_text())
    source = short_battery / record["cases"][0]["run_dir"]
    shutil.copytree(source, runs / "one")
    meta = json.loads((runs / "one" / "metadata.json").read_text())
    meta["status"] = status
    (runs / "one" / "metadata.json").write_text(json.dumps(meta))
    assert main(["bundle", str(runs), "--out", str(tmp_path / "x.zip")]) == 1
    err = capsys.readouterr().err
    assert f"one ({status})" in err and "--allow-failed" in err and not (tmp_path / "x.zip").exists()
    assert main(["bundle", str(runs), "--out", str(tmp_path / "x.zip"), "--allow-failed"]) == 0
    import zipfile

    with zipfile.ZipFile(tmp_path / "x.zip") as zf:
        manifest = json.loads(zf.read("manifest.json"))
        readme = zf.read("README.md").decode()
    assert manifest["allow_failed"] is True and manifest["failed_runs"] == {"one": status}
    assert "WARNING" in readme and f"one ({status})" in readme


def test_bundle_of_a_folder_without_runs_is_one_message(tmp_path, capsys):
    assert main(["bundle", str(tmp_path)]) == 1
    assert "battery folder" in capsys.readouterr().err


def test_battery_end_to_end_on_an_opendss_feeder(tmp_path, monkeypatch):
    """The OpenDSS feeder of ieee13_fault_ride_through (stiff source): a flat start and the repeated faults as
    native three-phase faults at bus 675 (six in 2 s here, to keep it short); the bolted faults pull the campus's
    bus near 0 pu, the PERC1 campus ceases and comes back (Frecon 1.0, no dip counter): it passes."""
    monkeypatch.setattr(battery, "PRE_S", 1.0)
    monkeypatch.setattr(battery, "POST_S", 3.0)
    monkeypatch.setattr(battery, "REPEATED_SPAN_S", 2.0)
    record = battery.run_battery(ROOT / "scenarios" / "ieee13_fault_ride_through.toml", tmp_path / "b",
                                 only=["flat_start", "repeated_faults", "loss_of_largest_unit"], flat_start_s=2.0)
    by_test = {c["test"]: c for c in record["cases"]}
    assert record["engine"] == "opendss"
    assert by_test["loss_of_largest_unit"]["verdict"] == "not applicable"
    faults = by_test["repeated_faults"]
    assert faults["how"] == "native" and faults["status"] == "ok" and faults["verdict"] == "pass", faults["measured"]
    assert "V min 0.0" in faults["measured"]  # a bolted three-phase fault at the campus's own bus
    assert "f_hz not recorded" in by_test["flat_start"]["measured"]
    assert (tmp_path / "b" / "plots" / "repeated_faults.png").is_file()
