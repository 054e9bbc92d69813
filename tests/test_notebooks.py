"""The tutorial notebooks run from top to bottom in their quick versions (``COSIM_DOCS_QUICK=1``).

``make docs`` runs them in full (mkdocs-jupyter, ``execute: true``); here each runs with nbclient on a
short horizon, must draw at least three figures (with the reader's inline backend: cosim selects none)
and must remove the run folders it made. They are stored without outputs, so what the
manual shows is always from code that ran in its build.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "docs" / "tutorials").glob("*.ipynb"))


def test_there_are_tutorial_notebooks():
    assert len(NOTEBOOKS) >= 4, NOTEBOOKS  # hosting, interconnection, operator, researcher


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    stored = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not stored, f"{path.name}: cells {stored} carry outputs; clear them (jupyter nbconvert --clear-output)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_runs_quick_and_draws_three_figures(path, monkeypatch, tmp_path):
    monkeypatch.setenv("COSIM_DOCS_QUICK", "1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the kernel's temporary folders: none may be left behind
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    figures = sum("image/png" in out.get("data", {}) for cell in nb.cells if cell.cell_type == "code"
                  for out in cell.outputs)
    assert figures >= 3, f"{path.name} drew {figures} figures; a tutorial shows at least three"
    errors = [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs if out.output_type == "error"]
    assert not errors
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith("cosim-docs")]
    assert not left, f"{path.name} left its run folders behind: {left}"
