"""The import structure of python/cepam, read from the sources with ast.

- One door: only cepam._native imports the compiled modules cepam._core and
  cepam._cuda; every other module takes them from the door.
- The binding's main module holds exactly the entry points the library calls;
  the test hooks are in cepam._core.testing, which the library never uses.
- No import circle: the graph of imports between cepam's modules is acyclic,
  both of the imports that run when a module is imported and of those plus
  the deferred ones (inside functions), which only hide a circle from the
  interpreter.

What counts as an edge A -> B (B a module of python/cepam):
- ``import cepam.b``, ``from cepam import b``, ``from . import b``,
  ``from .b import name`` and ``from . import name`` with name not a submodule
  (that is an import of the package's ``__init__``); relative imports are
  resolved against A's package.
- At import time: statements at module level, inside module-level
  ``if``/``try``/``with`` blocks and class bodies; deferred: inside functions
  (run on first call).  Never those under ``if TYPE_CHECKING:`` (never run).
- A module loaded by name (``importlib.import_module("...")``) is not an
  edge: cepam.fl.engines loads each engine's runner so, which lets
  cepam.fl.config read the engine names while the engines import config.
- The implicit import of a parent package (importing cepam.fl.x first imports
  cepam.fl) is not an edge: every package would otherwise form a circle with
  the submodules its ``__init__`` re-exports.

The door check counts every import of the native modules: deferred ones and
those under ``if TYPE_CHECKING:`` too.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "python"
PACKAGE = ROOT / "cepam"
NATIVE = {"cepam._core", "cepam._cuda"}
DOOR = "cepam._native"


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


SOURCES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
# the compiled modules have no source but are modules of the package
MODULES = set(SOURCES) | NATIVE


def _is_package(name: str) -> bool:
    return name in SOURCES and SOURCES[name].name == "__init__.py"


def _targets(name: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute names of the modules that an import statement in module
    `name` imports (cepam's or not)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = name if _is_package(name) else name.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    found = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        found.append(sub if sub in MODULES else base)
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(name: str, *, deferred: bool, type_only: bool = False) -> list[tuple[int, str]]:
    """(line, imported module) of the imports in module `name`: those that run
    when the module is imported, with deferred=True also those inside
    functions, with type_only=True also those under ``if TYPE_CHECKING:``."""
    tree = ast.parse(SOURCES[name].read_text(), filename=str(SOURCES[name]))
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.extend((child.lineno, t) for t in _targets(name, child))
            elif not deferred and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                     ast.Lambda)):
                continue
            elif not type_only and isinstance(child, ast.If) and _is_type_checking(child):
                for stmt in child.orelse:
                    visit(stmt)
            else:
                visit(child)

    visit(tree)
    return found


def _graph(*, deferred: bool) -> dict[str, set[str]]:
    return {name: {t for _, t in _imports(name, deferred=deferred) if t in SOURCES and t != name}
            for name in SOURCES}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of the graph (a list of modules, the first repeated at the
    end), or None when the graph is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_sources_are_found():
    assert {"cepam", "cepam.codec", "cepam.fl.experiment", DOOR} <= set(SOURCES)


def test_import_resolution():
    # relative, absolute, package and submodule forms resolve to cepam's modules
    name = "cepam.fl.experiment"
    parse = lambda src: _targets(name, ast.parse(src).body[0])  # noqa: E731
    assert parse("from . import config") == ["cepam.fl.config"]
    assert parse("from .config import ENGINES") == ["cepam.fl.config"]
    assert parse("from .. import errors") == ["cepam.errors"]
    assert parse("from ..errors import FormatError") == ["cepam.errors"]
    assert parse("from .. import encode") == ["cepam"]
    assert parse("import cepam._core") == ["cepam._core"]
    assert parse("from cepam import _cuda") == ["cepam._cuda"]
    assert _targets("cepam.fl", ast.parse("from .cli import main").body[0]) == ["cepam.fl.cli"]


def test_cycle_finder():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_deferred_and_type_checking_imports_are_not_edges(tmp_path, monkeypatch):
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "from . import codec\n"
                      "if TYPE_CHECKING:\n    from . import payload\n"
                      "def f():\n    from . import sealing\n"
                      "class K:\n    from . import padding\n")
    monkeypatch.setitem(SOURCES, "cepam.m", source)
    at_import = {t for _, t in _imports("cepam.m", deferred=False)}
    assert at_import == {"typing", "cepam.codec", "cepam.padding"}
    assert {t for _, t in _imports("cepam.m", deferred=True)} == at_import | {"cepam.sealing"}
    every = {t for _, t in _imports("cepam.m", deferred=True, type_only=True)}
    assert every == at_import | {"cepam.payload", "cepam.sealing"}


def test_only_the_door_imports_the_native_modules():
    offenders = [f"{SOURCES[name].relative_to(ROOT)}:{line} imports {target}"
                 for name in SOURCES if name != DOOR
                 for line, target in _imports(name, deferred=True, type_only=True)
                 if target in NATIVE]
    assert not offenders, "import the native modules from cepam._native:\n" + "\n".join(offenders)
    assert {t for _, t in _imports(DOOR, deferred=True, type_only=True)} >= NATIVE


def test_the_core_exports_what_the_library_calls_and_hooks_apart():
    from cepam._native import core

    used = {node.attr for name in SOURCES
            for node in ast.walk(ast.parse(SOURCES[name].read_text()))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "_core"}
    exported = {name for name in dir(core) if not name.startswith("_")}
    entry_points = {name for name in exported if callable(getattr(core, name))}
    assert "testing" in exported and not callable(core.testing)
    assert used <= exported and "testing" not in used
    assert entry_points == {name for name in used if callable(getattr(core, name))}, (
        "move entry points that only tests and benchmarks call to cepam._core.testing")
    assert {"det_log", "chacha20_block", "lattice_basis", "ans_encode_intervals"} <= set(
        dir(core.testing)).difference(exported)


def test_the_codec_parameters_cross_the_binding_as_one_value():
    """No entry point of the native modules takes the codec's parameters as
    loose values (mechanism, scale, lattice, n): they take one checked
    _core.Params (check_combination, the rule itself, takes the codes)."""
    import re

    from cepam._native import core, cuda_module

    modules = [core, core.testing] + ([cuda_module()] if cuda_module() is not None else [])
    loose, takes_params = [], []
    for module in modules:
        for name in dir(module):
            fn = getattr(module, name)
            if name.startswith("_") or not callable(fn) or isinstance(fn, type):
                continue
            signature = (fn.__doc__ or "").splitlines()[0]
            args = set(re.findall(r"(\w+): ", signature))
            if "params" in args:
                takes_params.append(name)
            if name != "check_combination" and {"mechanism", "scale"} & args:
                loose.append(f"{module.__name__}.{name}")
    assert not loose, loose
    assert {"encode", "decode", "acceptance_probability", "encode_lattice",
            "decode_symbols", "latent_radius"} <= set(takes_params)


def test_no_import_circle_at_import_time():
    graph = _graph(deferred=False)
    assert sum(map(len, graph.values())) > 50  # the graph is read, not empty
    assert "cepam.codec" in graph["cepam"]
    cycle = _cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_import_circle_through_deferred_imports():
    # a deferred import only hides a circle from the interpreter: the two
    # modules still depend on each other
    graph = _graph(deferred=True)
    assert graph["cepam.fl.cli"] > _graph(deferred=False)["cepam.fl.cli"]
    cycle = _cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)
