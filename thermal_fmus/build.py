"""Build the thermal FMUs: ``python thermal_fmus/build.py [Model ...]``.

Each folder ``thermal_fmus/<Model>/`` holding a ``modelDescription.xml`` is one model. Its
``model.c`` is compiled with the shared FMI 2.0 co-simulation glue (``common/fmi2_cs.c``)
against the FMI headers that ship with fmpy (``fmpy/c-code``), and packed with its sources
into ``thermal_fmus/build/<Model>.fmu`` (``binaries/linux64/<Model>.so``). An FMU is rebuilt
only when it is missing or older than any of its inputs (sources, headers, this script).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMMON = HERE / "common"
BUILD_DIR = HERE / "build"
CFLAGS = ["-std=c99", "-O2", "-fPIC", "-shared", "-fvisibility=default", "-Wall", "-Wextra", "-Werror"]
FMI_HEADERS = ("fmi2Functions.h", "fmi2FunctionTypes.h", "fmi2TypesPlatform.h")


class BuildError(RuntimeError):
    """A model could not be compiled or packed."""


def models() -> list[str]:
    """Names of the models that have a folder with a model description."""
    return sorted(p.parent.name for p in HERE.glob("*/modelDescription.xml"))


def fmi_headers_dir() -> Path:
    """The folder of the FMI headers shipped with fmpy."""
    try:
        import fmpy  # only the headers are needed, and only when building
    except ImportError as exc:
        raise BuildError("fmpy is not installed: pip install fmpy (its c-code/ holds the FMI headers)") from exc
    path = Path(fmpy.__file__).parent / "c-code"
    if not (path / "fmi2Functions.h").is_file():
        raise BuildError(f"{path}: no fmi2Functions.h in this fmpy installation")
    return path


def fmu_path(model: str) -> Path:
    return BUILD_DIR / f"{model}.fmu"


def _inputs(model: str) -> list[Path]:
    folder = HERE / model
    return [*sorted(folder.glob("*")), *sorted(COMMON.glob("*")), Path(__file__).resolve()]


def is_stale(model: str) -> bool:
    """True when the FMU is missing or older than one of its inputs."""
    target = fmu_path(model)
    if not target.is_file():
        return True
    built = target.stat().st_mtime
    return any(p.is_file() and p.stat().st_mtime > built for p in _inputs(model))


def build(model: str, force: bool = False) -> Path:
    """Build ``thermal_fmus/build/<model>.fmu`` when missing or stale; return its path."""
    folder = HERE / model
    if not (folder / "modelDescription.xml").is_file():
        raise BuildError(f"no model {model!r}: {folder}/modelDescription.xml is missing; models: {', '.join(models())}")
    target = fmu_path(model)
    if not force and not is_stale(model):
        return target
    headers = fmi_headers_dir()
    BUILD_DIR.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{model}-", dir=BUILD_DIR) as tmp:
        library = Path(tmp) / f"{model}.so"
        cmd = ["gcc", *CFLAGS, f"-I{folder}", f"-I{COMMON}", f"-I{headers}",
               "-o", str(library), str(COMMON / "fmi2_cs.c"), str(folder / "model.c"), "-lm"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildError(f"{model}: gcc failed:\n{done.stderr}")
        packed = Path(tmp) / f"{model}.fmu"
        with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.write(folder / "modelDescription.xml", "modelDescription.xml")
            zf.write(library, f"binaries/linux64/{model}.so")
            for source in (folder / "config.h", folder / "model.c", COMMON / "model.h", COMMON / "fmi2_cs.c"):
                zf.write(source, f"sources/{source.name}")
            for header in FMI_HEADERS:
                zf.write(headers / header, f"sources/{header}")
            for doc in ("README.md",):
                if (folder / doc).is_file():
                    zf.write(folder / doc, f"documentation/{doc}")
        os.replace(packed, target)  # atomic: a concurrent reader sees the old or the new FMU
    return target


def build_all(names: list[str] | None = None, force: bool = False) -> list[Path]:
    """Build every model (or the ones named); return the FMU paths."""
    return [build(name, force) for name in (names or models())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=f"models to build (default: all of {', '.join(models())})")
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args(argv)
    if shutil.which("gcc") is None:
        print("build.py: gcc not found on PATH", file=sys.stderr)
        return 1
    try:
        for path in build_all(args.models, args.force):
            print(path.relative_to(HERE.parent))
    except BuildError as exc:
        print(f"build.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
