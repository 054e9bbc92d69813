"""Fixtures for the FMU adapter tests: foreign FMUs compiled from the C sources and model
descriptions in ``foreign/`` (each written for these tests, independent of ``thermal_fmus/``)."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

FOREIGN = Path(__file__).resolve().parent / "foreign"


@pytest.fixture(scope="session")
def foreign_fmu(tmp_path_factory) -> Path:
    """``rc_room.fmu`` (FMI 2.0, model exchange + co-simulation) with its sidecar beside it."""
    from thermal_fmus.build import fmi_headers_dir

    folder = tmp_path_factory.mktemp("foreign")
    library = folder / "rc_room.so"
    subprocess.run(["gcc", "-std=c99", "-O2", "-fPIC", "-shared", f"-I{fmi_headers_dir()}", "-o", str(library),
                    str(FOREIGN / "rc_room.c"), "-lm"], check=True, capture_output=True)
    fmu = folder / "rc_room.fmu"
    with zipfile.ZipFile(fmu, "w") as zf:
        zf.write(FOREIGN / "modelDescription.xml", "modelDescription.xml")
        zf.write(library, "binaries/linux64/rc_room.so")
        zf.write(FOREIGN / "rc_room.c", "sources/rc_room.c")
    shutil.copy(FOREIGN / "rc_room.attrs.toml", folder / "rc_room.attrs.toml")
    return fmu


@pytest.fixture(scope="session")
def shipped_fmus():
    """Build the shipped FMUs once (the same script as ``make build``)."""
    from thermal_fmus.build import build_all

    return build_all()


def _fmi3_stubs(headers: Path, implemented: str) -> str:
    """C stubs for every FMI 3.0 function ``implemented`` lacks: fmpy binds them all at load
    time, this model never calls them. Each returns fmi3Error (3)."""
    import re

    names = re.findall(r"#define (fmi3\w+)\s+fmi3FullName", (headers / "fmi3Functions.h").read_text())
    missing = [n for n in names if not re.search(rf"\b{n}\(", implemented)]
    return "\n".join(f"int {name}(void) {{ return 3; }}" for name in missing) + "\n"


def _build_fmi3(folder: Path, identifier: str, xml: str, sources: list[Path] | None = None) -> Path:
    """``<identifier>.fmu`` from FMI 3.0 C sources (stubs added for what they lack) and a model description."""
    from thermal_fmus.build import fmi_headers_dir

    headers = fmi_headers_dir()
    sources = sources or [FOREIGN / f"{identifier}.c"]
    stubs = folder / f"{identifier}_stubs.c"
    stubs.write_text(_fmi3_stubs(headers, "".join(p.read_text() for p in sources)))
    library = folder / f"{identifier}.so"
    subprocess.run(["gcc", "-std=c99", "-O2", "-fPIC", "-shared", f"-I{headers}", "-o", str(library),
                    *map(str, sources), str(stubs), "-lm"], check=True, capture_output=True)
    fmu = folder / f"{identifier}.fmu"
    with zipfile.ZipFile(fmu, "w") as zf:
        zf.write(FOREIGN / xml, "modelDescription.xml")
        zf.write(library, f"binaries/x86_64-linux/{identifier}.so")
    return fmu


@pytest.fixture(scope="session")
def foreign_fmu3(tmp_path_factory) -> Path:
    """``rc_room3.fmu`` (FMI 3.0, model exchange + co-simulation), independent sources."""
    return _build_fmi3(tmp_path_factory.mktemp("foreign3"), "rc_room3", "modelDescription3.xml")


@pytest.fixture(scope="session")
def arrays_fmu3(tmp_path_factory) -> Path:
    """``arrays3.fmu`` (FMI 3.0 co-simulation): arrays, a string, a binary, units without a suffix, t_stop."""
    return _build_fmi3(tmp_path_factory.mktemp("arrays3"), "arrays3", "arrays3.xml")


@pytest.fixture(scope="session")
def vdp_fmu(tmp_path_factory) -> Path:
    """``vdp.fmu`` (FMI 2.0, model exchange + co-simulation): Van der Pol with discrete inputs that
    must be set in event mode, and t_stop (see ``foreign/vdp.c``)."""
    from thermal_fmus.build import fmi_headers_dir

    folder = tmp_path_factory.mktemp("vdp")
    library = folder / "vdp.so"
    subprocess.run(["gcc", "-std=c99", "-O2", "-fPIC", "-shared", f"-I{fmi_headers_dir()}", "-o", str(library),
                    str(FOREIGN / "vdp.c"), "-lm"], check=True, capture_output=True)
    fmu = folder / "vdp.fmu"
    with zipfile.ZipFile(fmu, "w") as zf:
        zf.write(FOREIGN / "vdp.xml", "modelDescription.xml")
        zf.write(library, "binaries/linux64/vdp.so")
    return fmu


@pytest.fixture(scope="session")
def unzip(tmp_path_factory):
    """``unzip(fmu_path) -> folder``: each FMU extracted once, under pytest's temporary folder."""
    from fmpy import extract

    root = tmp_path_factory.mktemp("unzipped")
    done: dict[str, str] = {}

    def unzip_one(path) -> str:
        key = str(path)
        if key not in done:
            done[key] = extract(key, unzipdir=str(root / f"{len(done)}_{Path(key).stem}"))
        return done[key]

    return unzip_one
