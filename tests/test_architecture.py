"""docs/architecture.md is the map of the package: every module has a layer there, a package's modules share
its layer, no module imports from a layer below its own, no import goes round in a circle, and what a sealed
package keeps private (a leading underscore) is used only inside it. Imports are read from the source
(module-level and inside functions alike), so a lazy import counts as much as an eager one."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "prednet_keras"
# Packages whose private names no code outside them uses (the package's own code, the tests and scripts/): the
# runtime set-up, the run session (one training run), the file formats, the benchmark, a run's options, the
# file utilities and the models, each with what its modules share public inside it.
SEALED_PACKAGES = ("prednet_keras.runtime", "prednet_keras.session", "prednet_keras.formats", "prednet_keras.bench",
                   "prednet_keras.options", "prednet_keras.files", "prednet_keras.models")


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
    """The layer of the longest entry that is `module` or a package holding it; the package root's entry
    places the root module only, so every other module must be named."""
    best = None
    for prefix in table:
        holds = module == prefix or (prefix != "prednet_keras" and module.startswith(prefix + "."))
        if holds and (best is None or len(prefix) > len(best)):
            best = prefix
    return None if best is None else table[best]


def graph():
    known = modules()
    return {name: imports(name, path, set(known)) for name, path in known.items()}


def test_every_module_has_a_place_on_the_map():
    table = layers()
    unplaced = sorted(name for name in modules() if layer_of(name, table) is None)
    assert not unplaced, f"modules docs/architecture.md does not place: {unplaced}"


def test_a_packages_modules_share_its_layer():
    table = layers()
    apart = [f"{name} ({layer_of(name, table)[1]}) in {package} ({layer_of(package, table)[1]})"
             for name in modules() for package in table
             if package != "prednet_keras" and name.startswith(package + ".")
             and layer_of(name, table) != layer_of(package, table)]
    assert not apart, "modules placed outside their package's layer:\n" + "\n".join(sorted(apart))


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


def private_uses(path, sealed):
    """"module.name" for each private name of the sealed package `sealed` that the file at `path` imports
    or reads from one of the package's names (monkeypatch.setattr's string form included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = {}  # local name -> what of the sealed package it names
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update((alias.asname or alias.name, alias.name) for alias in node.names
                         if alias.name == sealed or alias.name.startswith(sealed + "."))
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            inside = node.module == sealed or node.module.startswith(sealed + ".")
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if inside and alias.name.startswith("_"):
                    found.append(full)
                elif full == sealed or full.startswith(sealed + "."):
                    bound[alias.asname or alias.name] = full
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner, name = node.value, node.attr
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "setattr" and len(node.args) > 1
              and isinstance(node.args[1], ast.Constant)):
            owner, name = node.args[0], node.args[1].value
        else:
            continue
        if (isinstance(owner, ast.Name) and owner.id in bound and isinstance(name, str)
                and name.startswith("_") and not name.startswith("__")):
            found.append(f"{bound[owner.id]}.{name}")
    return found


def test_a_sealed_packages_private_names_stay_inside_it():
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")]
    used = []
    for sealed in SEALED_PACKAGES:
        inside = ROOT.joinpath(*sealed.split("."))
        used += [f"{path.relative_to(ROOT)}: {name}" for path in files if inside not in path.parents
                 for name in private_uses(path, sealed)]
    assert not used, "private names used outside their package:\n" + "\n".join(sorted(used))
