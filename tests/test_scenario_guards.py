"""Every shipped scenario passes the validation guards, or its file says why a warning is expected.

A guard is a validation warning (``cosim validate`` prints it, ``metadata.json`` keeps it, the
report shows it): placeholder line ratings, a time constant shorter than the step, a knob without
effect, a looped trace. A shipped scenario that triggers one carries a comment line
``# Expected warning: <text>`` whose text is part of the warning, with the reason on the line (or
the lines after it): a planner reading the file knows the caveat before the run shows it.

The after-run guards (cosim/kpis/guards.py: a controller's setpoint chattering, or pinned at its
floor for most of the run) judge a whole run: every shipped scenario runs whole here, on the
direct engine (~70 s for all of them), and states its after-run warnings the same way
(``# Expected warning: after the run: <part of it> — <why>``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import cosim
from cosim.adapters.grid import placeholder_rating_warnings
from cosim.kpis import guards
from cosim.scenario.validate import time_constant_warnings
from cosim.sdk import Params

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml")) + [
    p for p in sorted((ROOT / "scenarios" / "published").glob("*.toml")) if "[scenario]" in p.read_text()]
EXPECTED = re.compile(r"^#\s*Expected warning:\s*(?P<text>[^—(;]+)", re.MULTILINE)
AFTER = "after the run: "


def _stated(path: Path, after: bool) -> list[str]:
    texts = [m.group("text").strip() for m in EXPECTED.finditer(path.read_text())]
    return [t for t in texts if t.startswith(AFTER.strip()) == after]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_each_warning_of_a_shipped_scenario_is_stated_in_its_file(path):
    scn = cosim.load_scenario(path)
    stated = _stated(path, after=False)
    unstated = [w for w in scn.warnings if not any(s and s in w for s in stated)]
    assert not unstated, f"{path.name}: add '# Expected warning: <part of it> — <why>' or fix: {unstated}"
    unused = [s for s in stated if not any(s in w for w in scn.warnings)]
    assert not unused, f"{path.name}: states warnings it no longer gives: {unused}"


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_each_after_run_warning_of_a_whole_shipped_run_is_stated_in_its_file(path, tmp_path):
    result = cosim.run(path, out_dir=tmp_path, overrides={"scenario.engine": "direct"})
    assert result.ok, result.reason
    given = [w for w in result.metadata["warnings"] if w.startswith(AFTER)]
    assert given == guards.run_warnings(result.kpis)  # what the report and metadata.json show
    stated = _stated(path, after=True)
    unstated = [w for w in given if not any(s in w for s in stated)]
    assert not unstated, (f"{path.name}: add '# Expected warning: after the run: <part of it> — <why>' or fix "
                          f"the controller: {unstated}")
    unused = [s for s in stated if not any(s in w for w in given)]
    assert not unused, f"{path.name}: states after-run warnings its whole run no longer gives: {unused}"


def test_placeholder_ratings_are_named_and_real_ones_pass():
    import pandapower.networks as pn

    net = pn.case33bw()
    (text,) = placeholder_rating_warnings(net, "ieee33")
    assert text.startswith("warning: 32 of 32 lines") and "99999" in text
    assert "network_params = {max_i_ka" in text  # the catalogue's ieee33 takes a rating ...
    assert "network_params" not in placeholder_rating_warnings(net, "feeder.json")[0]  # ... a JSON file does not
    net.line["max_i_ka"] = 0.4
    assert placeholder_rating_warnings(net, "ieee33") == []
    net.line.loc[0, "max_i_ka"] = 100.0  # one placeholder among real ratings is still said
    assert "1 of 32 lines" in placeholder_rating_warnings(net, "x")[0]


class _Lagged(Params):
    TIME_CONSTANTS = ("tau_s", "missing_s")
    tau_s: float = 0.25
    hold_s: float = 0.01  # not declared: never warned


@pytest.mark.parametrize(("step_s", "warned"), [(1.0, True), (0.25, False), (0.1, False)])
def test_a_time_constant_shorter_than_the_step_is_warned(step_s, warned):
    found = time_constant_warnings("entities.x", _Lagged(), step_s)
    assert bool(found) is warned
    if warned:
        assert "entities.x.tau_s = 0.25 s" in found[0] and "(1 s)" in found[0]


def test_the_ffr_case_of_issue_31_warns_at_a_1_s_step():
    """ffr_trip at 1 s steps: the 0.25 s FFR ramp cannot be resolved (its benefit falls from +113 to +26 mHz)."""
    scn = cosim.load_scenario(ROOT / "scenarios" / "ffr_trip.toml",
                              overrides={"scenario.step_s": 1, "scenario.tick_s": 1.0})
    assert any("entities.ffr.ramp_s = 0.25 s" in w for w in scn.warnings), scn.warnings
    assert not any("ramp_s" in w for w in cosim.load_scenario(ROOT / "scenarios" / "ffr_trip.toml").warnings)


def test_the_multisite_ofo_case_of_issue_31_warns_that_its_knobs_sit_at_their_floor(tmp_path):
    """ieee123_multisite_ofo without shifting: the OFO can only cut batch sizes, drives all three
    sites to their floor (batch 8) and the feeder still violates; the run must say so (with
    shifting on, the whole-run test above finds no such warning)."""
    result = cosim.run(ROOT / "scenarios" / "ieee123_multisite_ofo.toml", out_dir=tmp_path,
                       overrides={"scenario.engine": "direct", "entities.shift.enabled": False})
    assert result.ok, result.reason
    pinned = {w.split()[3] for w in result.metadata["warnings"] if w.startswith(AFTER) and "at its floor" in w}
    assert pinned == {"ofo.n_batch_max_z1", "ofo.n_batch_max_z2", "ofo.n_batch_max_z3"}, result.metadata["warnings"]
    assert all(result.kpis["guards"][k]["floor_frac"] >= 0.9 for k in pinned)
