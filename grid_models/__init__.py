"""The grid model catalogue: one module per network, each with ``build(**params) -> net``.

A module in this package whose name does not start with ``_`` is a catalogue entry; its
docstring's first line is the description. Adding a network is adding one file. A module
may also define ``profiles(**params)`` returning background load and generation time
series (see :func:`load_profiles`).

An OpenDSS circuit file ``<name>.dss`` in this package is a catalogue entry too, for the
grid adapter's ``engine = "opendss"`` (its first comment line is the description):
:func:`dss_file` resolves such a name, or the path of any user ``.dss`` file.

:func:`load_network` accepts a catalogue name (``"ieee33"``), ``"simbench:<code>"`` or the
path of a pandapower JSON file.
"""

from __future__ import annotations

import copy as _copy
import importlib
import json
import pkgutil
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from cosim.grid_models._json_guard import json_net_problem

if TYPE_CHECKING:
    import pandas as pd
    from pandapower.auxiliary import pandapowerNet

_NETS: dict[tuple[str, str, str], pandapowerNet] = {}


def file_version(path: str | Path) -> str:
    """A file's modification time [ns] and size [bytes] (``""`` when it is not a file): a cache of
    what was read from it is stale once this changes (a notebook that edits its feeder between runs)."""
    path = Path(path)
    if not path.is_file():
        return ""
    stat = path.stat()
    return f"{stat.st_mtime_ns}:{stat.st_size}"


@cache
def catalogue() -> dict[str, str]:
    """Catalogue names and one-line descriptions, found by scanning this package."""
    entries = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = _module(info.name)
        if callable(getattr(module, "build", None)):
            entries[info.name] = (module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else ""
    for name, path in dss_feeders().items():
        entries.setdefault(name, _dss_description(path))
    return dict(sorted(entries.items()))


def dss_feeders() -> dict[str, Path]:
    """OpenDSS circuit files of the catalogue: ``{name: path}`` of ``*.dss`` in this package."""
    found: dict[str, Path] = {}
    for folder in __path__:
        for path in sorted(Path(folder).glob("*.dss")):
            if not path.name.startswith("_"):
                found.setdefault(path.stem, path)
    return found


def engine_of(spec: str) -> str:
    """The engine a network spec needs: ``"opendss"`` for a ``.dss`` feeder, else ``"pandapower"``."""
    text = str(spec).strip()
    return "opendss" if text.lower().endswith(".dss") or text in dss_feeders() else "pandapower"


def dss_file(spec: str, base_dir: str | Path | None = None) -> Path:
    """The OpenDSS file ``spec`` names: a catalogue feeder (``"ieee13"``) or a ``.dss`` path.

    Raises:
        ValueError: unknown name or missing file (the message lists the OpenDSS feeders).
    """
    text = str(spec).strip()
    feeders = dss_feeders()
    if text in feeders:
        return feeders[text]
    if text.lower().endswith(".dss"):
        path = Path(text).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        if not path.is_file():
            raise ValueError(f"OpenDSS file not found: {path.resolve()}")
        return path.resolve()
    raise ValueError(f"network {text!r} is not an OpenDSS feeder; with engine = \"opendss\" give one of "
                     f"{', '.join(feeders)} or the path of a .dss file")


def _dss_description(path: Path) -> str:
    for line in path.read_text(errors="replace").splitlines():
        text = line.strip().lstrip("!/").strip()
        if text:
            return text
    return ""


def network_key(spec: str, base_dir: str | Path | None = None, **params: Any) -> tuple[str, str, str]:
    """What :func:`load_network` would build, as a hashable key (a JSON file's version included)."""
    kind, target, params = _resolve(spec, base_dir, params)
    version = file_version(target) if kind == "json" else ""
    return (f"{kind}:{target}", json.dumps(params, sort_keys=True, default=str), version)


def load_network(spec: str, base_dir: str | Path | None = None, *, copy: bool = True,
                 **params: Any) -> pandapowerNet:
    """Build (or fetch from the in-process cache) the network ``spec`` names.

    Args:
        spec: a catalogue name (``"ieee33"``), ``"simbench:<code>"`` or the path of a
            pandapower JSON file (relative paths resolve from ``base_dir``).
        base_dir: folder of the scenario file, for relative JSON paths.
        copy: ``False`` returns the cached net itself, shared and read-only (for checks that
            only read it): it must not be modified nor handed to a solver.
        **params: passed to the catalogue module's ``build``.

    Returns:
        A fresh deep copy of the net (callers may modify it), or the shared net with ``copy=False``.

    Raises:
        ValueError: unknown name, missing file or bad parameters.
    """
    kind, target, resolved = _resolve(spec, base_dir, params)
    key = (f"{kind}:{target}", json.dumps(resolved, sort_keys=True, default=str),
           file_version(target) if kind == "json" else "")  # network_key's
    if key not in _NETS:
        _NETS[key] = _build(kind, target, resolved)
    return _copy.deepcopy(_NETS[key]) if copy else _NETS[key]


def load_profiles(spec: str, base_dir: str | Path | None = None, **params: Any) -> dict[str, pd.DataFrame] | None:
    """Background profiles of the network ``spec`` names, or ``None`` when it has none.

    Returns:
        ``{"<element>.<column>": DataFrame}`` (e.g. ``"load.p_mw"``): rows at a fixed step
        from 1 January 00:00 of the profile year (SimBench: 15 min, 366 days), columns
        the element indexes of the net. Shared, read-only: do not modify.
    """
    kind, target, params = _resolve(spec, base_dir, params)
    if kind != "module":
        return None
    module = _module(target)
    return module.profiles(**params) if callable(getattr(module, "profiles", None)) else None


def profile_step_s(spec: str) -> int | None:
    """Step of the profiles of ``spec``. [s]"""
    kind, target, _ = _resolve(spec, None, {})
    return getattr(_module(target), "PROFILE_STEP_S", None) if kind == "module" else None


def _resolve(spec: str, base_dir, params: dict) -> tuple[str, str, dict]:
    """Classify ``spec`` as ("module", name, params) or ("json", path, {})."""
    text = str(spec).strip()
    if text.lower().startswith("simbench:"):
        return "module", "simbench", {**params, "code": text.split(":", 1)[1]}
    pandapower_nets = ", ".join(n for n in catalogue() if n not in dss_feeders())
    if text in dss_feeders() or text.lower().endswith(".dss"):
        raise ValueError(
            f"network {text!r} is an OpenDSS feeder: set engine = \"opendss\" in its [sims.<id>] table; "
            f"the pandapower engine takes {pandapower_nets}, 'simbench:<code>' or a pandapower JSON file path"
        )
    if text in catalogue():
        return "module", text, params
    if text.lower().endswith(".json"):
        path = Path(text).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        if not path.is_file():
            raise ValueError(f"network file not found: {path.resolve()}")
        if params:
            raise ValueError(f"network_params {sorted(params)} apply to catalogue networks, not to JSON file {text}")
        return "json", str(path.resolve()), {}
    known = ", ".join(catalogue())
    raise ValueError(
        f"unknown network {text!r}; known: {known}, 'simbench:<code>' (e.g. simbench:1-MV-rural--0-sw) "
        "or a pandapower JSON file path ending in .json"
    )


def _build(kind: str, target: str, params: dict) -> pandapowerNet:
    if kind == "json":
        import pandapower as pp  # ~1-3 s to import: only for pandapower networks, not OpenDSS feeders

        fix = "give a file written by pandapower.to_json(net, path)"
        reason = _not_a_net(Path(target))
        if reason:
            raise ValueError(f"{Path(target).name}: not a pandapower JSON network ({reason}); {fix}")
        try:
            return pp.from_json(target)
        except Exception as exc:  # pandapower raises many kinds for a file that is not a net
            raise ValueError(f"{Path(target).name}: not a pandapower JSON network ({type(exc).__name__}: {exc}); "
                             f"{fix}") from exc
    try:
        return _module(target).build(**params)
    except TypeError as exc:
        raise ValueError(f"network {target!r}: bad network_params {params}: {exc}") from exc


def _not_a_net(path: Path) -> str:
    """Why ``path`` cannot be a pandapower net before pandapower reads it (not JSON, or JSON of
    something else), or ``""``."""
    text = path.read_text(encoding="utf-8", errors="replace")
    problem = json_net_problem(path, text)  # not JSON, too deep, or a Python type a net does not need
    if problem:
        return problem
    data = json.loads(text)
    if not isinstance(data, dict):
        return f"JSON, but a {type(data).__name__}, not a net"
    if "pandapowerNet" not in str(data.get("_class", "")) and "bus" not in data:  # older files: a table dict
        return f"JSON, but an object with keys {', '.join(list(data)[:5]) or 'none'}: no net, no bus table"
    return ""


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")
