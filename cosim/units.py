"""Unit suffixes: every attribute, key and column name ends with its unit.

The rule is the one pandapower follows (``p_mw``, ``vm_pu``, ``loading_pct``): the last
underscore-separated token(s) of a name state its unit. A few dimensionless names are
allowed as they are (counts start with ``n_``; flags are listed in ``DIMENSIONLESS``). A
unit without a listed suffix may be written with its symbols (``accel_m_s2``, see
``UNIT_SYMBOLS``): the FMU adapter names such variables after their unit string.
"""

from __future__ import annotations

import functools
import re

#: Unit suffixes understood across cosim, longest first so ``_kg_s`` wins over ``_s``.
UNIT_SUFFIXES: tuple[str, ...] = tuple(
    sorted(
        {
            # power, energy, reactive power
            "mw", "kw", "w", "gw", "mvar", "kvar", "var", "mva", "kva",
            "mwh", "kwh", "wh", "gwh", "j", "mj", "gj",
            # electrical
            "pu", "kv", "v", "ka", "a", "hz", "deg", "rad",
            # ratios
            "frac", "pct", "ratio",
            # temperature, flow, mass, volume
            "c", "k", "kw_k", "w_k", "mw_k", "mj_k", "j_k", "kg_s", "m3_s", "l_s", "kg", "m3", "l", "m3_h",
            # time
            "s", "ms", "us", "min", "h", "utc",
            # irradiance, speed, length, pressure
            "w_m2", "wh_m2", "m_s", "m", "km", "pa", "kpa", "bar",
            # signals: carbon, money
            "g_kwh", "kg_mwh", "t", "kg_co2", "t_co2", "usd", "usd_mwh", "usd_mw", "eur", "eur_mwh",
            # throughput and counts per time
            "per_s", "tokens_per_s", "gpu_h", "count",
        },
        key=len,
        reverse=True,
    )
)

#: Unit symbols a *derived* suffix is built from: an FMU unit string cosim has no suffix for
#: becomes ``_`` + its symbols (``m/s2`` -> ``_m_s2``, ``kg/m3`` -> ``_kg_m3``, ``mol/s`` ->
#: ``_mol_s``). Each token of such a suffix is one of these, optionally with an integer
#: exponent (``s2``, ``m3``). SI symbols and their common prefixed forms, lower case.
UNIT_SYMBOLS: frozenset[str] = frozenset({
    "m", "s", "g", "kg", "a", "k", "mol", "cd", "hz", "n", "pa", "j", "w", "c", "v", "f", "ohm", "wb",
    "t", "h", "lm", "lx", "bq", "gy", "sv", "kat", "rad", "sr", "l", "min", "bar", "deg", "degc",
    "km", "cm", "mm", "um", "nm", "mg", "ms", "us", "ns", "kn", "kpa", "mpa", "gpa", "hpa", "kj", "mj",
    "gj", "kw", "mw", "gw", "wh", "kwh", "mwh", "kv", "mv", "ka", "ma", "khz", "mhz", "ml", "kmol", "mmol",
    "ppm", "ppb", "rpm", "rev", "pct",
})

#: Names that carry no unit on purpose (flags and states).
DIMENSIONLESS: frozenset[str] = frozenset({"converged", "in_service", "event_active"})


#: The listed suffixes as a set, and the most underscore-separated tokens any of them has.
_SUFFIX_SET: frozenset[str] = frozenset(UNIT_SUFFIXES)
_SUFFIX_TOKENS_MAX: int = max(s.count("_") + 1 for s in UNIT_SUFFIXES)
_SYMBOL_TOKEN = re.compile(r"[a-z]+\d*")


@functools.lru_cache(maxsize=65536)
def is_flag(name: str) -> bool:
    """An on/off quantity (``in_service``, ``event_active``...): a dimensionless name, not a count."""
    return any(name == d or name.endswith("_" + d) for d in DIMENSIONLESS)


def unit_of(name: str) -> str | None:
    """Return the unit suffix of ``name``, or ``None`` when it has none.

    Args:
        name: an attribute, key or column name such as ``p_mw`` or ``t_supply_c``.
    """
    if name.startswith("n_") or is_flag(name):
        return ""
    # The longest listed suffix that ``name`` ends with after an underscore and at least one
    # character: two such suffixes of one name nest, so the longest is the one of most tokens.
    tokens = name.split("_")
    for n in range(min(_SUFFIX_TOKENS_MAX, len(tokens) - 1), 0, -1):
        suffix = "_".join(tokens[-n:])
        if suffix in _SUFFIX_SET and len(name) > len(suffix) + 1:
            return suffix
    return _derived_unit(name)


def _derived_unit(name: str) -> str | None:
    """The derived suffix of ``name`` (trailing tokens that are :data:`UNIT_SYMBOLS` with optional
    exponents, a non-empty name before them), or None. Only asked when no listed suffix fits,
    so a name with a listed suffix keeps it."""
    tokens = name.split("_")
    n = 0
    while n < len(tokens) - 1 and _SYMBOL_TOKEN.fullmatch(tokens[-1 - n]) \
            and tokens[-1 - n].rstrip("0123456789") in UNIT_SYMBOLS:
        n += 1
    if n == 0 or not "".join(tokens[:-n]):
        return None
    return "_".join(tokens[-n:])


def has_unit_suffix(name: str) -> bool:
    """True when ``name`` ends with a known unit suffix or is a known dimensionless name."""
    return unit_of(name) is not None
