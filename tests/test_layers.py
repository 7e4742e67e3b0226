"""The packages' imports point down (engine <- pipeline <- serve.stores <- serve <- sokoforge)
and form no cycle.

Every import of every module is read from its source (those inside functions too), so an
import made late to dodge a cycle counts like any other.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The layers from the bottom; a module may import its own layer's modules and lower ones. A
# module is in the layer of the longest name here its name starts with: the stores sit below
# the rest of the server, which plays, serves the web and pages on top of them.
LAYERS = {"engine": 0, "pipeline": 1, "serve.stores": 2, "serve": 3, "sokoforge": 4,
          "sokoforge_gym": 4}
PACKAGES = [p for p in LAYERS if "." not in p]


def layer(module: str) -> int:
    """The layer of ``module``: that of the longest name in ``LAYERS`` it is or starts with."""
    return max(((len(p), n) for p, n in LAYERS.items()
                if module == p or module.startswith(p + ".")))[1]


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _known(name: str) -> str | None:
    """The project module ``name`` loads (the longest prefix that is one), else None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    """The project modules ``module`` imports anywhere in its source."""
    path = MODULES[module]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(m for m in map(_known, names) if m is not None and m != module)
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_walk_sees_imports_inside_functions_and_relative_ones():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    # the build command imports the build inside its function
    assert "pipeline.stages.build" in GRAPH["sokoforge.cli.build"]
    assert "sokoforge.sokoban_env" in GRAPH["sokoforge_gym"]


def test_no_module_imports_a_higher_layer():
    upward = [f"{m} imports {o}" for m, outs in sorted(GRAPH.items()) for o in sorted(outs)
              if layer(o) > layer(m)]
    assert upward == []


def test_the_stores_sit_below_the_rest_of_the_server():
    assert layer("serve.stores.sqlite") == layer("serve.stores") < layer("serve.play")
    assert layer("serve") == layer("serve.play") > layer("pipeline.scores.irt")
    # what the stores import: each other, the project's error root, nothing else of ``serve``
    outside = {o for m, outs in GRAPH.items() if m.startswith("serve.stores")
               for o in outs if not o.startswith("serve.stores")}
    assert outside == {"engine.errors"}


def test_no_import_cycle():
    assert _cycles(GRAPH) == []


def test_every_module_with_public_names_declares_them_in_all():
    undeclared = []
    for module, path in sorted(MODULES.items()):
        tree = ast.parse(path.read_text(), str(path))
        public = [n.name for n in tree.body
                  if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                  and not n.name.startswith("_")]
        declares = any(isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets) for n in tree.body)
        if public and not declares:
            undeclared.append(module)
    assert undeclared == []


# -- Rooms: the subpackages and the top modules of each package, placed like the layers ----
# From the bottom; a module may import its own room and the lower rooms of its package. A room
# is a subpackage (``pipeline.stages``) or a module at its package's top (``pipeline.spec``),
# and several in one string share a rank. A new module or subpackage is placed here first.
ROOMS = {
    "engine": ["errors levels level_files rules episode kernel_cache", "search",
               "agents pictures", "warmup"],
    "pipeline": ["errors progress workers spec seeds precision", "versions", "difficulty",
                 "stages", "scores", "audit", "rotate calibrate trajectories"],
    "serve": ["stores limits", "games", "records", "arena", "play client", "web", "native",
              "arc", "browser", "app run"],
}
RANK = {f"{package}.{name}": rank for package, rooms in ROOMS.items()
        for rank, names in enumerate(rooms) for name in names.split()}


def room(module: str) -> str | None:
    """The room ``module`` is in (``pipeline.stages.build`` -> ``pipeline.stages``), None for a
    package's own ``__init__`` and outside the packages with rooms."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in ROOMS and len(parts) > 1 else None


def test_every_module_has_a_room_and_every_room_exists():
    unplaced = sorted(m for m in MODULES if room(m) is not None and room(m) not in RANK)
    assert unplaced == []
    assert sorted(name for name in RANK if name not in MODULES) == []


def test_no_module_imports_a_higher_room_of_its_package():
    upward = [f"{m} imports {o}" for m, outs in sorted(GRAPH.items()) for o in sorted(outs)
              if room(m) and room(o) and m.split(".")[0] == o.split(".")[0]
              and RANK[room(o)] > RANK[room(m)]]
    assert upward == []


def test_the_rooms_form_no_cycle():
    graph: dict[str, set[str]] = {name: set() for name in RANK}
    for m, outs in GRAPH.items():
        for o in outs:
            if room(m) and room(o) and room(m) != room(o):
                graph[room(m)].add(room(o))
    assert _cycles(graph) == []


def test_stages_and_versions_sit_below_the_scores_and_the_audit():
    assert RANK["pipeline.versions"] < RANK["pipeline.stages"] < RANK["pipeline.scores"]
    assert RANK["pipeline.scores"] < RANK["pipeline.audit"] < RANK["pipeline.rotate"]
    # the web layer sits below every face, what the store's records say below the play layer
    assert RANK["serve.games"] < RANK["serve.records"] < RANK["serve.arena"] < RANK["serve.play"]
    assert RANK["serve.play"] < RANK["serve.web"] < RANK["serve.native"]
    assert RANK["serve.native"] < RANK["serve.arc"] < RANK["serve.browser"] < RANK["serve.app"]
    assert RANK["engine.search"] < RANK["engine.agents"] == RANK["engine.pictures"]
