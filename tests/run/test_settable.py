"""A value set on an input from outside is taken or refused alike, with the same words, by the three
doors into a run: :meth:`cosim.Session.set`, a HELICS subscription (``Exchange`` of
:mod:`cosim.run.federate`) and a live run's ``PUT /entities/<id>/inputs`` (``LiveRun.check_inputs``).

Over every kind of entity of the catalogue (``tests/helpers/catalogue_kinds.py``) and every
settable input of it (one per family of per-element inputs), values inside the adapter's bounds, on
them, outside them, not finite, too large for a float, true/false and text are tried at each door.
What each must do is said here from the bounds and refusals the adapter states, not from the
function the doors share: a refused input takes nothing; true/false only an on/off input; anything
else a finite real number within the bounds.
"""

from __future__ import annotations

import math
import numbers
import sys
from pathlib import Path

import numpy as np
import pytest

from cosim.errors import ScenarioError
from cosim.live.run import LiveRun
from cosim.run.federate import Exchange, FederateConfig, FederationError, Link
from cosim.run.runner import load_scenario
from cosim.run.session import input_bounds, refused_inputs
from cosim.run.settable import value_problem
from cosim.units import DIMENSIONLESS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
from catalogue_kinds import CASES, NO_INPUTS, case_scenario, some_inputs  # noqa: E402


def _values(low: float, high: float) -> list:
    """Values to try against bounds ``[low, high]``: inside, on, outside, and not numbers."""
    values = [math.nan, math.inf, -math.inf, 10**400, True, False, "1", np.float32(0.5)]
    finite = [v for v in (low, high) if math.isfinite(v)]
    values += finite + [v + d for v in finite for d in (-1.0, 1.0, -1e-9 * max(1.0, abs(v)))]
    if finite and len(finite) == 2:
        values.append(0.5 * (low + high))
    return values


def _takes(attr: str, value, bounds: tuple[float, float], refused: str | None) -> bool:
    if refused:
        return False
    if isinstance(value, bool) and not any(attr == d or attr.endswith("_" + d) for d in DIMENSIONLESS):
        return False
    if not isinstance(value, numbers.Real):
        return False
    try:
        number = float(value)
    except OverflowError:
        return False
    return math.isfinite(number) and bounds[0] <= value <= bounds[1]


def _session_says(live: LiveRun, eid: str, attr: str, value) -> str | None:
    try:
        live.session.set(eid, attr, value)
    except ScenarioError as exc:
        (problem,) = exc.problems
        return problem.message
    live.session.set(eid, attr, None)
    return None


def _live_says(live: LiveRun, eid: str, attr: str, value) -> str | None:
    try:
        live.check_inputs(eid, {attr: value})
    except ScenarioError as exc:
        (problem,) = exc.problems
        return problem.message
    return None


def _helics_says(exchange: Exchange, eid: str, attr: str, value: float) -> str | None:
    try:
        exchange._checked(Link("peer/x", eid, attr), value, 60.0)
    except FederationError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("case", [c for c in CASES if c not in NO_INPUTS])
def test_every_door_takes_and_refuses_alike(case, tmp_path):
    path, _ = case_scenario(case, tmp_path, 1)
    scn = load_scenario(path, {"scenario.engine": "direct"})
    live = LiveRun(scn, out_dir=tmp_path / "runs", report=False)
    exchange = Exchange(None, FederateConfig(file="federation.toml"), scn)  # no publication, no subscription
    tried = 0
    try:
        for eid in scn.entities:
            bounds, refused = input_bounds(scn, eid), refused_inputs(scn, eid)
            for attr in some_inputs(scn.inputs(eid)):
                low_high = bounds.get(attr, (-math.inf, math.inf))
                for value in _values(*low_high):
                    takes = _takes(attr, value, low_high, refused.get(attr))
                    where = f"{eid}.{attr} = {value!r}"
                    said = _session_says(live, eid, attr, value)
                    assert (said is None) == takes, f"Session.set {where}: {said}"
                    assert said == value_problem(eid, attr, value, bounds.get(attr), refused.get(attr), "None")
                    heard = _live_says(live, eid, attr, value)
                    assert (heard is None) == takes, f"live {where}: {heard}"
                    assert heard == (None if said is None else said.replace("or None to", "or null to"))
                    if attr not in refused and isinstance(value, float) and not isinstance(value, bool):
                        got = _helics_says(exchange, eid, attr, value)  # HELICS hands doubles
                        assert (got is None) == takes, f"HELICS {where}: {got}"
                        assert got is None or f"at t = 60 s, {value_problem(eid, attr, value, bounds.get(attr))} (" in got
                    tried += 1
    finally:
        live.session.close()
    assert tried, f"{case}: no input tried"


def test_a_flag_takes_true_and_false_and_a_quantity_does_not():
    """The words of each refusal (the doors add only where the value came from)."""
    assert value_problem("feeder", "line_1_2_in_service", True, (0.0, 1.0)) is None
    assert value_problem("feeder", "line_1_2_in_service", np.bool_(False), (0.0, 1.0)) is None  # numpy's too
    assert value_problem("bess", "p_set_mw", np.bool_(True), (-1.0, 1.0)) == "give a number in mw, not true/false"
    assert value_problem("bess", "p_set_mw", True, (-1.0, 1.0)) == "give a number in mw, not true/false"
    assert value_problem("bess", "p_set_mw", math.nan, (-1.0, 1.0), release="None") == (
        "give a finite number in mw, or None to release it (back to the scenario's own value)")
    assert value_problem("bess", "p_set_mw", 2.0, (-1.0, 1.0)) == (
        "outside the bounds [-1, 1] mw of bess's adapter; give a value inside them")
    assert value_problem("ups", "p_grid_connected_frac", 0.5, (0.0, 1.0), "it has its own perc1") == (
        "not settable from outside on this entity: it has its own perc1")
