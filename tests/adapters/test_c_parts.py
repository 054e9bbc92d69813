"""Every adapter's compiled C part (``adapters/<package>/_*.c``, built by ``make build``) is loaded only when it
was built from its source as it is now (:func:`cosim.sdk.load_library`: the SHA-256 compiled into it), so a
library of another text (an edited source, a copy from another checkout) never runs, whatever the files' times."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cosim import adapters
from cosim.sdk import load_library

SOURCES = sorted(Path(adapters.__path__[0]).glob("*/_*.c"))


def test_every_c_part_is_found():
    assert len(SOURCES) >= 4, SOURCES  # the grid's two, the FMU exchange, the datacenter's


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_loaded_only_when_built_from_its_source_as_it_is(source, tmp_path):
    built = source.with_suffix(".so")
    if not built.is_file():
        pytest.skip(f"{built.name} not built (make build)")
    assert load_library(built) is not None, f"{built} is stale: run make build"
    lib, copy = tmp_path / built.name, tmp_path / source.name
    shutil.copy(built, lib)
    copy.write_text(source.read_text() + "\n/* edited */\n")
    os.utime(lib, (copy.stat().st_mtime + 10, copy.stat().st_mtime + 10))  # the library the newer file
    assert load_library(lib) is None
    assert load_library(tmp_path / "missing.so") is None
