"""Imposed point-of-connection disturbances (adapters/poc_events.py): factors, levels and frequency ramps."""

from __future__ import annotations

import pytest

from cosim.adapters.poc_events import PocEvents, PocEventsParams, PocEventsSim


def events(**params) -> PocEvents:
    return PocEvents(PocEventsParams(**params))


def test_voltage_factor_over_a_step_is_the_one_farthest_from_one_with_its_overlap():
    ev = events(voltage=[[1.0, 0.25, 0.9], [1.2, 0.5, 1.2]])
    assert ev.voltage_over(0.0, 1.0) == (1.0, 0.0)
    assert ev.voltage_over(1.0, 0.1) == (0.9, pytest.approx(0.1))
    factor, t = ev.voltage_over(1.1, 0.2)  # both overlap: the swell (0.2 from 1) beats the sag (0.1)
    assert factor == 1.2 and t == pytest.approx(0.1)  # the swell starts at 1.2: 0.1 s inside [1.1, 1.3)


def test_frequency_ramps_holds_and_ramps_back():
    """A -0.5 Hz step with a 0.5 s ramp from 2 s, held to 12 s: 1 Hz/s each way."""
    ev = events(frequency=[[2.0, 10.0, -0.5, 0.5]], f_nominal_hz=60.0)
    expected = {1.9: 60.0, 2.25: 59.75, 2.5: 59.5, 11.9: 59.5, 12.25: 59.75, 12.5: 60.0, 20.0: 60.0}
    for t, f in expected.items():
        assert ev.frequency_at(t) == pytest.approx(f), t


def test_with_the_bus_voltage_input_the_values_are_levels():
    sim = PocEventsSim()
    sim.init("s", time_resolution=0.1, start_utc="2024-07-10T00:00:00Z", step_s=0.1, duration_s=10, seed=1)
    sim.create(1, "PocEvents", eid="dist", voltage=[[0.0, 1.0, 0.7]])
    eid = "dist"
    sim.step(0, {eid: {"vm_pu": {"pcc": 1.04}}}, 10**9)
    out = sim.get_data({eid: ["vm_sag_pu"]})[eid]["vm_sag_pu"]
    assert out * 1.04 == pytest.approx(0.7)


@pytest.mark.parametrize("bad", [{"voltage": [[0.0, 1.0, 1.0]]}, {"voltage": [[0.0, 0.0, 0.9]]},
                                 {"frequency": [[0.0, 1.0, 0.5, 2.0]]}, {"voltage": [[-1.0, 1.0, 0.9]]}])
def test_bad_events_are_refused(bad):
    with pytest.raises(ValueError):
        PocEventsParams(**bad)
