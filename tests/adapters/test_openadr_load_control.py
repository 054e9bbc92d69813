"""OpenADR 2.0b LOAD_CONTROL signals in the VEN: each of the four signal types of the 2.0b schema
(``oadr_ei_20b.xsd``: capacity, level offset, percent offset, setpoint) becomes the DR signal the
module docstring of ``adapters/openadr_events.py`` states, bad payloads are named, a request to
draw more than normal is opted out of, and a percent offset sheds that share of the responder's
baseline in a run."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest

import cosim
from cosim.adapters.openadr_events import OpenAdrLogError, VenParams, VenSchedule, read_log

ROOT = Path(__file__).resolve().parents[2]
DURING = datetime(2024, 7, 2, 19, 30, tzinfo=timezone.utc)


def _line(kind: str, payload, ramp: str | None = None) -> str:
    period = {"dtstart": "2024-07-02T19:00:00Z", "duration": "PT2H"}
    if ramp:
        period["ramp_up_period"] = ramp
    event = {"event_descriptor": {"event_id": "lc1", "modification_number": 0, "event_status": "far"},
             "active_period": period,
             "event_signals": [{"signal_name": "LOAD_CONTROL", "signal_type": kind,
                                "intervals": [{"duration": "PT2H", "signal_payload": payload, "uid": 0}]}],
             "targets": [{"resource_id": "campus"}]}
    return json.dumps({"received_utc": "2024-07-01T12:00:00Z", "event": event})


def _at(tmp_path, kind, payload, when=DURING, ramp=None, **params) -> dict:
    path = tmp_path / "log.jsonl"
    path.write_text(_line(kind, payload, ramp) + "\n")
    return VenSchedule(read_log(path, VenParams(file=str(path), resource_ids=["campus"], **params))).at(when)


def test_capacity_is_a_cap_at_that_share_of_the_site_maximum(tmp_path):
    out = _at(tmp_path, "x-loadControlCapacity", 0.6, capacity_mw=2.5)
    assert out["event_active"] and out["dr_cap_mw"] == pytest.approx(1.5)
    assert out["dr_reduction_mw"] == 0.0 and out["dr_reduction_frac"] == 0.0
    assert _at(tmp_path, "x-loadControlCapacity", 0.0, capacity_mw=2.5)["dr_cap_mw"] == 0.0  # 0 = off


def test_level_offset_sheds_level_offset_mw_per_level(tmp_path):
    out = _at(tmp_path, "x-loadControlLevelOffset", -2, level_offset_mw=0.15)
    assert out["dr_reduction_mw"] == pytest.approx(0.3) and out["dr_cap_mw"] is None
    assert _at(tmp_path, "x-loadControlLevelOffset", 0, level_offset_mw=0.15)["dr_reduction_mw"] == 0.0


def test_percent_offset_is_a_fraction_of_the_baseline_and_ramps(tmp_path):
    out = _at(tmp_path, "x-loadControlPercentOffset", -20)
    assert out["dr_reduction_frac"] == pytest.approx(0.2) and out["dr_reduction_mw"] == 0.0
    half = _at(tmp_path, "x-loadControlPercentOffset", -20, ramp="PT20M",
               when=datetime(2024, 7, 2, 18, 50, tzinfo=timezone.utc))
    assert half["event_active"] and half["dr_reduction_frac"] == pytest.approx(0.1)


def test_setpoint_is_the_site_draw_cap(tmp_path):
    out = _at(tmp_path, "x-loadControlSetpoint", 1.25)
    assert out["dr_cap_mw"] == 1.25 and out["dr_reduction_mw"] == 0.0


@pytest.mark.parametrize("kind, payload", [("x-loadControlLevelOffset", 1), ("x-loadControlPercentOffset", 10)])
def test_a_request_to_draw_more_is_opted_out(tmp_path, kind, payload):
    out = _at(tmp_path, kind, payload, level_offset_mw=0.1)
    assert not out["event_active"] and out["n_events_refused"] == 1


def test_max_shed_policy_applies_to_level_offsets(tmp_path):
    out = _at(tmp_path, "x-loadControlLevelOffset", -3, level_offset_mw=0.25, max_shed_mw=0.6)
    assert not out["event_active"] and out["n_events_refused"] == 1


@pytest.mark.parametrize("kind, payload, message", [
    ("x-loadControlCapacity", 1.5, r"signal_payload = 1.5: an x-loadControlCapacity is a fraction 0..1"),
    ("x-loadControlLevelOffset", -1.5, r"signal_payload = -1.5: an x-loadControlLevelOffset is a whole number"),
    ("x-loadControlPercentOffset", -150, r"signal_payload = -150: an x-loadControlPercentOffset is a percentage"),
    ("x-loadControlPercentOffset", "a lot", r"signal_payload = 'a lot': an x-loadControlPercentOffset"),
    ("x-loadControlCapacity", True, r"signal_payload = True: an x-loadControlCapacity is a fraction"),
    ("x-loadControlLevelOffset", None, r"signal_payload = None: an x-loadControlLevelOffset is a whole number"),
    ("x-loadControlSetpoint", -1, r"signal_payload = -1: must be a finite, non-negative MW value"),
])
def test_bad_load_control_payloads_are_named(tmp_path, kind, payload, message):
    with pytest.raises(OpenAdrLogError, match=message):
        _at(tmp_path, kind, payload, capacity_mw=2.0, level_offset_mw=0.1)


def test_percent_offset_sheds_the_baseline_share_in_a_run(tmp_path):
    """scenarios/openadr_month.toml cut to one event day: a -20 % offset asks 20 % of the
    responder's baseline, and the site meter sheds."""
    log = tmp_path / "lc.jsonl"
    log.write_text(_line("x-loadControlPercentOffset", -20, ramp="PT15M") + "\n")
    scenario = tmp_path / "lc.toml"
    text = (ROOT / "scenarios/openadr_month.toml").read_text()
    scenario.write_text(text.replace('"data/openadr/july_2024_vtn_log.jsonl"', f'"{log}"')
                        .replace("start = 2024-07-01T00:00:00Z", "start = 2024-07-02T15:00:00Z")
                        .replace("duration_s = 2_678_400", "duration_s = 28_800")
                        .replace('file = "data/', f'file = "{ROOT / "scenarios"}/data/'))
    result = cosim.run(scenario, out_dir=tmp_path, overrides={"scenario.engine": "direct"})
    assert result.ok, result.reason
    ts = pd.read_parquet(result.run_dir / "timeseries.parquet").set_index("time_utc")
    during = ts[(ts.index >= "2024-07-02T19:10Z") & (ts.index < "2024-07-02T21:00Z")]
    baseline = during["responder.p_baseline_mw"].iloc[0]
    assert during["responder.dr_requested_mw"].to_numpy() == pytest.approx(0.2 * baseline)
    assert during["responder.dr_delivered_mw"].mean() > 0.5 * 0.2 * baseline


def test_a_percent_offset_that_cannot_reach_the_responder_is_warned(tmp_path):
    """openadr_month connects ``dr_reduction_frac``: no warning; the same file without it gets one
    warning that names the entity, the receiver and the fix."""
    src = (ROOT / "scenarios" / "openadr_month.toml").read_text()
    assert not [w for w in cosim.validate(ROOT / "scenarios" / "openadr_month.toml").warnings
                if "dr_reduction_frac" in w]
    cut = src.replace('"dr_reduction_mw", "dr_reduction_frac", "dr_cap_mw"', '"dr_reduction_mw", "dr_cap_mw"')
    assert cut != src
    log = ROOT / "scenarios" / "data" / "openadr" / "july_2024_vtn_log.jsonl"
    cut = cut.replace('file = "data/openadr/july_2024_vtn_log.jsonl"', f'file = "{log.as_posix()}"')
    path = tmp_path / "no_frac.toml"
    path.write_text(cut)
    warned = [w for w in cosim.validate(path).warnings if "dr_reduction_frac" in w]
    assert len(warned) == 1 and "'events'" in warned[0] and "'responder'" in warned[0]
    assert "percent-offset" in warned[0]


def test_an_events_entity_without_a_file_is_warned_outside_a_live_vtn():
    """examples/openadr_live_ven.toml has no file (its events come from a VTN under cosim serve --vtn):
    validation says that a batch run of it sends no DR signal, naming the entity and the fix."""
    warned = [w for w in cosim.validate(ROOT / "examples" / "openadr_live_ven.toml").warnings if "no file" in w]
    assert len(warned) == 1 and warned[0].startswith("entities.events: ") and "cosim serve --vtn" in warned[0]
    assert 'give file = "<VTN log>.jsonl"' in warned[0]
    assert not [w for w in cosim.validate(ROOT / "scenarios" / "openadr_month.toml").warnings if "no file" in w]
