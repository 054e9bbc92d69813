"""Fuzzing the scenario keys: any value at any key of a real scenario gives either a clean
one-message error or a valid scenario, and a valid one runs to ok/failed/degraded with a reason:
never an internal error, a crash at t = 0, or a hang (the reliability issue).

Bounded for ``make test``: hypothesis draws a fixed number of examples (derandomized, so CI
sees the same ones every time), the runs are a few steps on the direct engine.
"""

from __future__ import annotations

import math
import tomllib
from datetime import datetime, timezone
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cosim
from cosim.scenario import ScenarioError, set_dotted

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "tests" / "scenarios" / "golden_short.toml"


def _paths(value, prefix=""):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, f"{prefix}{key}.")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, f"{prefix}{i}.")
    yield prefix.rstrip(".")


RAW = tomllib.loads(BASE.read_text())
PATHS = sorted(p for p in set(_paths(RAW)) if p)
ODD = st.one_of(
    st.sampled_from([0, -1, 1, 2**63 - 1, -(2**63), 10**30, True, False, "", "x" * 300, "2.4", "Mars/Olympus",
                     "/proc/self/environ", "../../etc/passwd", [], [[]], {}, {"a": {"b": {}}}, None,
                     math.inf, -math.inf, math.nan, 1e300, -1e-300, 0.5,
                     datetime(1, 1, 1, tzinfo=timezone.utc), datetime(9999, 12, 31, tzinfo=timezone.utc)]),
    st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
)


def _mutated(path: str, value):
    import copy

    raw = copy.deepcopy(RAW)
    if value is None:  # drop the key instead
        parent, _, last = path.rpartition(".")
        node = raw
        for part in parent.split(".") if parent else []:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, dict):
            node.pop(last, None)
        return raw
    set_dotted(raw, path, value)
    return raw


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(PATHS), value=ODD)
def test_any_value_at_any_key_is_refused_cleanly_or_valid(path, value):
    raw = _mutated(path, value)
    try:
        cosim.scenario.validate(raw, BASE)
    except ScenarioError as exc:
        assert exc.problems and all(str(p) for p in exc.problems)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from([p for p in PATHS if p.startswith(("entities.", "sims.", "connect."))]), value=ODD)
def test_a_valid_mutation_runs_to_a_status_with_a_reason(path, value, tmp_path_factory):
    raw = _mutated(path, value)
    raw["scenario"]["duration_s"] = 600  # ten 60 s steps
    raw["scenario"]["engine"] = "direct"
    try:
        scn = cosim.scenario.validate(raw, BASE)
    except ScenarioError:
        return
    from cosim.run import run_scenario

    result = run_scenario(scn, tmp_path_factory.mktemp("fuzz"), progress=False)
    assert result.status in ("ok", "failed", "degraded")
    assert result.status == "ok" or result.reason
    assert "internal error" not in str(result.reason)
