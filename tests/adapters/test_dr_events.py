"""DR events: schedule semantics and clear errors for malformed event files."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from cosim.sdk import ScenarioContext
from cosim.adapters.dr_events import DrEventsSim, EventFileError, EventSchedule, EventsParams, read_events

EXAMPLE = Path(__file__).resolve().parents[2] / "scenarios/data/dr_events/example_events.csv"
HEADER = "program,notice_utc,start_utc,end_utc,reduction_mw,cap_mw\n"


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def test_example_schedule():
    schedule = EventSchedule(read_events(EXAMPLE), "cbp")
    assert schedule.at(_utc("2024-07-15T19:59:00"))["dr_notice_s"] is None      # not yet announced
    before = schedule.at(_utc("2024-07-16T18:00:00"))
    assert before["dr_notice_s"] == 3600 and not before["event_active"]
    during = schedule.at(_utc("2024-07-16T20:00:00"))
    assert during == {"event_active": True, "dr_reduction_mw": 0.5, "dr_cap_mw": None,
                      "dr_notice_s": 0.0, "dr_remaining_s": 7200.0}
    after = schedule.at(_utc("2024-07-16T22:00:00"))   # end is exclusive
    assert not after["event_active"] and after["dr_reduction_mw"] == 0.0
    emergency = EventSchedule(read_events(EXAMPLE), "emergency").at(_utc("2024-07-19T21:00:00"))
    assert emergency["dr_cap_mw"] == 1.5 and emergency["dr_reduction_mw"] == 0.0


def test_overlapping_events_take_the_strictest(tmp_path):
    path = tmp_path / "ev.csv"
    path.write_text(HEADER + "a,2024-07-16T00:00Z,2024-07-16T10:00Z,2024-07-16T12:00Z,1.0,\n"
                             "a,2024-07-16T00:00Z,2024-07-16T11:00Z,2024-07-16T13:00Z,2.0,\n"
                             "a,2024-07-16T00:00Z,2024-07-16T11:00Z,2024-07-16T12:00Z,,3.0\n"
                             "a,2024-07-16T00:00Z,2024-07-16T11:00Z,2024-07-16T12:00Z,,2.5\n")
    out = EventSchedule(read_events(path)).at(_utc("2024-07-16T11:30:00"))
    assert out["dr_reduction_mw"] == 2.0 and out["dr_cap_mw"] == 2.5 and out["dr_remaining_s"] == 5400


@pytest.mark.parametrize("body, message", [
    ("program,start_utc,end_utc,reduction_mw,cap_mw\n", r"ev.csv: row 1 \(header\): missing column\(s\) notice_utc"),
    (HEADER + "a,2024-07-16T00:00Z,2024-07-16T10:00Z,2024-07-16T12:00Z,1.0,\n"
              "a,2024-07-16T00:00Z,tomorrow,2024-07-16T12:00Z,1.0,\n", "ev.csv: row 3, column start_utc: 'tomorrow'"),
    (HEADER + "a,2024-07-16T00:00Z,2024-07-16T10:00Z,2024-07-16T09:00Z,1.0,\n", "row 2, column end_utc: .* not after"),
    (HEADER + "a,2024-07-16T11:00Z,2024-07-16T10:00Z,2024-07-16T12:00Z,1.0,\n", "row 2, column notice_utc: .* after start"),
    (HEADER + "a,2024-07-16T00:00Z,2024-07-16T10:00Z,2024-07-16T12:00Z,lots,\n", "row 2, column reduction_mw: 'lots'"),
    (HEADER + "a,2024-07-16T00:00Z,2024-07-16T10:00Z,2024-07-16T12:00Z,-1,\n", "row 2, column reduction_mw: .*non-negative"),
    (HEADER + "a,2024-07-16T00:00Z,2024-07-16T10:00Z,2024-07-16T12:00Z,1.0,2.0\n", "row 2, column reduction_mw: give exactly one"),
    (HEADER + "a,2024-07-16T00:00Z,2024-07-16T10:00Z,2024-07-16T12:00Z,,\n", "row 2, column reduction_mw: give exactly one"),
    (HEADER + ",2024-07-16T00:00Z,2024-07-16T10:00Z,2024-07-16T12:00Z,1,\n", "row 2, column program: empty"),
    (HEADER + "a,2024-07-16T00:00Z,2024-07-16T10:00Z\n", "row 2: expected 6 fields, got 3"),
    (HEADER, "no events"),
])
def test_malformed_files_name_file_row_and_column(tmp_path, body, message):
    path = tmp_path / "ev.csv"
    path.write_text(body)
    with pytest.raises(EventFileError, match=message):
        read_events(path)


def test_unknown_program_and_validation_hook(tmp_path):
    with pytest.raises(EventFileError, match="programs in the file: cbp, emergency"):
        EventSchedule(read_events(EXAMPLE), "ripple", "example_events.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "a,x,2024-07-16T10:00Z,2024-07-16T12:00Z,1.0,\n")
    ctx = ScenarioContext(_utc("2024-07-15T00:00:00"), 86_400, 60, 0)
    problems = DrEventsSim.check_entity("Events", EventsParams(file=bad), ctx)
    assert len(problems) == 1 and "bad.csv: row 2, column notice_utc" in problems[0]
    assert DrEventsSim.check_entity("Events", EventsParams(file=EXAMPLE), ctx) == []


def test_event_edges_inside_a_step_are_refused(tmp_path):
    """Outputs are sampled at each step's start: an 18:15-18:45 event inside hourly steps would be
    missed entirely, so validation names both edges and a step that fits; 900 s steps accept it."""
    from cosim.scenario import ScenarioError, load_scenario

    (tmp_path / "ev.csv").write_text("program,notice_utc,start_utc,end_utc,reduction_mw,cap_mw\n"
                                     "cbp,2024-07-15T12:00:00Z,2024-07-15T18:15:00Z,2024-07-15T18:45:00Z,0.5,\n")
    scenario = tmp_path / "s.toml"
    text = ('[scenario]\nname = "dre"\nstart = 2024-07-15T00:00:00Z\nduration_s = 86400\nstep_s = 3600\n'
            '[sims]\ndr = { adapter = "dr_events" }\n'
            '[entities]\nev = { sim = "dr", model = "Events", file = "ev.csv", program = "cbp" }\n')
    scenario.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(scenario)
    found = [str(p) for p in info.value.problems]
    assert len(found) == 2 and "event start 2024-07-15 18:15:00 UTC falls inside a 3600 s step" in found[0]
    assert "step_s = 900" in found[0]
    scenario.write_text(text.replace('{ adapter = "dr_events" }', '{ adapter = "dr_events", step_s = 900 }'))
    load_scenario(scenario)
