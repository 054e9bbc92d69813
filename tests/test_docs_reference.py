"""The generated reference pages name every KPI block and every adapter the code has.

``docs/gen_reference.py`` writes ``reference/kpis.md`` from the KPI blocks (the scan ``kpis.json``
uses) and ``reference/models.md`` from the adapter registry; a block or adapter without a section
there is a page out of step with the code.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_reference"] = module
    spec.loader.exec_module(module)
    return module


def _sections(page: str) -> set[str]:
    return set(re.findall(r"^## `([^`]+)`$", page, flags=re.M))


def test_every_kpi_block_has_a_section(gen):
    from cosim import kpis

    page = gen.kpis_page()
    names = {block.name for block in kpis.blocks()}
    assert len(names) >= 20  # the scan found the package's blocks, not an empty folder
    missing = names - _sections(page)
    assert not missing, f"KPI blocks without an entry in reference/kpis.md: {sorted(missing)}"
    for name in names:  # each is in the summary table too
        assert f"[`{name}`](#{name})" in page


def test_every_adapter_has_a_section(gen):
    from cosim import registry

    page = gen.models_page()
    names = set(registry.available())
    assert len(names) >= 30
    missing = names - _sections(page)
    assert not missing, f"adapters without an entry in reference/models.md: {sorted(missing)}"


def test_a_new_kpi_block_appears_and_units_are_read(gen, tmp_path, monkeypatch):
    """A block added as one file is found by the page (the test can fail: a hand-kept list would miss it)."""
    from cosim import kpis

    (tmp_path / "zz_probe.py").write_text(
        '"""A probe block: ``probe_energy_mwh`` = Σ p_mw·Δt."""\n'
        "from cosim.kpis._block import Block\n"
        "BLOCK = Block(name='zz_probe', title='Probe', order=999, columns=lambda c, r: [], compute=lambda i: {})\n")
    monkeypatch.setattr(kpis, "__path__", [*kpis.__path__, str(tmp_path)])
    kpis.refresh()
    try:
        page = gen.kpis_page()
    finally:
        monkeypatch.undo()
        kpis.refresh()
    assert "## `zz_probe`" in page
    assert "| `probe_energy_mwh` | mwh |" in page


def test_model_attributes_carry_units(gen):
    page = gen.models_page()
    assert re.search(r"^\| `p_mw` \| mw \|", page, flags=re.M)
