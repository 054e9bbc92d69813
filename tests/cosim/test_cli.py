"""The cosim command: exit codes, one message per mistake, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
    assert "Traceback" not in err


def test_cli_subprocess_has_no_traceback(tmp_path):
    """The installed entry point, as a user runs it."""
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    out = subprocess.run([sys.executable, "-m", "cosim", "run", str(path)], capture_output=True, text=True)
    assert out.returncode == 1
    assert "5 problems" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "runs").exists()  # refused before any simulator started
    missing = subprocess.run([sys.executable, "-m", "cosim", "validate", str(tmp_path / "nope.toml")],
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "no such file" in missing.stderr and "Traceback" not in missing.stderr


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
    assert "Traceback" not in captured.err
    run_dir = next((tmp_path / "runs").iterdir())
    assert json.loads((run_dir / "metadata.json").read_text())["status"] == "failed"
    import pandas as pd

    assert len(pd.read_parquet(run_dir / "timeseries.parquet")) == 5  # t = 0..240 s


def test_set_overrides(toy_adapters, write_scenario, capsys):
    assert main(["validate", str(write_scenario(TOY)), "--set", "scenario.duration_s=600"]) == 0
    assert "10 steps" in capsys.readouterr().out
    assert main(["validate", str(write_scenario(TOY)), "--set", "scenario.step_s=7"]) == 1


def test_list_shows_adapters_with_units(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "recorder" in out and "signals" in out
