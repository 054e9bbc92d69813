"""Every shipped sweep file (scenarios/sweeps/) expands into distinct variants that each pass validation:
a planner's sweep never finds a broken variant only after the runs before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cosim.scenario import load_scenario
from cosim.studies.variants import load_sweep_file, variant_id

SWEEPS = sorted((Path(__file__).resolve().parents[2] / "scenarios" / "sweeps").glob("*.toml"))


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_a_shipped_sweep_expands_into_distinct_valid_variants(path):
    spec = load_sweep_file(path)
    variants = spec.variants()
    text = spec.scenario.read_text()
    assert len({variant_id(text, v) for v in variants}) == len(variants)
    for overrides in variants:
        load_scenario(spec.scenario, overrides)  # raises ScenarioError naming the key on a broken variant


def test_the_npcc_fault_screening_is_ten_buses_by_five_clearing_times():
    spec = load_sweep_file(next(p for p in SWEEPS if p.stem == "npcc_campuses_faults"))
    faults = [v["sims.tgrid.faults"][0] for v in spec.variants()]
    assert len(faults) >= 50
    assert len({f[2] for f in faults}) == 10 and sorted({f[1] for f in faults}) == [0.1, 0.2, 0.3, 0.4, 0.5]
