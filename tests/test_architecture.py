"""The package's shape: lower layers never import higher ones, no import circles, small modules and functions."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "eagle_demo"

# From the engine up. A module may import its own layer and the layers below it, never one above it; `app` and
# `commands` sit side by side at the top and never import each other. Only `app` imports gradio.
RANK = {"core": 0, "library": 1, "view": 2, "app": 3, "commands": 3}
LIBRARY = {"session", "bench", "bench_report", "deploy", "doctor", "training"}
TOP = {"app": "app", "ui": "app", "commands": "commands", "cli": "commands", "__main__": "commands",
       "view": "view", "render": "view"}  # ui, cli and render are compatibility modules of their layers


def layer_of(module: str) -> str:
    """core: engine, drafts, config, events, checkpoints, hub, metrics, ...; library: session, bench, deploy,
    doctor, training; view; app; commands."""
    head = (module.split(".") + [""])[1]
    return TOP.get(head) or ("library" if head in LIBRARY else "core")


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(name: str, source: str, is_package: bool = False) -> set[str]:
    """Every module a file imports, at the top or inside a function, as absolute names (`from . import x` counts
    both the package and `package.x`)."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def graph_of(files: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the package modules it imports, from {module: (source, is_package)}."""
    return {name: imports(name, source, is_package) for name, (source, is_package) in files.items()}


def violations(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for name, targets in graph.items():
        mine = layer_of(name)
        for target in sorted(targets):
            if target.split(".")[0] == "gradio" and mine != "app":
                wrong.append(f"{name} ({mine}) imports gradio")
            if target not in graph:
                continue
            theirs = layer_of(target)
            if RANK[theirs] > RANK[mine] or (RANK[theirs] == RANK[mine] and theirs != mine):
                wrong.append(f"{name} ({mine}) imports {target} ({theirs})")
    return wrong


def circles(graph: dict[str, set[str]]) -> list[str]:
    """Import circles, following every import; a package importing its own modules (re-exports) does not count."""
    edges = {n: {t for t in ts if t in graph and t != n and not t.startswith(n + ".")} for n, ts in graph.items()}
    found, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for dep in sorted(edges[node]):
            if state.get(dep) == "open":
                found.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = "done"

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    return found


def package_graph() -> dict[str, set[str]]:
    return graph_of({module_name(p): (p.read_text(encoding="utf-8"), p.name == "__init__.py")
                     for p in sorted(PACKAGE.rglob("*.py"))})


def test_lower_layers_never_import_higher_ones():
    wrong = violations(package_graph())
    assert not wrong, "\n".join(wrong)


def test_no_import_circles():
    found = circles(package_graph())
    assert not found, "\n".join(found)


def test_the_scan_catches_a_wrong_import_and_a_circle():
    files = {"eagle_demo.engine": ("from .app.page import build_app\n\ndef f():\n    import gradio\n", False),
             "eagle_demo.metrics": ("from .view import charts\n", False),
             "eagle_demo.bench": ("def run():\n    from .commands.args import tree_from_args\n", False),
             "eagle_demo.commands.args": ("from ..bench import run\n", False),
             "eagle_demo.app.page": ("import gradio as gr\nfrom ..view.charts import figure\n", False),
             "eagle_demo.view": ("", True), "eagle_demo.view.charts": ("from ..metrics import RunView\n", False)}
    graph = graph_of(files)
    assert violations(graph) == [
        "eagle_demo.engine (core) imports eagle_demo.app.page (app)", "eagle_demo.engine (core) imports gradio",
        "eagle_demo.metrics (core) imports eagle_demo.view (view)",
        "eagle_demo.metrics (core) imports eagle_demo.view.charts (view)",
        "eagle_demo.bench (library) imports eagle_demo.commands.args (commands)"]
    assert circles(graph) == ["eagle_demo.view.charts -> eagle_demo.metrics -> eagle_demo.view.charts",
                              "eagle_demo.bench -> eagle_demo.commands.args -> eagle_demo.bench"]


def test_modules_and_functions_stay_small():
    """Outside training/: no module over 400 lines, no function over 80."""
    big = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "training" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 400:
            big.append(f"{module_name(path)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 80:
                    big.append(f"{module_name(path)}.{node.name}: {length} lines")
    assert not big, "\n".join(big)
