"""Tests of a C part (``adapters/<package>/_*.c``, built by ``make build``) skip where it is not in use, except
under ``COSIM_REQUIRE_C_PARTS`` (``make test``, which builds every one): there they fail, so a library that was not
built, is stale or was refused by its adapter's check cannot pass the suite as skips."""

from __future__ import annotations

import os

import pytest

#: set (to anything but "" or "0") by ``make test``: every C part must be built and in use
REQUIRED = os.environ.get("COSIM_REQUIRE_C_PARTS", "") not in ("", "0")
#: the marker tests/conftest.py fails a test with (its one argument: what is missing)
MISSING = "c_part_missing"


def needs_c_part(in_use: bool, library: str):
    """A mark for the tests of ``library`` (``adapters/grid/_kernels.so``): none when ``in_use``; else skip,
    or fail under :data:`REQUIRED`."""
    if in_use:
        return pytest.mark.skipif(False, reason="")
    if REQUIRED:
        return getattr(pytest.mark, MISSING)(library)
    return pytest.mark.skip(reason=f"{library} not built or not in use (make build)")


def missing_c_part(library: str) -> None:
    """Inside a test: skip it, or fail it under :data:`REQUIRED`, for ``library`` not built or not in use."""
    if REQUIRED:
        pytest.fail(f"{library} is not built or not in use, and COSIM_REQUIRE_C_PARTS is set: run make build",
                    pytrace=False)
    pytest.skip(f"{library} not built or not in use (make build)")
