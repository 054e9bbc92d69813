"""The ride-through logic on the positive-sequence or the worst-phase voltage (``voltage_definition``),
and an SLG fault in the IEEE 13 feeder where the two definitions give different outcomes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cosim.adapters.ride_through import RideThrough, RideThroughParams

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "ieee13_fault_ride_through.toml"
PERC1 = {"vt0_pu": 0.5, "vt1_pu": 0.7, "fcease_frac": 1.0, "t_recon_s": 1.0}


def _step(definition, inputs):
    rt = RideThrough(RideThroughParams(curve="none", perc1=PERC1, voltage_definition=definition))
    return rt.step(0.0, 0.1, {"p_load_mw": 10.0, **inputs})


@pytest.mark.parametrize("definition, connected", [("positive_sequence", 1.0), ("worst_phase", 0.0)])
def test_the_definition_picks_the_voltage_acted_on(definition, connected):
    """v1 = 0.82 pu is above vt1 (0.7): nothing ceases; the worst phase at 0.02 pu is below vt0 (0.5):
    all of it ceases. Both ceasing shares are reported whatever the definition."""
    out = _step(definition, {"vm_pu": 0.9, "v1_pu": 0.82, "v_worst_pu": 0.02})
    assert out["p_connected_frac"] == connected and out["p_mw"] == pytest.approx(10.0 * connected)
    assert out["vm_acted_pu"] == (0.82 if definition == "positive_sequence" else 0.02)
    assert out["ceasing_positive_sequence_frac"] == 0.0 and out["ceasing_worst_phase_frac"] == 1.0


@pytest.mark.parametrize("definition", ["positive_sequence", "worst_phase"])
@pytest.mark.parametrize("inputs", [{"vm_pu": 0.6}, {"vm_pu": 0.6, "v1_pu": float("nan"), "v_worst_pu": float("nan")}])
def test_without_its_input_either_definition_acts_on_vm_pu(definition, inputs):
    """A balanced engine gives only vm_pu (or NaN phase outputs): both definitions act on it
    (0.6 pu is halfway between vt0 = 0.5 and vt1 = 0.7: half ceases)."""
    out = _step(definition, inputs)
    assert out["vm_acted_pu"] == 0.6 and out["p_connected_frac"] == pytest.approx(0.5)


def test_a_sag_event_scales_the_definition_voltage():
    out = _step("worst_phase", {"v1_pu": 1.0, "v_worst_pu": 0.9, "vm_sag_pu": 0.5})
    assert out["vm_acted_pu"] == pytest.approx(0.45)


def test_unknown_definition_is_refused():
    with pytest.raises(ValueError, match="positive_sequence"):
        RideThroughParams(voltage_definition="average")


@pytest.mark.parametrize("engine", ["mosaik", "direct"])
def test_slg_fault_ceases_on_the_worst_phase_only(tmp_path, engine):
    """scenarios/ieee13_fault_ride_through.toml: phase a of 671 to ground for 0.2 s; at 675 the worst
    phase is ~0.02 pu and the positive sequence ~0.82 pu. Acting on the positive sequence the campus
    stays connected; acting on the worst phase it ceases (one step late: the logic sees the previous
    step's voltage) and reconnects. The verdict block says the worst phase decided it, and ITIC's
    lower boundary fails on the worst phase only."""
    from cosim.run import run

    outcomes = {}
    for definition in ("positive_sequence", "worst_phase"):
        result = run(SCENARIO, tmp_path / definition,
                     overrides={"entities.ups.voltage_definition": definition, "scenario.engine": engine})
        assert result.status == "ok"
        ts = pd.read_parquet(result.run_dir / "timeseries.parquet")
        outcomes[definition] = (ts["ups.p_connected_frac"].min(), result.kpis)
    assert outcomes["positive_sequence"][0] == 1.0
    assert outcomes["worst_phase"][0] == 0.0
    for definition, (_, kpis) in outcomes.items():
        verdict = kpis["ride_through_verdict"]
        onset = verdict["cessations"]["ups"]["c1"]
        assert onset["decided_by"] == "worst_phase" and onset["t_s"] == pytest.approx(2.1)
        assert onset["ceased"] is (definition == "worst_phase")
        itic = verdict["pcc"]["itic_lower"]
        assert itic["applies_to"] == "worst_phase" and itic["pass"] is False
        assert itic["positive_sequence"]["pass"] is True and itic["worst_phase"]["pass"] is False
