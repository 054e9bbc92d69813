"""OpenADR 2.0b replay: a VTN log's events as DR signals, the VEN's opt-out policy, clear
errors naming file, line and value, and the month-long catalogue scenario's per-event KPIs."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

import cosim
from cosim.adapters.openadr_events import OpenAdrLogError, VenParams, VenSchedule, read_log

ROOT = Path(__file__).resolve().parents[2]
MONTH = ROOT / "scenarios/data/openadr/july_2024_vtn_log.jsonl"


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def _params(path: Path, **kw) -> VenParams:
    return VenParams(file=str(path), resource_ids=["campus"], **kw)


def _line(signal=("SIMPLE", "level"), payload=2, targets=None, **period) -> str:
    event = {"event_descriptor": {"event_id": "e1", "modification_number": 0, "event_status": "far"},
             "active_period": {"dtstart": "2024-07-02T19:00:00Z", "duration": "PT2H", **period},
             "event_signals": [{"signal_name": signal[0], "signal_type": signal[1],
                                "intervals": [{"duration": "PT2H", "signal_payload": payload, "uid": 0}]}],
             "targets": targets if targets is not None else [{"resource_id": "campus"}]}
    return json.dumps({"received_utc": "2024-07-01T12:00:00Z", "event": event})


def _schedule(tmp_path, text: str, **kw) -> VenSchedule:
    path = tmp_path / "log.jsonl"
    path.write_text(text + "\n")
    return VenSchedule(read_log(path, _params(path, **kw)))


def test_simple_level_with_ramp_up(tmp_path):
    schedule = _schedule(tmp_path, _line(ramp_up_period="PT20M"))
    assert schedule.at(_utc("2024-07-01T11:00"))["dr_notice_s"] is None  # not received yet
    assert schedule.at(_utc("2024-07-02T18:00"))["dr_notice_s"] == 40 * 60  # to the ramp's start
    half = schedule.at(_utc("2024-07-02T18:50"))
    assert half["event_active"] and half["dr_reduction_mw"] == pytest.approx(0.25 / 2)
    full = schedule.at(_utc("2024-07-02T20:00"))
    assert full["dr_reduction_mw"] == 0.25 and full["dr_remaining_s"] == 3600 and full["dr_cap_mw"] is None
    assert not schedule.at(_utc("2024-07-02T21:00"))["event_active"]  # end exclusive


def test_load_dispatch_setpoint_is_a_cap_and_delta_a_reduction(tmp_path):
    cap = _schedule(tmp_path, _line(("LOAD_DISPATCH", "setpoint"), 1.6)).at(_utc("2024-07-02T19:30"))
    assert cap["dr_cap_mw"] == 1.6 and cap["dr_reduction_mw"] == 0.0
    delta = _schedule(tmp_path, _line(("LOAD_DISPATCH", "delta"), 0.3)).at(_utc("2024-07-02T19:30"))
    assert delta["dr_reduction_mw"] == 0.3


def test_policy_refuses_a_shed_above_the_max(tmp_path):
    schedule = _schedule(tmp_path, _line(("LOAD_DISPATCH", "delta"), 0.9), max_shed_mw=0.6)
    during = schedule.at(_utc("2024-07-02T19:30"))
    assert not during["event_active"] and during["dr_reduction_mw"] == 0.0 and during["n_events_refused"] == 1
    accepted = _schedule(tmp_path, _line(("LOAD_DISPATCH", "delta"), 0.9), max_shed_mw=1.0)
    assert accepted.at(_utc("2024-07-02T19:30"))["dr_reduction_mw"] == 0.9
    low = _schedule(tmp_path, _line(("LOAD_DISPATCH", "setpoint"), 0.5), min_cap_mw=1.0)
    assert low.at(_utc("2024-07-02T19:30"))["dr_cap_mw"] is None


def test_month_log_modification_and_cancellation():
    schedule = VenSchedule(read_log(MONTH, _params(MONTH, max_shed_mw=0.6)))
    assert schedule.at(_utc("2024-07-16T08:00"))["dr_notice_s"] is not None
    assert schedule.at(_utc("2024-07-16T20:00"))["dr_reduction_mw"] == 0.25  # modified from 0.4 that morning
    assert schedule.at(_utc("2024-07-17T08:00"))["dr_notice_s"] > 0  # announced, not yet cancelled ...
    assert not schedule.at(_utc("2024-07-17T20:00"))["event_active"]  # ... then cancelled
    assert schedule.at(_utc("2024-07-18T20:00"))["n_events_refused"] == 1  # 1.2 MW > max_shed_mw


@pytest.mark.parametrize("text, message", [
    ("{not json", r"log.jsonl: line 1: not JSON"),
    (_line(("ELECTRICITY_PRICE", "price"), 0.5),
     r"log.jsonl: line 1: event_signals: signal ELECTRICITY_PRICE/price is not handled .* send one of SIMPLE/level"),
    (_line(("LOAD_CONTROL", "x-loadControlCapacity"), 0.5),
     r"line 1: signal_payload: an x-loadControlCapacity needs the site's maximum draw; set the entity's capacity_mw"),
    (_line(("LOAD_CONTROL", "x-loadControlLevelOffset"), -1),
     r"line 1: signal_payload: an x-loadControlLevelOffset needs the MW of one level; set the entity's level_offset_mw"),
    (_line(payload=7), r"line 1: signal_payload = 7: a SIMPLE level is 0, 1, 2 or 3"),
    (_line(("LOAD_DISPATCH", "delta"), "lots"), r"line 1: signal_payload = 'lots': must be a finite"),
    (_line(targets=[{"resource_id": "hall_b"}]), r"line 1: targets: resource_id 'hall_b' is not this VEN's \(known: campus\); add it"),
    (_line(duration="soon"), r"line 1: active_period.duration = 'soon': not a duration"),
    (json.dumps({"event": {}}), r"line 1: received_utc: missing"),
    ("", r"log.jsonl: no events"),
])
def test_bad_payloads_name_file_line_value_and_fix(tmp_path, text, message):
    with pytest.raises(OpenAdrLogError, match=message):
        _schedule(tmp_path, text)


def test_cli_refuses_a_bad_log_without_traceback(tmp_path):
    import subprocess
    import sys

    log = tmp_path / "log.jsonl"
    log.write_text(_line(payload=9) + "\n")
    scenario = tmp_path / "s.toml"
    scenario.write_text((ROOT / "scenarios/openadr_month.toml").read_text()
                        .replace('"data/openadr/july_2024_vtn_log.jsonl"', f'"{log}"'))
    done = subprocess.run([sys.executable, "-m", "cosim", "validate", str(scenario)], capture_output=True, text=True)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "log.jsonl: line 1: signal_payload = 9" in done.stdout + done.stderr


def test_month_scenario_settles_each_accepted_event(tmp_path):
    """A week of the catalogue scenario: events on 2, 3 (accepted) and the 10th's cap outside it."""
    result = cosim.run(ROOT / "scenarios/openadr_month.toml", out_dir=tmp_path,
                       overrides={"scenario.engine": "direct", "scenario.duration_s": 4 * 86_400})
    assert result.ok, result.reason
    events = result.kpis["dr"]["responder"]["events"]
    assert [e["start_utc"][:10] for e in events] == ["2024-07-02", "2024-07-03"]
    first, second = events
    assert first["energy_requested_mwh"] == pytest.approx(0.1 * 3 + 0.1 * 10 / 15 * 10 / 60 / 2, rel=0.05)
    assert second["energy_requested_mwh"] > first["energy_requested_mwh"]
    for event in events:
        assert event["baseline_mw"] > 1.0
        assert event["energy_reduction_mwh"] > 0.8 * event["energy_requested_mwh"]  # the site sheds
        assert event["shortfall_mwh"] >= 0


@pytest.mark.parametrize("seconds", [0, 60, 900, 5400, 86_400 + 3_661, 2.5])
def test_durations_read_what_openleadr_and_the_log_write(seconds):
    from datetime import timedelta

    from openleadr.utils import timedeltaformat

    from cosim.adapters.openadr_events import iso_duration, iso_duration_s

    delta = timedelta(seconds=seconds)
    assert iso_duration_s(timedeltaformat(delta)) == int(seconds)  # openleadr's own text (whole seconds; zero is "P")
    assert iso_duration_s(iso_duration(delta)) == seconds
    assert iso_duration_s("P0Y0M0DT3H0M0S") == 10_800
    assert all(iso_duration_s(bad) != iso_duration_s(bad) for bad in ("P1M", "PT", "-PT5M", "1 hour", "PT1H2"))  # NaN


def test_a_logged_event_replays_as_received(tmp_path):
    """log_line writes the dict openleadr gives on_event (datetimes, timedeltas) as a log line."""
    from datetime import timedelta

    from cosim.adapters.openadr_events import log_line

    start = _utc("2024-07-02T19:00")
    event = {"event_descriptor": {"event_id": "e9", "modification_number": 0, "event_status": "far",
                                  "created_date_time": _utc("2024-07-01T11:00")},
             "active_period": {"dtstart": start, "duration": timedelta(hours=2), "ramp_up_period": timedelta(minutes=10)},
             "event_signals": [{"signal_name": "LOAD_DISPATCH", "signal_type": "delta",
                                "intervals": [{"dtstart": start, "duration": timedelta(hours=2), "signal_payload": 0.4}]}],
             "targets": [{"resource_id": "campus"}]}
    path = tmp_path / "log.jsonl"
    path.write_text(log_line(event, _utc("2024-07-01T12:00")) + "\n")
    schedule = VenSchedule(read_log(path, _params(path)))
    assert schedule.at(_utc("2024-07-02T18:55"))["dr_reduction_mw"] == pytest.approx(0.2)
    assert schedule.at(_utc("2024-07-02T20:00"))["dr_reduction_mw"] == 0.4
    assert schedule.at(_utc("2024-07-01T11:59"))["dr_notice_s"] is None


def test_event_edges_off_the_step_grid_are_named(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(_line(ramp_up_period="PT20M") + "\n")  # active from 18:40
    scenario = tmp_path / "s.toml"
    scenario.write_text((ROOT / "scenarios/openadr_month.toml").read_text()
                        .replace('"data/openadr/july_2024_vtn_log.jsonl"', f'"{log}"')
                        .replace("step_s = 300", "step_s = 1800"))
    with pytest.raises(cosim.ScenarioError, match=r"log.jsonl: OpenADR e1 event start 2024-07-02 18:40:00 UTC falls inside a 1800"):
        cosim.load_scenario(scenario)
