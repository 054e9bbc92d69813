"""The grid adapter's check of its sim keys names every problem of the network at once (STYLE.md,
"Errors that say how to fix it": collect every problem, then raise once), not only the first group
it meets: a user who mends one mistake is not sent back for the next."""

from __future__ import annotations

import pandapower as pp

from cosim.adapters.grid import GridSim, SimParams
from cosim.cli import main
from cosim.sdk import ScenarioContext, parse_utc

CTX = ScenarioContext(parse_utc("2024-07-15T12:00:00Z"), 3600, 1, 1)

#: An OpenDSS feeder's sim keys with one mistake in each group the check reads.
OPENDSS_BAD = {"network": "ieee13", "engine": "opendss", "tap_positions": {"nope": 3},
               "faults": [{"bus": "nowhere", "t_s": 1.0, "clearing_s": 2.0}],
               "exclude_buses": ["bus_x"], "line_trips": [[1.0, 1.0, "no_line"]]}


def test_opendss_check_names_every_group():
    found = GridSim.check(SimParams.model_validate(OPENDSS_BAD), CTX)
    text = "\n".join(found)
    assert "unknown regulator(s) ['nope']" in text  # tap_positions: a regulator the feeder lacks
    assert 'tap_positions apply with regulators = "fixed"' in text
    assert "faults[0].bus = 'nowhere'" in text
    assert "exclude_buses: unknown bus(es) ['bus_x']" in text
    assert "line_trips: unknown line(s) ['no_line']" in text
    assert len(found) == 5, found


def _sourceless_net(path) -> str:
    """a - b with a placeholder rating, and no ext_grid."""
    net = pp.create_empty_network()
    a, b = (pp.create_bus(net, 20.0, name=n) for n in ("a", "b"))
    pp.create_line_from_parameters(net, a, b, 1.0, 0.1, 0.1, 10.0, 99999.0, name="ab")
    pp.to_json(net, str(path))
    return str(path)


def test_pandapower_check_names_every_group(tmp_path):
    params = SimParams(network=_sourceless_net(tmp_path / "net.json"), exclude_buses=["z"],
                       line_trips=[[1.0, 1.0, "no_line"]])
    found = GridSim.check(params, CTX)
    problems = [f for f in found if not f.startswith("warning: ")]
    assert any("source" in p for p in problems), found  # no ext_grid
    assert any("exclude_buses: unknown bus(es) ['z']" in p for p in problems), found
    assert any("line_trips: unknown line(s) ['no_line']" in p for p in problems), found
    assert any("placeholder ratings" in w for w in found if w.startswith("warning: ")), found


def test_validate_lists_them_in_one_message_and_exits_1(tmp_path, capsys):
    keys = ", ".join(f"{k} = {_toml(v)}" for k, v in OPENDSS_BAD.items())
    path = tmp_path / "feeder.toml"
    path.write_text(f"""[scenario]
name = "feeder"
start = 2024-07-15T12:00:00Z
duration_s = 60
step_s = 1

[sims]
grid = {{ adapter = "grid", {keys} }}

[entities]
feeder = {{ sim = "grid", model = "Grid" }}
""")
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}: 5 problems:"), err
    for key in ("tap_positions: unknown", "tap_positions apply", "faults[0].bus", "exclude_buses", "line_trips"):
        assert f"sims.grid: {key}" in err, err
    assert "Traceback" not in err


def _toml(value) -> str:
    """A small TOML inline value."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)
