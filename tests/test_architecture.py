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


# ------------------------------------------------------------------ what scripts/ may use: the public API
# docs/architecture.md, "The public API": `prednet_keras` and the names in `__all__` of each face (the root,
# each package's `__init__`, and a module the root's `__all__` names, as `datasets`), plus running a command's
# module (`python -m prednet_keras.cli.<command>`) or a probe's (`python -m prednet_keras.bench.probes.<probe>`).
# Read from the source, so no face is imported here.
SCRIPTS = ROOT / "scripts"
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_SHELL_IMPORT = re.compile(r"(?:^|[\s;\"'(])(?:from\s+(prednet_keras[\w.]*)\s+import\s+([\w\s,]+)"
                           r"|import\s+(prednet_keras[\w.]*(?:\s*,\s*[\w.]+)*))")
_RUN_MODULE = re.compile(r"-m\s+['\"]?(prednet_keras[\w.]*)")


def declared_all(path):
    """A module's `__all__` as its source states it: a list, or made of the module's literal names with
    list(), sorted() and +; None when it has none."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    literals, expression = {}, None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "__all__":
                expression = node.value
                continue
            try:
                literals[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    if expression is None:
        return None
    code = compile(ast.Expression(expression), str(path), "eval")
    return set(eval(code, {"__builtins__": {"list": list, "sorted": sorted}}, literals))  # noqa: S307


def public_faces():
    """{face: the names of its __all__}: the root, each package's face that declares one, and a module the
    root's __all__ names."""
    faces = {"prednet_keras": declared_all(PACKAGE / "__init__.py")}
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        names = declared_all(init)
        if names is not None:
            faces[f"prednet_keras.{init.parent.name}"] = names
    for name in faces["prednet_keras"]:
        module = PACKAGE / f"{name}.py"
        if module.is_file() and declared_all(module) is not None:
            faces[f"prednet_keras.{name}"] = declared_all(module)
    return faces


def outside_public_api(dotted, faces):
    """The part of `dotted` (a module, or a name reached from one) that is not public API; None when it all is.
    prednet_keras.X must be a name of the root's __all__ or a face; prednet_keras.X.Y a name of face X's
    __all__; what lies beyond is an attribute of a public object, never a private one."""
    parts = dotted.split(".")
    if parts[0] != "prednet_keras":
        return None
    for depth, part in enumerate(parts[1:], 2):
        if part.startswith("__") and part.endswith("__"):
            return None  # __file__, __version__: the module's own
        if part.startswith("_"):
            return ".".join(parts[:depth])
    if len(parts) > 1 and parts[1] not in faces["prednet_keras"] and f"prednet_keras.{parts[1]}" not in faces:
        return ".".join(parts[:2])
    face = ".".join(parts[:2])
    if len(parts) > 2 and face in faces and parts[2] not in faces[face]:
        return ".".join(parts[:3])
    return None


RUNNABLE_PACKAGES = ("prednet_keras.cli", "prednet_keras.bench.probes")  # a command's module, a probe's


def run_module_problem(module):
    """Why `python -m module` is not a command's or a probe's module; None when it is one."""
    if not module.startswith("prednet_keras"):
        return None
    package, _, name = module.rpartition(".")
    path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
    runnable = (package in RUNNABLE_PACKAGES and not name.startswith("_") and path.is_file()
                and 'if __name__ == "__main__":' in path.read_text(encoding="utf-8"))
    return None if runnable else f"python -m {module}"


def python_uses(source, faces):
    """[(line, what)] of the prednet_keras names Python `source` imports or reads that lie outside the
    public API, and the modules it runs with -m that are no command's."""
    tree = ast.parse(source)
    bound, found = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((node.lineno, alias.name))
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.append((node.lineno, full))
                bound[alias.asname or alias.name] = full
        elif isinstance(node, (ast.List, ast.Tuple)):
            items = [item.value if isinstance(item, ast.Constant) else None for item in node.elts]
            found += [(node.lineno, ("-m", module)) for flag, module in zip(items, items[1:])
                      if flag == "-m" and isinstance(module, str)]
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if id(node) in inner:
            continue  # part of a longer chain, read whole
        chain, owner = [], node
        while isinstance(owner, ast.Attribute):
            chain.insert(0, owner.attr)
            owner = owner.value
        # A name bound past the public API is told once, where it is imported.
        if (chain and isinstance(owner, ast.Name) and owner.id in bound
                and not outside_public_api(bound[owner.id], faces)):
            found.append((node.lineno, ".".join([bound[owner.id], *chain])))
    problems = []
    for line, used in sorted(found, key=lambda item: item[0]):
        if isinstance(used, tuple):
            problem = run_module_problem(used[1])
        else:
            past = outside_public_api(used, faces)
            problem = past and (used if past == used else f"{used} ({past} is not public)")
        if problem and (line, problem) not in problems:
            problems.append((line, problem))
    return problems


def shell_uses(text, faces):
    """python_uses for a shell script: its Python heredocs read with ast, and in every other line (a `-c`
    program, say) the prednet_keras imports and the `-m` modules it runs."""
    lines = text.splitlines()
    problems, in_python, index = [], set(), 0
    while index < len(lines):
        match = _HEREDOC.search(lines[index].replace("<<<", ""))
        if match:
            end = next((i for i in range(index + 1, len(lines)) if lines[i].strip() == match.group(2)), len(lines))
            body = "\n".join(lines[index + 1:end])
            try:
                problems += [(index + 1 + line, what) for line, what in python_uses(body, faces)]
                in_python.update(range(index + 1, end))
            except SyntaxError:
                pass  # not Python: its lines are read one by one below
            index = end
        index += 1
    for number, line in enumerate(lines, 1):
        if number - 1 in in_python:
            continue
        for match in _SHELL_IMPORT.finditer(line):
            if match.group(1):
                used = [f"{match.group(1)}.{name.strip()}" for name in match.group(2).split(",") if name.strip()]
            else:
                used = [name.strip() for name in match.group(3).split(",")]
            problems += [(number, name if past == name else f"{name} ({past} is not public)") for name in used
                         if (past := outside_public_api(name, faces))]
        problems += [(number, problem) for module in _RUN_MODULE.findall(line)
                     if (problem := run_module_problem(module))]
    return problems


def script_problems(path, faces):
    text = path.read_text(encoding="utf-8")
    uses = python_uses(text, faces) if path.suffix == ".py" else shell_uses(text, faces)
    return [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in uses]


def test_scripts_use_only_the_public_api():
    faces = public_faces()
    paths = sorted([*SCRIPTS.rglob("*.py"), *SCRIPTS.rglob("*.sh")])
    assert paths
    problems = [problem for path in paths for problem in script_problems(path, faces)]
    assert not problems, ("scripts/ reaching past the public API (docs/architecture.md, \"The public API\"):\n"
                          + "\n".join(problems))


def test_the_scripts_check_finds_each_way_past_the_public_api(tmp_path):
    faces = public_faces()
    script = tmp_path / "probe.py"
    script.write_text("import prednet_keras\n"
                      "from prednet_keras import runtime, build_training_model\n"
                      "from prednet_keras.data import load_frames, open_source\n"
                      "from prednet_keras.session import training_data\n"             # a face without __all__
                      "from prednet_keras.models.lotter import WeightedError\n"      # a module below a face
                      "from prednet_keras.models import count_parameters\n"          # not in the face's __all__
                      "import prednet_keras.data.dataset as dataset\n"
                      "runtime._CONFIGURED\n"                                        # a private name
                      "prednet_keras.__version__, prednet_keras.data.sources.open_source\n"
                      "cmd = ['python', '-m', 'prednet_keras.bench.child']\n"        # not a command's module
                      "ok = ['python', '-m', 'prednet_keras.cli.train']\n"
                      "probe = ['python', '-m', 'prednet_keras.bench.probes.chainer_unroll']\n"
                      "none = ['python', '-m', 'prednet_keras.bench.probes.no_such_probe']\n")
    shell = tmp_path / "probe.sh"
    shell.write_text("python3 -m prednet_keras.cli.study run spec.toml\n"
                     "python3 -m prednet_keras.runtime.childproc\n"
                     "python3 -c 'from prednet_keras.study.archive import opened; print(1)'\n"
                     "python3 - <<'PY' | tee out.txt\n"
                     "from prednet_keras.study import load_run\n"
                     "from prednet_keras.study.report import (\n"
                     "    make_report,\n"
                     ")\n"
                     "PY\n"
                     "cat <<EOF\n"
                     "not python: import prednet_keras.files.diskwrite\n"
                     "EOF\n"
                     "python3 -m prednet_keras.bench.probes.seed_batching --seeds 2\n")
    assert python_uses(script.read_text(), faces) == [
        (4, "prednet_keras.session.training_data (prednet_keras.session is not public)"),
        (5, "prednet_keras.models.lotter.WeightedError (prednet_keras.models.lotter is not public)"),
        (6, "prednet_keras.models.count_parameters"),
        (7, "prednet_keras.data.dataset"),
        (8, "prednet_keras.runtime._CONFIGURED"),
        (9, "prednet_keras.data.sources.open_source (prednet_keras.data.sources is not public)"),
        (10, "python -m prednet_keras.bench.child"),
        (13, "python -m prednet_keras.bench.probes.no_such_probe"),
    ]
    assert shell_uses(shell.read_text(), faces) == [
        (6, "prednet_keras.study.report.make_report (prednet_keras.study.report is not public)"),
        (2, "python -m prednet_keras.runtime.childproc"),
        (3, "prednet_keras.study.archive.opened (prednet_keras.study.archive is not public)"),
        (11, "prednet_keras.files.diskwrite (prednet_keras.files is not public)"),
    ]
