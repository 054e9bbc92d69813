"""The registry finds adapters by scanning adapters/, with no list to edit."""

from __future__ import annotations

import pytest

from adapters._base import CosimSim
from cosim import registry


def test_every_adapter_module_is_found():
    import pkgutil

    import adapters

    modules = {m.name for m in pkgutil.iter_modules(adapters.__path__) if not m.name.startswith("_")}
    found = registry.available()
    assert modules <= set(found), modules - set(found)
    for name, target in found.items():
        assert target.startswith("adapters.") and ":" in target
        assert issubclass(registry.adapter_class(name), CosimSim)


def test_new_adapter_file_is_picked_up(tmp_path, monkeypatch):
    import adapters

    (tmp_path / "brand_new.py").write_text(
        "from adapters._base import CosimSim, model_meta\n"
        "class BrandNewSim(CosimSim):\n"
        "    META = {'api_version': '3.0', 'type': 'time-based', 'models': {'X': model_meta(outputs=['p_mw'])}}\n"
    )
    monkeypatch.setattr(adapters, "__path__", [*adapters.__path__, str(tmp_path)])
    registry._scanned.cache_clear()
    registry.adapter_class.cache_clear()
    try:
        assert registry.target("brand_new") == "adapters.brand_new:BrandNewSim"
    finally:
        registry._scanned.cache_clear()
        registry.adapter_class.cache_clear()


def test_unknown_adapter_names_the_known_ones():
    with pytest.raises(registry.UnknownAdapterError, match="known: .*recorder"):
        registry.target("no_such_adapter")
