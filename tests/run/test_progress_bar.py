"""The progress bar of ``cosim run``: its label is the simulation time, and it ends at the last step.

The label is set at most every ``LABEL_EVERY_S`` of wall time (formatting it every step cost
~5 µs a step), so the test checks what a user sees at the end: the last step's time, on both
engines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cosim

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("engine", ["direct", "mosaik"])
def test_the_bar_ends_on_the_last_steps_time(tmp_path, capsys, engine):
    result = cosim.run(ROOT / "bench" / "microgrid" / "microgrid.toml", out_dir=tmp_path, progress=True,
                       overrides={"scenario.duration_s": 7200, "scenario.engine": engine})
    assert result.ok, result.reason
    lines = capsys.readouterr().err.replace("\r", "\n").splitlines()
    final = [line for line in lines if "120/120" in line][-1]  # the bar as it is left (whatever is printed after)
    assert "2023-07-10 01:59 UTC" in final, final  # 2 h at 60 s: the last step at 01:59
