"""The registry finds adapters by scanning adapters/, with no list to edit."""

from __future__ import annotations

import pytest

from cosim.sdk import CosimSim
from cosim import registry


def _adapter_modules(package) -> set[str]:
    """Public modules with a CosimSim subclass; folders without one are searched inside."""
    import importlib
    import pkgutil

    names = set()
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        short = info.name.rsplit(".", 1)[-1]
        if short.startswith("_"):
            continue
        module = importlib.import_module(info.name)
        if any(isinstance(v, type) and issubclass(v, CosimSim) and v is not CosimSim for v in vars(module).values()):
            names.add(short)
        elif info.ispkg:
            names |= _adapter_modules(module)
    return names


def test_every_adapter_module_is_found():
    from cosim import adapters

    modules = _adapter_modules(adapters)
    assert {"grid", "signals", "datacenter", "dr_responder"} <= modules  # packages and the controllers folder
    found = registry.available()
    assert modules <= set(found), modules - set(found)
    for name, target in found.items():
        assert target.startswith("cosim.adapters.") and ":" in target
        assert issubclass(registry.adapter_class(name), CosimSim)


def test_new_adapter_file_is_picked_up(tmp_path, monkeypatch):
    from cosim import adapters

    (tmp_path / "brand_new.py").write_text(
        "from cosim.sdk import CosimSim, model_meta\n"
        "class BrandNewSim(CosimSim):\n"
        "    META = {'api_version': '3.0', 'type': 'time-based',\n"
        "            'models': {'X': model_meta(outputs=['p_mw'], role='load')}}\n"
    )
    monkeypatch.setattr(adapters, "__path__", [*adapters.__path__, str(tmp_path)])
    registry._scanned.cache_clear()
    registry.adapter_class.cache_clear()
    try:
        assert registry.target("brand_new") == "cosim.adapters.brand_new:BrandNewSim"
    finally:
        registry._scanned.cache_clear()
        registry.adapter_class.cache_clear()


def test_unknown_adapter_names_the_known_ones():
    with pytest.raises(registry.UnknownAdapterError, match="known: .*battery.*signals"):
        registry.target("no_such_adapter")
