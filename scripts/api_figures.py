"""Count, with `ast`, how the packages pass records and describe themselves (issue 37's figures).

Four figures over engine, pipeline, serve, sokoforge and sokoforge_gym: plain functions (not
numba kernels, not click commands) with more than 6 positional parameters; bare `dict`
annotations in signatures (`dict` or `dict | None`, not `dict[str, int]`; variable annotations
are printed beside); modules whose `__all__` differs from their public top-level functions and
classes; and public items (modules, functions, classes, methods) with a docstring.

    .venv/bin/python scripts/api_figures.py [--list]
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "pipeline", "serve", "sokoforge", "sokoforge_gym")
MAX_POSITIONAL = 6
NUMBA = {"njit", "jit", "vectorize", "guvectorize", "generated_jit", "cfunc", "stencil"}


def modules() -> list[Path]:
    """Every Python file of the packages, in a stable order."""
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = set()
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        while isinstance(target, ast.Attribute):
            names.add(target.attr)
            target = target.value
        if isinstance(target, ast.Name):
            names.add(target.id)
    return names


def is_kernel_or_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A numba kernel (`@njit`, `@numba.jit(...)`) or a click command (`@x.command`, `@option`)."""
    names = _decorator_names(node)
    return bool(names & NUMBA) or bool(names & {"command", "option", "argument", "group"})


def positional_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters that may be passed by position, `self` and `cls` left out."""
    params = [a.arg for a in node.args.posonlyargs + node.args.args]
    return len([p for p in params if p not in ("self", "cls")])


def _bare_dicts(annotation: ast.expr | None) -> int:
    if annotation is None:
        return 0
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return 0
    subscripted = {id(n.value) for n in ast.walk(annotation) if isinstance(n, ast.Subscript)}
    return sum(
        1 for n in ast.walk(annotation)
        if isinstance(n, ast.Name) and n.id == "dict" and id(n) not in subscripted
    )


def bare_dict_annotations(tree: ast.Module) -> tuple[int, int]:
    """`dict` used unparametrised: (in parameter and return annotations, in variable ones)."""
    count = variables = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            for a in args.posonlyargs + args.args + args.kwonlyargs:
                count += _bare_dicts(a.annotation)
            for a in (args.vararg, args.kwarg):
                count += _bare_dicts(a.annotation if a else None)
            count += _bare_dicts(node.returns)
        elif isinstance(node, ast.AnnAssign):
            variables += _bare_dicts(node.annotation)
    return count, variables


def public_names(tree: ast.Module) -> set[str]:
    """Top-level functions and classes whose names do not start with `_` (the module's API;
    constants, loggers and type variables are left to the module)."""
    return {
        node.name for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and not node.name.startswith("_")
    }


def declared_all(tree: ast.Module) -> set[str] | None:
    """The names in a literal `__all__`, or None when the module has none."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = node.value
            if isinstance(value, ast.List | ast.Tuple):
                return {e.value for e in value.elts if isinstance(e, ast.Constant)}
    return None


def defined_names(tree: ast.Module) -> set[str]:
    """Every name bound at the top level: definitions, assignments and imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.TypeAlias):
            targets = node.targets if isinstance(node, ast.Assign) else [
                node.target if isinstance(node, ast.AnnAssign) else node.name]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def drift(tree: ast.Module) -> tuple[set[str], set[str]] | None:
    """(public functions and classes left out of `__all__`, names in it bound nowhere here),
    or None when the two agree. A module without `__all__` drifts when it has public names."""
    public = public_names(tree)
    listed = declared_all(tree)
    if listed is None:
        return (public, set()) if public else None
    missing, extra = public - listed, listed - defined_names(tree)
    return (missing, extra) if missing or extra else None


def public_items(tree: ast.Module) -> list[tuple[str, bool]]:
    """(name, has a docstring) for the module, its public functions, classes and their methods."""
    items = [("<module>", ast.get_docstring(tree) is not None)]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name.startswith("_"):
                continue
            items.append((node.name, ast.get_docstring(node) is not None))
            if isinstance(node, ast.ClassDef):
                items += [
                    (f"{node.name}.{m.name}", ast.get_docstring(m) is not None)
                    for m in node.body
                    if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)
                    and not m.name.startswith("_")
                ]
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="name every offender")
    opts = parser.parse_args()
    long_params, dicts, variables, drifting, documented, items = [], 0, 0, [], 0, 0
    for path in modules():
        rel = path.relative_to(ROOT)
        tree = ast.parse(path.read_text(), str(rel))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = positional_count(node)
                if n > MAX_POSITIONAL and not is_kernel_or_command(node):
                    long_params.append(f"{rel}:{node.lineno} {node.name} ({n})")
        in_signatures, in_variables = bare_dict_annotations(tree)
        dicts, variables = dicts + in_signatures, variables + in_variables
        if (d := drift(tree)) is not None:
            drifting.append(f"{rel}: missing {sorted(d[0])} extra {sorted(d[1])}")
        pub = public_items(tree)
        items += len(pub)
        documented += sum(has for _, has in pub)
    print(f"plain functions over {MAX_POSITIONAL} positional parameters: {len(long_params)}")
    print(f"bare dict annotations: {dicts} in signatures (and {variables} on variables)")
    print(f"modules whose __all__ drifts: {len(drifting)}")
    print(f"public items with a docstring: {documented}/{items} ({documented / items:.0%})")
    if opts.list:
        print("\n".join(["", *long_params, "", *drifting]))


if __name__ == "__main__":
    main()
