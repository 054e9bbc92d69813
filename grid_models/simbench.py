"""SimBench benchmark grids (Meinecke et al. 2020) with their year of 15-minute profiles.

``build(code)`` returns the pandapower net of a SimBench code (default
``"1-MV-rural--0-sw"``, a 20 kV rural feeder with 96 loads and 102 generators);
``profiles(code)`` returns the absolute load and generation of every element for the
SimBench year (2016, 366 days x 96 quarter hours) as SimBench's ``get_absolute_values``
computes them. Loading a code from the SimBench CSVs takes seconds, so both are cached on
disk under ``${XDG_CACHE_HOME:-~/.cache}/cosim/``, keyed by code and simbench version.

Reference: S. Meinecke et al., "SimBench — A Benchmark Dataset of Electric Power Systems to
Compare Innovative Solutions Based on Power Flow Analysis", Energies 13(12), 3290, 2020.
"""

from __future__ import annotations

import copy
import functools
import os
import pickle
import re
import tempfile
import warnings
from pathlib import Path

import pandas as pd
from pandapower.auxiliary import pandapowerNet

DEFAULT_CODE = "1-MV-rural--0-sw"
#: Length of one SimBench profile step. [s]
PROFILE_STEP_S = 900


def cache_dir() -> Path:
    """The folder of cosim's disk cache (``$XDG_CACHE_HOME/cosim`` or ``~/.cache/cosim``)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "cosim"


def build(code: str = DEFAULT_CODE) -> pandapowerNet:
    """Return the pandapower net of SimBench ``code`` (relative profiles table dropped)."""
    return copy.deepcopy(_cached(code)[0])


def profiles(code: str = DEFAULT_CODE) -> dict[str, pd.DataFrame]:
    """Absolute profiles of SimBench ``code`` for its year at 15-minute steps.

    Returns:
        ``{"<element>.<column>": DataFrame}`` for ``load.p_mw``, ``load.q_mvar``,
        ``sgen.p_mw`` and ``storage.p_mw`` (those with any element); rows are the 35,136
        quarter hours of 2016 from 1 January 00:00, columns the element indexes of the net.
        Values [MW] or [Mvar], float32. Shared between callers: do not modify.
    """
    return _cached(code)[1]


@functools.lru_cache(maxsize=4)
def _cached(code: str) -> tuple[pandapowerNet, dict[str, pd.DataFrame]]:
    path = _cache_path(code)
    if path.is_file():
        try:
            with path.open("rb") as handle:
                return pickle.load(handle)
        except Exception:  # a truncated or stale cache is rebuilt, never fatal
            path.unlink(missing_ok=True)
    entry = _load_from_simbench(code)
    _write_atomic(path, entry)
    return entry


def _cache_path(code: str) -> Path:
    import simbench  # heavy (its data tables load on import): only for SimBench grids

    if not re.fullmatch(r"[A-Za-z0-9.+\-]+", code):
        raise ValueError(f"not a SimBench code: {code!r} (e.g. {DEFAULT_CODE!r})")
    return cache_dir() / f"simbench-{simbench.__version__}-{code}.pkl"


def _load_from_simbench(code: str) -> tuple[pandapowerNet, dict[str, pd.DataFrame]]:
    import simbench  # heavy (its data tables load on import): only for SimBench grids

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            net = simbench.get_simbench_net(code)
            absolute = simbench.get_absolute_values(net, profiles_instead_of_study_cases=True)
    except Exception as exc:
        raise ValueError(f"cannot load SimBench code {code!r}: {exc}") from exc
    tables = {}
    for (element, column), frame in absolute.items():
        if frame.shape[1]:
            tables[f"{element}.{column}"] = frame.reset_index(drop=True).astype("float32")
    net.profiles = {}
    return net, tables


def _write_atomic(path: Path, entry: object) -> None:
    """Write via a temporary file so parallel runs never read half a cache file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as handle:
        pickle.dump(entry, handle, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(handle.name, path)
