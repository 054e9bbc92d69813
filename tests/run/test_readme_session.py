"""The Session example in README.md runs as written (from a fresh clone: the README is the first
thing a user copies)."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_session_example_runs(tmp_path, capsys):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- README-session-example[^>]*-->\n```python\n(.*?)```", text, re.S)
    assert block, "the Session example block is missing from README.md"
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        code = block.group(1).replace('cosim.Session("scenarios/default.toml",',
                                      f'cosim.Session("scenarios/default.toml", out_dir={str(tmp_path)!r},')
        namespace: dict = {}
        exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 — our own README's example
    finally:
        os.chdir(cwd)
    s = namespace["s"]
    assert s.result.status == "ok" and s.result.metadata["engine"] == "direct"
    ts = s.result.timeseries()
    assert (ts["campus.p_mw"].iloc[121:] < ts["campus.p_mw"].iloc[:120].max()).all()  # the cap bites
    assert "2024-07-15 02:00:00+00:00" in capsys.readouterr().out
