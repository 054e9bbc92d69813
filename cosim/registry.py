"""Adapter registry: adapter names -> ``cosim.adapters.<module>:<Class>``, found by scanning.

An adapter is a module (or package) under ``adapters/`` (installed as ``cosim.adapters``)
that defines one subclass of :class:`cosim.sdk.CosimSim`; its name in a scenario is the
module's name. A package defines it in its ``sim.py`` and re-exports it from its ``__init__.py``
(docs/development.md, "A simulator with several modules"; checked by tests/test_layout.py). A package without such a class (``adapters/controllers/``) is a folder of
adapters, one per module. Modules whose names start with ``_`` are skipped. Every folder on
``cosim.adapters.__path__`` is scanned, and installed packages can add adapters through the
``cosim.adapters`` entry-point group (``name = "module:Class"``). No list is kept by hand:
a new file is found the next time the registry is read (:func:`refresh` after adding one
while a process runs).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
from functools import lru_cache
from importlib.metadata import entry_points
from types import ModuleType

from cosim import adapters
from cosim.errors import UnknownAdapterError
from cosim.sdk import CosimSim

__all__ = ["UnknownAdapterError", "adapter_class", "available", "refresh", "register", "target", "unregister"]

_EXTRA: dict[str, str] = {}


def register(name: str, target: str) -> None:
    """Register an adapter by ``module:Class`` (plugins and tests)."""
    _EXTRA[name] = target
    adapter_class.cache_clear()


def unregister(name: str) -> None:
    """Remove an adapter registered with :func:`register`."""
    _EXTRA.pop(name, None)
    adapter_class.cache_clear()


def refresh() -> None:
    """Forget what was found: the next look-up scans the adapter folders again."""
    _scanned.cache_clear()
    adapter_class.cache_clear()


def _sim_class_in(module: ModuleType) -> type[CosimSim] | None:
    for _, obj in inspect.getmembers(module, inspect.isclass):
        if issubclass(obj, CosimSim) and obj is not CosimSim and obj.__module__.startswith(module.__name__):
            return obj
    return None


def _scan(package: ModuleType) -> dict[str, str]:
    found: dict[str, str] = {}
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        short = info.name.rsplit(".", 1)[-1]
        if short.startswith("_"):
            continue
        module = importlib.import_module(info.name)
        cls = _sim_class_in(module)
        if cls is not None:
            found[short] = f"{info.name}:{cls.__name__}"
        elif info.ispkg:
            found.update(_scan(module))
    return found


def _direct(name: str) -> str | None:
    """``adapters/<name>.py`` without scanning (and importing) every other adapter."""
    if name.startswith("_") or not name.isidentifier():
        return None
    module_name = f"{adapters.__name__}.{name}"
    if importlib.util.find_spec(module_name) is None:
        return None
    cls = _sim_class_in(importlib.import_module(module_name))
    return f"{module_name}:{cls.__name__}" if cls else None


@lru_cache(maxsize=1)
def _scanned() -> dict[str, str]:
    found = _scan(adapters)
    for ep in entry_points(group="cosim.adapters"):
        found.setdefault(ep.name, ep.value)
    return found


def available() -> dict[str, str]:
    """All adapter names with their ``module:Class`` targets, sorted by name."""
    return dict(sorted({**_scanned(), **_EXTRA}.items()))


def target(name: str) -> str:
    """The ``module:Class`` of adapter ``name`` (what mosaik's sim config takes)."""
    if name in _EXTRA:
        return _EXTRA[name]
    direct = _direct(name)
    if direct is not None:
        return direct
    known = available()
    if name not in known:
        raise UnknownAdapterError(f"unknown adapter {name!r}; known: {', '.join(known)}")
    return known[name]


@lru_cache(maxsize=None)
def adapter_class(name: str) -> type[CosimSim]:
    """Import and return the simulator class of adapter ``name``."""
    module_name, _, class_name = target(name).partition(":")
    return getattr(importlib.import_module(module_name), class_name)
