"""An FMU's archive is read within bounds (adapters/fmu/archive.py): sizes, names and the model
description are checked before anything is parsed or extracted; each refusal names the file and
the limit (and how to raise it)."""

from __future__ import annotations

import shutil
import stat
import zipfile
from pathlib import Path

import pytest

from cosim.adapters.fmu.archive import MAX_RATIO, archive_problem, extract
from cosim.adapters.fmu import FmuSim, SimParams

SHIPPED = sorted((Path(__file__).resolve().parents[3] / "thermal_fmus" / "build").glob("*.fmu"))


@pytest.mark.parametrize("fmu", SHIPPED, ids=lambda p: p.stem)
def test_the_shipped_fmus_pass_and_extract(fmu):
    assert archive_problem(fmu) == ""
    folder = Path(extract(fmu))
    try:
        with zipfile.ZipFile(fmu) as zf:
            assert all((folder / name).exists() for name in zf.namelist())
    finally:
        shutil.rmtree(folder)


def test_the_foreign_fmu_passes(foreign_fmu):
    assert archive_problem(foreign_fmu) == ""


def _with(foreign_fmu: Path, tmp_path: Path, name: str, write) -> Path:
    """A copy of the foreign FMU with one more entry written by ``write(zf)``."""
    fmu = tmp_path / f"{name}.fmu"
    shutil.copy(foreign_fmu, fmu)
    shutil.copy(foreign_fmu.with_suffix(".attrs.toml"), tmp_path / f"{name}.attrs.toml")
    with zipfile.ZipFile(fmu, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        write(zf)
    return fmu


def _problems(fmu: Path) -> list[str]:
    return FmuSim.check(SimParams.model_validate({"fmu": str(fmu)}), None)


def test_an_entry_that_unpacks_past_the_limit_is_refused_before_extraction(foreign_fmu, tmp_path, monkeypatch):
    """The 2.1 MB FMU with a 2 GB zero-filled entry, scaled down: the limit lowered to 8 MiB, a 12 MiB entry."""
    monkeypatch.setenv("COSIM_FMU_MAX_UNPACKED_MB", "8")
    fmu = _with(foreign_fmu, tmp_path, "big", lambda zf: zf.writestr("resources/zeros.bin", bytes(12 * 2**20)))
    problems = _problems(fmu)
    assert len(problems) == 1 and problems[0].startswith("big.fmu: it unpacks to 12 MiB, over the limit of 8 MiB")
    assert "COSIM_FMU_MAX_UNPACKED_MB" in problems[0]
    with pytest.raises(ValueError, match="over the limit"):
        extract(fmu)


def test_a_zip_bomb_entry_is_refused_by_its_ratio(foreign_fmu, tmp_path):
    fmu = _with(foreign_fmu, tmp_path, "bomb", lambda zf: zf.writestr("resources/zeros.bin", bytes(40 * 2**20)))
    problem = archive_problem(fmu)
    assert "'resources/zeros.bin' expands" in problem and f"the limit is {MAX_RATIO} times" in problem


def test_a_huge_model_description_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    """The 0.44 MB FMU whose 400 MB XML comment took 2 GB to validate, scaled down (limit 1 MiB, 2 MiB comment)."""
    monkeypatch.setenv("COSIM_FMU_MAX_DESCRIPTION_MB", "1")
    fmu = tmp_path / "xml.fmu"
    with zipfile.ZipFile(fmu, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("modelDescription.xml", '<?xml version="1.0"?>\n<!--' + "x" * (2 * 2**20) + '-->\n'
                    '<fmiModelDescription fmiVersion="2.0" modelName="m" guid="g"/>')
    assert _problems(fmu) == ["xml.fmu: modelDescription.xml is 2 MiB, over the limit of 1 MiB; set "
                              "COSIM_FMU_MAX_DESCRIPTION_MB to raise it for an FMU you trust"]


def test_a_model_description_with_entities_is_refused(tmp_path):
    fmu = tmp_path / "laughs.fmu"
    lol = '<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>'
    with zipfile.ZipFile(fmu, "w") as zf:
        zf.writestr("modelDescription.xml", f'<?xml version="1.0"?>\n{lol}\n<fmiModelDescription fmiVersion="2.0" '
                    'modelName="&lol2;" guid="g"/>')
    assert "declares a DTD or entities" in _problems(fmu)[0]


@pytest.mark.parametrize("entry", ["../escape.txt", "/tmp/abs.txt", "resources/../../escape.txt", "C:/x.txt"])
def test_an_entry_outside_the_folder_is_refused(entry, foreign_fmu, tmp_path):
    fmu = _with(foreign_fmu, tmp_path, "trav", lambda zf: zf.writestr(entry, b"x"))
    problems = _problems(fmu)
    assert problems and "would be extracted outside the FMU's folder" in problems[0]
    with pytest.raises(ValueError):
        extract(fmu)
    assert not (tmp_path.parent / "escape.txt").exists()


def test_a_symbolic_link_entry_is_refused(foreign_fmu, tmp_path):
    def link(zf):
        info = zipfile.ZipInfo("resources/passwd")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    assert "is a symbolic link" in archive_problem(_with(foreign_fmu, tmp_path, "link", link))
