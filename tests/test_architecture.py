"""docs/architecture.md is the map of the package: every module has a layer there, no module imports from a
layer below its own, and no import goes round in a circle. Imports are read from the source (module-level and
inside functions alike), so a lazy import counts as much as an eager one."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "prednet_keras"


def modules():
    """{module name: its file}, e.g. "prednet_keras.data.sources"."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name, path, known):
    """The package's modules that `name` imports."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            submodules = [f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in known]
            # "from package import submodule" uses the submodule, not the package's own code.
            found.update(submodules if len(submodules) == len(node.names) else [module, *submodules])
    return {module for module in found if module in known and module != name}


def layers():
    """{module prefix: (layer number, layer name)} from the table in docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = {}
    for line in text.splitlines():
        match = re.match(r"^\| (\d) ([a-z ]+) \| (.*?) \|", line)
        if match:
            for module in re.findall(r"`([\w.]+)`", match.group(3)):
                full = "prednet_keras" if module == "prednet_keras" else f"prednet_keras.{module}"
                table[full] = (int(match.group(1)), match.group(2).strip())
    assert table, "docs/architecture.md has no layer table"
    return table


def layer_of(module, table):
    best = None
    for prefix, layer in table.items():
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best)):
            best = prefix
    return None if best is None else table[best]


def graph():
    known = modules()
    return {name: imports(name, path, set(known)) for name, path in known.items()}


def test_every_module_has_a_place_on_the_map():
    table = layers()
    unplaced = sorted(name for name in modules() if layer_of(name, table) is None)
    assert not unplaced, f"modules docs/architecture.md does not place: {unplaced}"


def test_no_module_imports_from_a_lower_layer():
    table = layers()
    wrong = []
    for name, targets in graph().items():
        mine = layer_of(name, table)
        for target in targets:
            theirs = layer_of(target, table)
            if theirs[0] > mine[0]:
                wrong.append(f"{name} ({mine[1]}) imports {target} ({theirs[1]})")
    assert not wrong, "imports against the layer order of docs/architecture.md:\n" + "\n".join(sorted(wrong))


def test_no_import_cycles():
    edges = graph()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node):  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    assert not cycles, f"import cycles: {cycles}"
