"""The package's shape (STYLE.md "One stage per module, dependencies one way"; the layout issue):

* no import cycle between modules of the installed ``cosim`` package (adapters, grid models
  and FMU build script included), counted over module-level imports;
* imports point one way along the data flow: ``cli -> studies -> run -> report, kpis ->
  folder -> scenario -> registry -> adapters -> sdk``; adapters import nothing of the core
  but ``cosim.sdk``;
* exactly one module imports mosaik;
* no imports inside functions except for the heavy optional libraries named in
  :data:`LAZY`, each with its reason at the import.
* an adapter with several modules is a package of one shape (docs/development.md, "A simulator
  with several modules"): ``params.py``, ``sim.py`` (its simulator class), physics modules, and an
  ``__init__.py`` that only re-exports; the registry tells which adapters are packages.

The graph is read from the source with ``ast`` (nothing is imported but the registry, which the
shape test asks which adapters are packages), so the test sees what a reader sees.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: repository folder -> installed package name
FOLDERS = {"cosim": "cosim", "adapters": "cosim.adapters", "grid_models": "cosim.grid_models",
           "thermal_fmus": "cosim.thermal_fmus"}

#: Layers, lowest first. A module may import its own layer or lower ones, never higher.
LAYERS = [
    ("cosim.units", "cosim.roles", "cosim.errors", "cosim.sdk"),
    ("cosim.adapters", "cosim.grid_models", "cosim.thermal_fmus"),
    ("cosim.registry",),
    ("cosim.scenario",),
    ("cosim.folder",),
    ("cosim.kpis",),
    ("cosim.report",),
    ("cosim.run",),
    ("cosim.studies", "cosim.gym", "cosim.live"),
    ("cosim.cli",),
    ("cosim", "cosim.__main__"),
]

#: Libraries that may be imported inside a function (heavy, and optional for most runs).
LAZY = {
    "mosaik": "the orchestrator: imported when a mosaik run starts",
    "matplotlib": "~0.5 s to import: only when a figure is drawn",
    "dask": "only studies that start a cluster", "distributed": "only studies that start a cluster",
    "fmpy": "ctypes and lxml: only when an FMU is described or run",
    "opendssdirect": "the DSS C-API library: only for the OpenDSS engine",
    "simbench": "its data tables: only for SimBench grids",
    "pandapower": "~1-3 s to import: only for the pandapower engine and its networks, not for OpenDSS feeders",
    "cosim.adapters.grid.pandapower_flow": "imports pandapower and lightsim2grid (above): only when a pandapower "
                                           "network is set up",
    "andes": "sympy and its generated code: only for the transient-stability adapter",
    "gymnasium": "the learning extra", "pettingzoo": "the learning extra",
    "fastapi": "the live extra: only when a live run is served (cosim serve)",
    "uvicorn": "the live extra: only when a live run is served (cosim serve)",
    "starlette": "fastapi's base, the live extra: only when a live run is served (cosim serve)",
    "prometheus_client": "the live extra: only when /metrics is built or scraped",
    "cosim.run.mosaik_engine": "imports mosaik (above)",
    "helics": "the HELICS library: only when a run joins a federation (cosim run --helics)",
    "cosim.run.federate": "imports helics (above)",
    "openleadr": "the protocols extra: only when a live run joins an OpenADR VTN (cosim serve --vtn)",
    "cosim.adapters.andes_grid.perc1": "imports andes (above): only when a Load has a native PERC1",
}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "build" in path.relative_to(ROOT / folder).parts[:-1]:
                continue
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _resolve(name: str, level: int, current: str, is_package: bool) -> str:
    if level == 0:
        return name
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _target(name: str, attr: str | None = None) -> str | None:
    """The module of ours that ``from name import attr`` (or ``import name``) loads."""
    if attr and f"{name}.{attr}" in MODULES:
        return f"{name}.{attr}"
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path, top_level: bool) -> list[tuple[str, int]]:
    """``(imported name, line)`` of the module's imports at module level (or inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found = []

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import) and inside != top_level:
                found.extend((a.name, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and inside != top_level:
                base = _resolve(child.module or "", child.level, module, is_package)
                found.extend((f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base, child.lineno)
                             for a in child.names)
            visit(child, inside)

    visit(tree, False)
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for name, _ in _imports(module, path, top_level=True):
            target = _target(name)
            if target and target != module:
                graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def _layer(module: str) -> int:
    best, rank = -1, None
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    assert rank is not None, f"{module} is in no layer: add it to LAYERS"
    return rank


def test_the_module_graph_is_read():
    """The test can fail: the graph has the edges everyone knows are there."""
    graph = _graph()
    assert "cosim.sdk" in graph["cosim.adapters.battery"]
    assert "cosim.run.recorder" in graph["cosim.run.mosaik_engine"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_imports_point_one_way():
    wrong = [f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})"
             for m, targets in _graph().items() for t in targets if _layer(t) > _layer(m)]
    assert not wrong, "\n".join(wrong)


def test_adapters_import_only_the_sdk_of_the_core():
    allowed = ("cosim.sdk", "cosim.adapters", "cosim.grid_models", "cosim.thermal_fmus")
    wrong = [f"{m} imports {t}" for m, targets in _graph().items() if m.startswith("cosim.adapters")
             for t in targets if not any(t == a or t.startswith(a + ".") for a in allowed)]
    assert not wrong, "\n".join(wrong)


def test_exactly_one_module_imports_mosaik():
    importers = sorted({m for m, path in MODULES.items() for scope in (True, False)
                        for name, _ in _imports(m, path, scope) if name == "mosaik" or name.startswith("mosaik.")})
    assert importers == ["cosim.run.mosaik_engine"]


def test_function_level_imports_only_for_heavy_libraries():
    found = []
    for module, path in MODULES.items():
        for name, line in _imports(module, path, top_level=False):
            root = name.split(".")[0]
            if name not in LAZY and root not in LAZY:
                found.append(f"{path.relative_to(ROOT)}:{line}: {name}")
            elif "#" not in path.read_text(encoding="utf-8").splitlines()[line - 1] and root != "cosim":
                found.append(f"{path.relative_to(ROOT)}:{line}: {name} (say why it is imported here)")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("generic", ["adapters", "grid_models", "thermal_fmus"])
def test_nothing_generic_is_installed(generic):
    """The repository folders install under the cosim name only (a PyPI package is called
    ``adapters``); a top-level import of the generic name must not resolve to ours."""
    import importlib.util
    import subprocess
    import sys

    code = (f"import importlib.util, sys; sys.path = [p for p in sys.path if p not in ('', {str(ROOT)!r})]; "
            f"spec = importlib.util.find_spec({generic!r}); print(spec.origin if spec else None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=True)
    assert str(ROOT) not in out.stdout, f"`import {generic}` resolves to the repository: {out.stdout}"
    assert importlib.util.find_spec(f"cosim.{generic}") is not None


def _loaded_after(statement: str) -> set[str]:
    import subprocess
    import sys

    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("statement", ["import cosim", "import cosim.sdk", "import cosim.adapters.battery"])
def test_the_package_face_is_lazy(statement):
    """STYLE.md "Small public faces": importing the face or the sdk (what every adapter does)
    loads no engine, report, pandas or pyarrow; they come with ``run``/``Session`` on first use."""
    loaded = _loaded_after(statement)
    heavy = sorted(m for m in loaded if m in {"cosim.run", "cosim.report", "cosim.kpis", "pandas", "pyarrow", "mosaik"})
    assert not heavy, f"`{statement}` loads {heavy}"


def test_the_lazy_face_serves_run_session_and_the_package():
    """``cosim.run`` is the function users call and the package of the engines, in either order."""
    import subprocess
    import sys

    code = ("import cosim, cosim.run.session as s; assert callable(cosim.run); "
            "assert cosim.Session is s.Session; assert cosim.RunResult is cosim.run.RunResult; "
            "assert callable(cosim.load_scenario); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "ok", out.stderr


# -- the shape of an adapter with several modules (docs/development.md, "A simulator with several modules") --
def shape_problems(folder: Path, package: str) -> list[str]:
    """What keeps the adapter package ``package`` in ``folder`` from the documented shape: ``params.py``
    (what a scenario may say), ``sim.py`` (the adapter), the physics in modules of their own, and an
    ``__init__.py`` that only re-exports its own modules' names. Inside the package imports point one
    way: nothing but ``__init__.py`` imports ``sim.py`` (params and physics stand without the adapter),
    and no module imports the package's face."""
    problems = [f"{folder.name}/{name} is missing" for name in ("__init__.py", "params.py", "sim.py")
                if not (folder / name).is_file()]
    if problems:
        return problems
    init = ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))
    for node in init.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue  # the docstring
        if isinstance(node, ast.ImportFrom) and (node.module == "__future__" or node.level > 0
                                                 or (node.module or "").startswith(package + ".")):
            continue
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            continue
        problems.append(f"{folder.name}/__init__.py:{node.lineno}: only re-exports of the package's own modules "
                        f"belong here (move this {type(node).__name__} into params.py, sim.py or a physics module)")
    if not any(isinstance(n, ast.ClassDef) for n in ast.parse((folder / "params.py").read_text(encoding="utf-8")).body):
        problems.append(f"{folder.name}/params.py defines no params class")
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(folder).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        module = ".".join([package, *parts])
        if module == package:
            continue
        for scope in (True, False):
            for name, line in _imports(module, path, top_level=scope):
                if name == f"{package}.sim" or name.startswith(f"{package}.sim."):
                    problems.append(f"{path.relative_to(folder.parent)}:{line} imports the adapter ({package}.sim): "
                                    "only __init__.py does")
                elif name == package:
                    problems.append(f"{path.relative_to(folder.parent)}:{line} imports the package's face "
                                    f"({package}): import the module that defines the name")
    return problems


def _adapter_packages() -> dict[str, tuple[Path, str, str]]:
    """Every adapter the registry finds whose target is a package of ours: name -> (folder, package,
    module of its simulator class)."""
    from cosim import registry

    found = {}
    for name, target in registry.available().items():
        package = target.partition(":")[0]
        path = MODULES.get(package)
        if path is not None and path.name == "__init__.py":
            found[name] = (path.parent, package, registry.adapter_class(name).__module__)
    return found


def test_every_adapter_with_several_modules_has_the_documented_shape():
    packages = _adapter_packages()
    assert {"datacenter", "fmu", "grid", "ofo"} <= set(packages)  # the test can fail: it sees the packages
    problems = [text for folder, package, _ in packages.values() for text in shape_problems(folder, package)]
    problems += [f"{name}: its simulator class is defined in {module}, not in {package}.sim"
                 for name, (_, package, module) in packages.items() if module != f"{package}.sim"]
    assert not problems, "\n".join(problems)


def test_the_shape_check_finds_each_departure(tmp_path):
    """A package in the old shape (its adapter in ``__init__.py``, no params module, a physics module
    that imports the adapter) gets one line per departure."""
    folder = tmp_path / "stack"
    folder.mkdir()
    (folder / "__init__.py").write_text('"""A stack."""\nfrom cosim.sdk import SingleModelSim\n\n\n'
                                        'class StackSim(SingleModelSim):\n    pass\n')
    (folder / "physics.py").write_text("from cosim.adapters.stack.sim import StackSim\n"
                                       "from cosim.adapters.stack import StackSim as Again\n")
    assert shape_problems(folder, "cosim.adapters.stack") == ["stack/params.py is missing", "stack/sim.py is missing"]
    (folder / "params.py").write_text("X = 1\n")
    (folder / "sim.py").write_text("from cosim.adapters.stack.params import X\n")
    found = shape_problems(folder, "cosim.adapters.stack")
    assert len(found) == 5, found
    assert "stack/__init__.py:2: only re-exports" in found[0] and "ImportFrom" in found[0]
    assert "stack/__init__.py:5:" in found[1] and "ClassDef" in found[1]
    assert found[2] == "stack/params.py defines no params class"
    assert found[3].startswith("stack/physics.py:1 imports the adapter")
    assert found[4].startswith("stack/physics.py:2 imports the package's face")


def test_no_adapter_keeps_its_helpers_beside_it():
    """An adapter's own helper modules live in its package, not beside it as ``_<adapter>_*.py``
    (the shape above); shared helpers (``_event_csv.py``, ``_bounded_read.py``) name no adapter."""
    folder = ROOT / "adapters"
    adapters = {p.stem for p in folder.rglob("*.py") if not p.stem.startswith("_")}
    adapters |= {p.parent.name for p in folder.rglob("__init__.py")}
    beside = sorted(str(p.relative_to(ROOT)) for p in folder.rglob("_*.py")
                    if any(p.stem.startswith(f"_{name}_") for name in adapters))
    assert not beside, "helpers of one adapter beside it (move them into its package): " + ", ".join(beside)


def adapters_using(graph: dict[str, set[str]], helpers: set[str], adapter_of: dict[str, str]) -> dict[str, set[str]]:
    """Per helper module, the adapters that import it, directly or through other helpers
    (``graph``: module -> the modules it imports; ``adapter_of``: module -> the adapter it is part of)."""
    using = {helper: {adapter_of[m] for m, targets in graph.items() if helper in targets and m in adapter_of}
             for helper in helpers}
    grown = True
    while grown:  # a helper's adapters are also those of every helper that imports it
        grown = False
        for importer in helpers:
            for helper in graph.get(importer, set()) & helpers:
                if not using[importer] <= using[helper]:
                    using[helper] |= using[importer]
                    grown = True
    return using


def _adapter_modules() -> dict[str, str]:
    """Every module of ours that is part of an adapter the registry finds -> that adapter's name (a package
    adapter: each of its modules)."""
    from cosim import registry

    found = {}
    for name, target in registry.available().items():
        top = target.partition(":")[0]
        for module in MODULES:
            if module == top or (MODULES.get(top, ROOT).name == "__init__.py" and module.startswith(top + ".")):
                found[module] = name
    return found


def _full_graph() -> dict[str, set[str]]:
    """Who imports whom among our modules, at module level and inside functions (a lazily imported helper counts)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for top_level in (True, False):
            for name, _ in _imports(module, path, top_level):
                target = _target(name)
                if target and target != module:
                    graph[module].add(target)
    return graph


def test_no_helper_beside_the_adapters_serves_only_one():
    """A ``_*.py`` beside the adapters (not inside an adapter's package) that only one adapter imports, directly or
    through other helpers, is that adapter's: it belongs in its package (a single-file adapter becomes one). Its
    name need not say so (``_andes_perc1.py`` and ``_perc1_record.py`` served only ``andes_grid``)."""
    adapter_of = _adapter_modules()
    helpers = {m for m in MODULES if m.startswith("cosim.adapters.") and m.rpartition(".")[2].startswith("_")
               and m not in adapter_of}
    using = adapters_using(_full_graph(), helpers, adapter_of)
    assert {"cosim.adapters._event_csv", "cosim.adapters._bounded_read"} <= helpers  # the test sees the helpers
    assert len(using["cosim.adapters._bounded_read"]) > 1
    lone = sorted(f"{MODULES[h].relative_to(ROOT)} (only {next(iter(a))} imports it)" for h, a in using.items()
                  if len(a) == 1)
    assert not lone, "helpers of one adapter beside it (move them into its package): " + ", ".join(lone)


def test_the_helper_count_follows_helpers_through_helpers():
    """``_h`` is imported by adapter x only, ``_g`` only by ``_h`` (so x's too), ``_s`` by adapters y and z."""
    graph = {"a.x": {"a._h"}, "a._h": {"a._g"}, "a.y": {"a._s"}, "a.z": {"a._s", "a._g"}, "a._s": set(), "a._g": set()}
    using = adapters_using(graph, {"a._h", "a._g", "a._s"}, {"a.x": "x", "a.y": "y", "a.z": "z"})
    assert using == {"a._h": {"x"}, "a._g": {"x", "z"}, "a._s": {"y", "z"}}
    del graph["a.z"]
    assert adapters_using(graph, {"a._h", "a._g", "a._s"}, {"a.x": "x", "a.y": "y"})["a._g"] == {"x"}
