"""The package's shape: each folder imports only what the README's Architecture table allows, no import circles,
small modules and functions."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "eagle_demo"
README = PACKAGE.parent / "README.md"
TOP = "top level"  # the modules directly under eagle_demo/ (session, probe, bench, ...)


def folder_rules(readme: str) -> dict[str, set[str]]:
    """{folder: the folders it may import}, read from the README's Architecture table (the one statement of them):
    `nothing`, `every folder but X`, or a list of folders (`top level` names the package's own modules)."""
    section = readme.split("## Architecture\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    names = {cells[0].strip().strip("`").rstrip("/") for cells in rows if cells[0].strip() != "folder"}
    rules = {}
    for cells in rows:
        folder, allowed = cells[0].strip().strip("`").rstrip("/"), cells[-1].strip()
        if folder == "folder":
            continue
        if allowed == "nothing":
            rules[folder] = set()
        elif allowed.startswith("every folder but "):
            rules[folder] = names - {folder, allowed.removeprefix("every folder but ").strip("`").rstrip("/")}
        else:
            rules[folder] = {part.strip().strip("`").rstrip("/") for part in allowed.split(",")}
    return rules


RULES = folder_rules(README.read_text(encoding="utf-8"))


def layer_of(module: str) -> str:
    """The folder a module lives in: `eagle_demo.decoding.engine` -> decoding; the package's own modules are the top
    level, but for `__main__`, the command line's entry point."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] == "__main__":
        return "commands"
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in RULES) else TOP


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


def violations(graph: dict[str, set[str]], rules: dict[str, set[str]] | None = None) -> list[str]:
    rules = RULES if rules is None else rules
    wrong = []
    for name, targets in graph.items():
        mine = layer_of(name)
        for target in sorted(targets):
            if target.split(".")[0] == "gradio" and mine != "app":
                wrong.append(f"{name} ({mine}) imports gradio")
            if target not in graph:
                continue
            theirs = layer_of(target)
            if theirs != mine and theirs not in rules[mine]:
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


def test_the_readme_table_names_every_folder():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert set(RULES) == folders | {TOP}, "the README's Architecture table and eagle_demo/'s folders differ"
    for folder, allowed in RULES.items():
        assert allowed <= set(RULES), f"{folder} may import an unknown folder: {allowed - set(RULES)}"


def test_the_scan_catches_a_wrong_import_and_a_circle():
    files = {"eagle_demo.decoding.engine": ("from ..app.page import build_app\n\ndef f():\n    import gradio\n",
                                            False),
             "eagle_demo.decoding.events": ("from ..target.runner import TargetRunner\n", False),
             "eagle_demo.target.runner": ("from ..decoding import events\n", False),
             "eagle_demo.metrics": ("from .view import charts\n", False),
             "eagle_demo.session": ("def run():\n    from .commands.args import tree_from_args\n", False),
             "eagle_demo.commands.args": ("from ..session import run\n", False),
             "eagle_demo.app.page": ("import gradio as gr\nfrom ..view.charts import figure\n", False),
             "eagle_demo.decoding": ("", True), "eagle_demo.view": ("", True),
             "eagle_demo.view.charts": ("from ..metrics import RunView\n", False)}
    graph = graph_of(files)
    assert violations(graph) == [
        "eagle_demo.decoding.engine (decoding) imports eagle_demo.app.page (app)",
        "eagle_demo.decoding.engine (decoding) imports gradio",
        "eagle_demo.target.runner (target) imports eagle_demo.decoding (decoding)",
        "eagle_demo.target.runner (target) imports eagle_demo.decoding.events (decoding)",
        "eagle_demo.metrics (top level) imports eagle_demo.view (view)",
        "eagle_demo.metrics (top level) imports eagle_demo.view.charts (view)",
        "eagle_demo.session (top level) imports eagle_demo.commands.args (commands)"]
    assert circles(graph) == ["eagle_demo.view.charts -> eagle_demo.metrics -> eagle_demo.view.charts",
                              "eagle_demo.commands.args -> eagle_demo.session -> eagle_demo.commands.args",
                              "eagle_demo.decoding.events -> eagle_demo.target.runner -> eagle_demo.decoding.events"]


def test_the_rules_come_from_the_readme():
    """A row of the table changes what the scan allows: with `decoding` taken out of `autotree`'s row, the real
    package's automatic tree breaks the rule."""
    rules = {k: set(v) for k, v in RULES.items()}
    assert not violations(package_graph(), rules)
    rules["autotree"].discard("decoding")
    assert any(line.startswith("eagle_demo.autotree.") and line.endswith("(decoding)")
               for line in violations(package_graph(), rules))
    table = folder_rules("## Architecture\n| folder | holds | may import |\n|---|---|---|\n"
                         "| `a/` | x | nothing |\n| `b/` | y | `a` |\n| `c/` | z | every folder but `b` |\n")
    assert table == {"a": set(), "b": {"a"}, "c": {"a"}}


# Modules of one concern allowed up to 400 lines, and why (issue 53: the 300-line cap is a signal, never a reason
# to split one concern in two).
LONG_MODULES = {
    "eagle_demo.checkpoints.hub": "one concern: a repo id, URL or path to a local folder (size guard, offline mode, "
                                  "public-mode admission, and a one-line message for each Hub failure)",
    "eagle_demo.probe.measure": "one concern: the probe's measurement, its stages and its far-position prompts",
}
# Functions allowed over 60 lines, and why.
LONG_FUNCTIONS = {
    "eagle_demo.probe.measure.probe_pair": "the probe's stages share one set of closures over the pair, the pools "
                                           "and the declared reading; split them once the far-position rule settles",
}


def test_modules_and_functions_stay_small():
    """Outside training/: no module over 300 lines (400 for those named above), no function over 60."""
    big = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "training" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        limit = 400 if module_name(path) in LONG_MODULES else 300
        if len(text.splitlines()) > limit:
            big.append(f"{module_name(path)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 60 and f"{module_name(path)}.{node.name}" not in LONG_FUNCTIONS:
                    big.append(f"{module_name(path)}.{node.name}: {length} lines")
    assert not big, "\n".join(big)


# Functions that may take more than 8 parameters, and why. The app's events take one record each (a form, built by
# `forms.handler`), but for two whose parameters are the page's components in order (docs/house.md, "Parameters").
MANY_PARAMETERS = {
    "eagle_demo.checkpoints.api.load_pair": "the public loading API: two names and seven keyword-only options, "
                                            "as `from_pretrained` takes them",
    "eagle_demo.target.attention.grouped_sdpa_forward": "transformers' attention-interface signature",
    "eagle_demo.target.attention.packed_sdpa_forward": "transformers' attention-interface signature",
    "eagle_demo.app.deploy_tab.deploy": "a Gradio event called with two input lists: the pair and the Draft panel's "
                                        "seven settings, then the n-gram settings (the Diagnose tab sends no n-gram)",
    "eagle_demo.app.vllm_panel.run_in_vllm": "a Gradio event: the pair, the prompt, the chat box and the length, "
                                             "then the Draft panel's seven settings, the page's components in order",
}


def test_functions_take_at_most_eight_parameters():
    """At most 8 parameters (self and cls not counted); more go into a frozen record."""
    many = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                count = len(names) + bool(a.vararg) + bool(a.kwarg)
                name = f"{module_name(path)}.{node.name}"
                if count > 8 and name not in MANY_PARAMETERS:
                    many.append(f"{name}: {count} parameters")
    assert not many, "\n".join(many)
