"""What a run records by default (no ``[record] include``), ``include = ["*"]`` for everything, and
the warning when a ``[record]`` leaves out a column a KPI reads (``cosim/scenario/record.py``)."""

from __future__ import annotations

import cosim
from cosim.run.graph import recorded_columns
from cosim.scenario.record import all_outputs, detail_outputs

BASE = """[scenario]
name = "rec"
start = 2024-07-15T00:00:00Z
duration_s = 600
step_s = 60
engine = "direct"

[sims.grid]
adapter = "grid"
network = "ieee33"

[entities.feeder]
sim = "grid"
model = "Grid"

[entities.pcc]
sim = "grid"
model = "Load"
bus = "18"
p_mw = 1.0
"""


def _scenario(tmp_path, record: str = ""):
    path = tmp_path / "rec.toml"
    path.write_text(BASE + record)
    return cosim.load_scenario(path)


def test_the_default_records_summaries_and_points_of_connection_not_every_bus(tmp_path):
    scn = _scenario(tmp_path)
    columns = recorded_columns(scn)
    everything = all_outputs(scn)
    assert len(everything) > 60 and len(columns) < len(everything)
    assert {"feeder.p_import_mw", "feeder.losses_mw", "feeder.vm_min_pu", "feeder.vm_max_pu",
            "feeder.max_loading_pct", "feeder.converged", "feeder.allbus_violation_pu"} <= set(columns)
    assert {f"pcc.{a}" for a in scn.outputs("pcc")} <= set(columns)  # the point of connection, whole
    assert "feeder.bus_18_vm_pu" in detail_outputs(scn) and "feeder.bus_18_vm_pu" not in columns
    assert not any(c.startswith(("feeder.bus_", "feeder.line_", "feeder.trafo_")) for c in columns)
    assert not [w for w in scn.warnings if w.startswith("record:")]


def test_include_star_records_everything_and_exclude_applies_on_top(tmp_path):
    scn = _scenario(tmp_path, '[record]\ninclude = ["*"]\n')
    assert recorded_columns(scn) == all_outputs(scn)
    scn = _scenario(tmp_path, '[record]\nexclude = ["pcc.q_*"]\n')
    assert "pcc.q_mvar" not in recorded_columns(scn) and "pcc.p_mw" in recorded_columns(scn)


def test_a_record_that_leaves_out_what_a_kpi_reads_says_which_kpi_which_column_and_the_fix(tmp_path):
    scn = _scenario(tmp_path, '[record]\ninclude = ["pcc.*", "feeder.vm_*"]\n')
    [warning] = [w for w in scn.warnings if w.startswith("record:")]
    assert "the grid KPI reads feeder.p_import_mw" in warning and "add them to record.include" in warning
    scn = _scenario(tmp_path, '[record]\nexclude = ["feeder.p_import_mw"]\n')
    [warning] = [w for w in scn.warnings if w.startswith("record:")]
    assert "feeder.p_import_mw" in warning and "drop 'feeder.p_import_mw' from record.exclude" in warning


def test_a_default_run_writes_the_default_columns_and_its_grid_kpis(tmp_path):
    scn = _scenario(tmp_path)
    result = cosim.run(scn.file, out_dir=tmp_path / "runs")
    assert result.ok, result.reason
    assert list(result.timeseries().columns) == recorded_columns(scn)
    assert result.kpis["feeder"]["import_mwh"] > 0 and result.kpis["feeder"]["max_loading_pct"] is not None


def test_record_patterns_match_as_fnmatchcase_does():
    """The patterns compiled into one expression select what matching them one by one selects."""
    import fnmatch
    import itertools

    from cosim.scenario.record import matcher

    patterns = ["*.p_mw", "grid*.vm_*", "a?c.*[0-9]", "*", "x.*y*z", "[!a]*.q", "*.*.*"]
    names = ["a.p_mw", "grid.vm_pu", "grid3.vm_a_pu", "abc.x1", "abc.x", "x.ayz", "x.y", "b.q", "a.q", "a.b.c",
             "a\nb.p_mw", ""]
    for k in range(4):
        for chosen in itertools.combinations(patterns, k):
            matches = matcher(list(chosen))
            for name in names:
                assert matches(name) == any(fnmatch.fnmatchcase(name, p) for p in chosen), (chosen, name)


def test_kpi_columns_are_asked_again_when_the_names_or_roles_change(tmp_path):
    """The blocks' columns are remembered for the last names and roles only, compared by value."""
    from cosim import kpis

    scn = _scenario(tmp_path)
    names, roles = all_outputs(scn), scn.roles()
    fresh = [(b, tuple(b.columns(names, roles))) for b in kpis.blocks()]
    assert list(kpis.block_columns(names, roles)) == fresh
    roles.entities["pcc"] = "datacenter"
    changed = [(b, tuple(b.columns(names, roles))) for b in kpis.blocks()]
    assert changed != fresh
    assert list(kpis.block_columns(names, roles)) == changed
    fewer = [n for n in names if not n.startswith("pcc.")]
    assert list(kpis.block_columns(fewer, roles)) == [(b, tuple(b.columns(fewer, roles))) for b in kpis.blocks()]
