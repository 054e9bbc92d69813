"""Every number in kpis.json carries its unit in its key (non-negotiable 5): the key itself, or,
for a table keyed by labels (months, entity ids), the key of the table."""

from __future__ import annotations

from typing import Any

from cosim.units import has_unit_suffix


def unitless_kpis(kpis: dict[str, Any], path: str = "", parent: str = "") -> list[str]:
    """Dotted paths of numeric KPIs whose key (and whose table's key) has no unit suffix."""
    found = []
    for key, value in kpis.items():
        where = f"{path}{key}"
        if isinstance(value, dict):
            found += unitless_kpis(value, where + ".", key)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    found += unitless_kpis(item, f"{where}[{i}].", key)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if not (has_unit_suffix(str(key)) or has_unit_suffix(str(parent))):
                found.append(where)
    return found
