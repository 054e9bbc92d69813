"""The cosim command: exit codes, one message per mistake, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cosim.cli import main

TOY = """
[scenario]
name = "toy"
start = 2024-07-15T00:00:00Z
duration_s = 1800
step_s = 60

[sims]
src = { adapter = "toy_ramp" }
sink = { adapter = "toy_sink" }

[entities]
a = { sim = "src", model = "Ramp", p0_mw = 1.0 }
s = { sim = "sink", model = "Sink" }

[[connect]]
src = "a"
dst = "s"
attrs = ["p_mw"]
"""

BAD = """
[scenario]
name = "bad one"
start = 2024-07-15T00:00:00Z
duration_s = 100
step_s = 60

[sims]
src = { adapter = "nope" }

[entities]
a = { sim = "srcc", model = "Ramp" }

[[connect]]
src = "a"
dst = "b"
attrs = ["power"]
"""


def test_validate_ok(toy_adapters, write_scenario, capsys):
    assert main(["validate", str(write_scenario(TOY))]) == 0
    assert "ok — toy: 2 sims, 2 entities, 1 connections, 30 steps of 60 s" in capsys.readouterr().out


def test_validate_lists_every_problem_and_exits_1(write_scenario, capsys):
    path = write_scenario(BAD)
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}: 5 problems:")
    for expected in ("scenario.name", "scenario.duration_s = 100", "sims.src.adapter = 'nope'",
                     "entities.a.sim = 'srcc'", "connect[0].dst = 'b': unknown entity; known: a"):
        assert expected in err, err
    assert "internal error" not in err


def test_cli_subprocess_has_no_traceback(tmp_path):
    """The installed entry point, as a user runs it."""
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    out = subprocess.run([sys.executable, "-m", "cosim", "run", str(path)], capture_output=True, text=True)
    assert out.returncode == 1
    assert "5 problems" in out.stderr and "internal error" not in out.stderr
    assert not (tmp_path / "runs").exists()  # refused before any simulator started
    missing = subprocess.run([sys.executable, "-m", "cosim", "validate", str(tmp_path / "nope.toml")],
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "no such file" in missing.stderr and "internal error" not in missing.stderr


def test_run_prints_kpis_and_folder(toy_adapters, write_scenario, tmp_path, capsys):
    assert main(["run", str(write_scenario(TOY)), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
    folders = list((tmp_path / "runs").iterdir())
    assert len(folders) == 1 and (folders[0] / "timeseries.parquet").is_file()


def test_run_failing_sim_exits_1_and_keeps_data(toy_adapters, write_scenario, tmp_path, capsys):
    text = TOY + '\n[sims.bad]\nadapter = "toy_faulty"\nfail_at_s = 300\n\n[entities.f]\nsim = "bad"\nmodel = "Faulty"\n'
    code = main(["run", str(write_scenario(text)), "--out", str(tmp_path / "runs"), "--quiet"])
    captured = capsys.readouterr()
    assert code == 1
    assert "run failed: RuntimeError: injected failure at t = 300 s" in captured.err
    assert "internal error" not in captured.err
    run_dir = next((tmp_path / "runs").iterdir())
    assert json.loads((run_dir / "metadata.json").read_text())["status"] == "failed"
    import pandas as pd

    assert len(pd.read_parquet(run_dir / "timeseries.parquet")) == 5  # t = 0..240 s


def test_set_overrides(toy_adapters, write_scenario, capsys):
    assert main(["validate", str(write_scenario(TOY)), "--set", "scenario.duration_s=600"]) == 0
    assert "10 steps" in capsys.readouterr().out
    assert main(["validate", str(write_scenario(TOY)), "--set", "scenario.step_s=7"]) == 1


def test_list_shows_adapters_with_units_and_roles(capsys):
    """Every adapter with its models' roles; the recorder is part of the run, not an adapter."""
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "signals" in out and "Battery  (role: storage)" in out and "Grid  (role: grid)" in out
    assert "recorder" not in out.split("grid catalogue")[0]


MINIMAL = """
[scenario]
name = "m"
start = 2024-07-15T00:00:00Z
duration_s = 3600
step_s = 60
"""


@pytest.mark.parametrize("extra, overrides, expected", [
    ("entities = 3\n", [], "entities = 3: must be a table"),
    ("sims = 3\n", [], "sims = 3: must be a table"),
    ("", ["connect.0.src=x"], "use [[connect]] blocks"),
    ("", ["scenario.name.x=1"], "scenario.name.x = 1: cannot set a key inside this value"),
    ('[sims.g]\nadapter = "grid"\nnetwork = "bad.json"\n', [], "not a pandapower JSON network"),
    ('[sims.s]\nadapter = "signals"\nfile = "inf.csv"\ncolumns = { p_mw = "p" }\n', [], "non-finite value"),
], ids=["entities-scalar", "sims-scalar", "set-into-list", "set-through-value", "bad-json-net", "inf-in-data"])
def test_mistakes_found_in_review_give_one_message_not_an_internal_error(tmp_path, capsys, extra, overrides, expected):
    """Each of these used to end in 'internal error' (a Python exception escaping validation)."""
    (tmp_path / "bad.json").write_text("{}")
    (tmp_path / "inf.csv").write_text("time_utc,p\n2024-07-15T00:00:00Z,1\n2024-07-15T01:00:00Z,inf\n")
    path = tmp_path / "s.toml"
    top_level = extra and not extra.startswith("[")
    path.write_text(extra + MINIMAL if top_level else MINIMAL + extra)
    args = ["validate", str(path)] + [a for o in overrides for a in ("--set", o)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert expected in err and "internal error" not in err


def test_initial_data_is_typed_and_must_name_carried_attrs(toy_adapters, write_scenario, capsys):
    feedback = TOY + '\n[[connect]]\nsrc = "s"\ndst = "a"\nattrs = ["p_cap_mw"]\ntime_shifted = true\n'
    assert main(["validate", str(write_scenario(feedback + 'initial_data = { p_cap_mw = "abc" }\n'))]) == 1
    assert "initial_data.p_cap_mw" in capsys.readouterr().err
    assert main(["validate", str(write_scenario(feedback + "initial_data = { p_cap_mw = 1.0, q_mw = 2.0 }\n"))]) == 1
    assert "initial_data.q_mw: not an attribute this connection carries" in capsys.readouterr().err


def test_mixed_utc_offsets_in_a_csv_are_read(tmp_path, capsys):
    (tmp_path / "mix.csv").write_text("time_utc,p\n2024-03-10T01:00:00-05:00,1\n2024-03-10T03:00:00-04:00,2\n")
    path = tmp_path / "s.toml"
    path.write_text(MINIMAL.replace("2024-07-15T00:00:00Z", "2024-03-10T06:00:00Z")
                    + '[sims.s]\nadapter = "signals"\nfile = "mix.csv"\ncolumns = { p_mw = "p" }\n'
                    + '[entities.x]\nsim = "s"\nmodel = "Series"\n')
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
