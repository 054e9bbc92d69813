"""A pandapower JSON network is read as data: only the types a network is made of.

pandapower's JSON reader rebuilds objects from ``{"_module": ..., "_class": ..., "_object": ...}``
entries, and imports ``_module`` before it checks anything: an entry naming any module makes
the reader import it, and ``{"_module": "builtins", "_class": "function", "_object": "eval"}``
puts Python's ``eval`` into the net. :func:`json_net_problem` reads the file with Python's own
``json`` module first (a nesting limit included) and walks every entry, also inside the JSON
strings pandapower stores tables and controllers in, and accepts only the ``(module, class)``
pairs in :func:`allowed_types`: those pandapower writes for a network (every catalogue network
and SimBench grid saved with ``pandapower.to_json``; tests/grid_models/test_json_guard.py checks
it stays so).
"""

from __future__ import annotations

import json
from functools import cache
from inspect import isclass
from pathlib import Path

#: The (module, class) pairs pandapower writes for a network: the net, its tables (DataFrame,
#: Series) and numpy scalars. Controllers (pandapower's own classes) are added by :func:`allowed_types`.
NET_TYPES = frozenset({
    ("pandapower.auxiliary", "pandapowerNet"),
    ("pandas.core.frame", "DataFrame"), ("pandas.core.series", "Series"),
    *(("numpy", name) for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                   "float16", "float32", "float64", "bool", "bool_", "str_", "complex128",
                                   "array")),
})
#: pandapower classes a net may hold that write files when run: never read from a user's file.
WRITING_CLASSES = frozenset({"OutputWriter"})
#: Deepest nesting a network file needs (pandapower writes ~6 levels; a JSON string inside counts on). [-]
MAX_DEPTH = 64
#: JSON strings inside JSON strings (a net's tables, a table's cells) followed this deep. [-]
MAX_STRING_LEVELS = 8


@cache
def allowed_types() -> frozenset[tuple[str, str]]:
    """:data:`NET_TYPES` and pandapower's controller and data-source classes (``net.controller``)."""
    import pandapower.control as control  # ~1-3 s to import pandapower: only when a JSON net is read
    import pandapower.timeseries as timeseries  # (as above)
    from pandapower.io_utils import JSONSerializableClass  # (as above)

    own = {(v.__module__, v.__name__) for module in (control, timeseries) for v in vars(module).values()
           if isclass(v) and issubclass(v, JSONSerializableClass) and v.__name__ not in WRITING_CLASSES}
    return NET_TYPES | own


def _allowed(module: object, cls: object) -> bool:
    return isinstance(module, str) and isinstance(cls, str) and (module, cls) in allowed_types()


def json_net_problem(path: Path, text: str | None = None) -> str:
    """Why the pandapower JSON file ``path`` must not be handed to pandapower's reader (a type a network
    does not need, nesting too deep, not JSON), naming the JSON path of the entry; empty when it may."""
    path = Path(path)
    if text is None:
        text = path.read_text(encoding="utf-8", errors="replace")
    stack: list[tuple[object, str, int, int]] = []
    try:
        stack.append((json.loads(text), "$", 0, 0))
    except RecursionError:
        return f"nested deeper than {MAX_DEPTH} levels (a network is not)"
    except json.JSONDecodeError as exc:
        return f"not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
    while stack:
        value, where, depth, levels = stack.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels at {where} (a network is not)"
        if isinstance(value, dict):
            if "_module" in value or "_class" in value:
                module, cls = value.get("_module"), value.get("_class")
                if not _allowed(module, cls):
                    return (f"{where} names the Python type {module!r}.{cls!r}, which a pandapower network does not "
                            "need (cosim reads networks as data: only tables, numbers and geometry)")
            stack.extend((v, f"{where}.{k}", depth + 1, levels) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]", depth + 1, levels) for i, v in enumerate(value))
        elif isinstance(value, str) and value.lstrip()[:1] in ("{", "["):  # JSON in a string (a table; its
            # keys may be written with escapes, "\u005fmodule", so every such string is read)
            if levels >= MAX_STRING_LEVELS:
                return f"{where}: JSON inside JSON more than {MAX_STRING_LEVELS} levels deep (a network is not)"
            try:
                inner = json.loads(value)
            except RecursionError:
                return f"{where}: nested deeper than {MAX_DEPTH} levels (a network is not)"
            except ValueError:  # a string that is not JSON: pandapower reads it as text
                continue
            stack.append((inner, f"{where}(json)", depth + 1, levels + 1))
    return ""
