"""The tree stays easy to find one's way in: no folder of the packages holds more than 12
modules at its top, the README's Layout names every folder and every module in it, and every
module's `__all__` lists its public functions and classes."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "pipeline", "serve", "sokoforge", "sokoforge_gym")
MOST = 12
EXEMPT = {"sokoforge/cli"}  # the command line keeps one module per command group
NAMED = ("engine", "pipeline", "serve")  # the packages whose every module the Layout names


def folders() -> list[str]:
    """Every package folder (one with an ``__init__.py``) of the packages, relative."""
    return sorted(p.parent.relative_to(ROOT).as_posix() for package in PACKAGES
                  for p in (ROOT / package).rglob("__init__.py"))


def modules(folder: str) -> list[str]:
    """The modules at the top of ``folder``, its ``__init__`` aside."""
    return sorted(p.stem for p in (ROOT / folder).glob("*.py") if p.stem != "__init__")


def layout() -> dict[str, str]:
    """The README's Layout block: each entry's folder (no trailing slash) -> its text."""
    section = (ROOT / "README.md").read_text().split("\n## Layout\n", 1)[1]
    block = section.split("```\n", 2)[1]
    entries: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        if line and not line[0].isspace():
            label, _, text = line.partition(" ")
            current = label.rstrip("/")
            entries[current] = text
        elif current is not None:
            entries[current] += " " + line.strip()
    return entries


def test_no_folder_holds_more_than_twelve_modules_at_its_top():
    crowded = {f: len(modules(f)) for f in folders() if f not in EXEMPT and len(modules(f)) > MOST}
    assert crowded == {}


def test_the_layout_has_an_entry_for_every_subpackage_and_only_for_folders_that_exist():
    entries = layout()
    missing = [f for f in folders() if f.split("/")[0] in NAMED or "/" not in f]
    assert [f for f in missing if f not in entries] == []
    assert [e for e in entries if not (ROOT / e).is_dir()] == []


def test_the_layout_names_every_module_of_each_folder_in_its_entry():
    entries = layout()
    unnamed = {f: [m for m in modules(f) if not re.search(rf"\b{m}\b", entries[f])]
               for f in folders() if f.split("/")[0] in NAMED}
    assert {f: names for f, names in unnamed.items() if names} == {}


def test_the_checks_above_see_the_subpackages_of_the_tree():
    # the checks above see the real tree: every package has subpackages with modules
    assert {"engine/search", "pipeline/stages", "serve/arc"} <= set(folders())
    assert "solver" in modules("engine/search") and "build" in modules("pipeline/stages")


def test_every_modules_all_lists_its_public_functions_and_classes_and_only_names_it_binds():
    drifting = []
    for path in sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text())
        public = {n.name for n in tree.body
                  if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                  and not n.name.startswith("_")}
        bound = {t.id for n in tree.body if isinstance(n, ast.Assign | ast.AnnAssign)
                 for target in (n.targets if isinstance(n, ast.Assign) else [n.target])
                 for t in ast.walk(target) if isinstance(t, ast.Name)}
        bound |= {(a.asname or a.name).split(".")[0] for n in tree.body
                  if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
        listed = next((ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                       and any(getattr(t, "id", None) == "__all__" for t in n.targets)), None)
        if listed is None:
            if public:
                drifting.append(f"{path.relative_to(ROOT)}: no __all__")
            continue
        missing, unbound = public - set(listed), set(listed) - public - bound
        if missing or unbound:
            drifting.append(f"{path.relative_to(ROOT)}: missing {sorted(missing)}, "
                            f"bound nowhere {sorted(unbound)}")
    assert drifting == []
