"""The house: what stands at the root, and who imports whom, read from the code with ast (nothing is imported).

- The root holds the seed's lab, the day-to-day commands, the README and pyproject.toml, and folders whose names say
  their role: at most 20 entries (dot-files aside), at most 10 of them Python files.
- No module imports a command-line script: train.py, sample.py, explore.py and trace_block.py are command lines
  over the library, and only the seed's test_model.py imports trace_block, as the seed does (the other tests run
  them as a user does, in subprocesses). The experiments and the benchmarks are commands too: none of the lab's
  modules imports one that has a command line of its own (a test may import one, to check its parts).
- No import cycle, among all the lab's modules and the tests' helpers.
- The pins of tests/requirements*.txt are pyproject.toml's, and the other way round.
"""

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = ["model.py", "trace_block.py", "test_model.py", "bpe.py", "make_corpus.py", "atomic.py", "corpus.txt",
        "tokenizer.json", "block-trace.json"]  # the seed's lab, as the seed ships it
COMMANDS = ["train.py", "sample.py", "explore.py"]  # the day-to-day command lines
FOLDERS = ["oneblock", "experiments", "dev", "docs", "explorer", "tests"]  # the library, and a folder for each role
SCRIPTS = {"train", "sample", "explore", "trace_block"}  # command lines at the root, which nothing may import
EXCEPTION = ("test_model", "trace_block")  # the seed's own test reads the trace's functions, as the seed does


def modules():
    """{module name: path} of every Python file of the lab: the root's, the packages', and the tests'."""
    found = {path.stem: path for path in ROOT.glob("*.py")}
    for folder in ("oneblock", "experiments", "dev"):
        for path in (ROOT / folder).glob("*.py"):
            found[folder if path.stem == "__init__" else f"{folder}.{path.stem}"] = path
    for path in (ROOT / "tests").glob("*.py"):
        found[f"tests/{path.stem}"] = path
    return found


def imports(path, known):
    """The lab's modules that the file at path imports (anywhere in it, at the top or inside a function or a block),
    each as its name in known: `import a`, `from a import b` (b a module of a, or a name in a), `from . import`."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    tests = {name.split("/", 1)[1]: name for name in known if name.startswith("tests/")}
    return {tests.get(name, name) for name in names if tests.get(name, name) in known}


def graph():
    """{module: the lab's modules it imports}, for every module of the lab."""
    known = modules()
    return {name: imports(path, known) - {name} for name, path in known.items()}


def has_command_line(path):
    """Whether a module runs a command when it is run as a program: an `if __name__ == "__main__":` block."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)


def cycle(edges):
    """One import cycle of the graph as a list of modules (the first repeated at the end), or None.

    >>> cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}), cycle({"a": {"b"}, "b": set()})
    (['a', 'b', 'c', 'a'], None)
    """
    state, path = {}, []

    def visit(node):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


# ----------------------------------------------------------------------------------------------------------------
# The root


def test_the_root_holds_the_seeds_lab_the_commands_and_folders_that_say_their_role():
    entries = sorted(p.name for p in ROOT.iterdir() if not p.name.startswith(".") and p.name not in (
        "__pycache__", "out"))  # (what running the lab makes here is not the tree's)
    assert set(SEED + COMMANDS + FOLDERS + ["README.md", "pyproject.toml"]) == set(entries), entries
    assert len(entries) <= 20 and len([e for e in entries if e.endswith(".py")]) <= 10
    for folder in ("oneblock", "experiments", "dev"):  # each package says what it holds, file by file
        doc = ast.get_docstring(ast.parse((ROOT / folder / "__init__.py").read_text(encoding="utf-8")))
        for path in (ROOT / folder).glob("*.py"):
            assert path.name == "__init__.py" or path.stem in doc, (folder, path.name)


# ----------------------------------------------------------------------------------------------------------------
# Who imports whom


def test_no_module_imports_a_command_line_script():
    edges, known = graph(), modules()
    scripts = SCRIPTS | {name for name in known if name.startswith(("experiments.", "dev."))
                         and has_command_line(known[name])}
    found = sorted((name, imported) for name, targets in edges.items()
                   for imported in targets & (SCRIPTS if name.startswith("tests/") else scripts)
                   if (name, imported) != EXCEPTION)
    assert found == [], f"modules that import a command-line script: {found}"
    assert EXCEPTION[1] in edges[EXCEPTION[0]]  # (the exception is real: test_model.py reads the trace)
    for name in ("train", "sample", "explore"):  # the day-to-day commands stand on the library alone
        assert all(target.startswith("oneblock") or target in ("model", "bpe", "atomic") for target in edges[name]), (
            name, edges[name])


def test_the_library_imports_nothing_above_it():
    edges = graph()
    for name, targets in edges.items():
        if name.startswith("oneblock"):
            above = [t for t in targets if not (t.startswith("oneblock") or t in ("model", "bpe", "atomic",
                                                                                  "make_corpus"))]
            assert above == [], (name, above)
    for name in ("model", "bpe", "atomic", "make_corpus", "trace_block"):  # the seed's lab: standard library only
        assert all(not t.startswith(("oneblock", "experiments", "dev")) for t in edges[name]), (name, edges[name])


def test_no_import_cycle():
    edges = graph()
    assert len(edges) > 40 and sum(len(t) for t in edges.values()) > 100  # (the graph is read, not empty)
    assert cycle(edges) is None, f"an import cycle: {' -> '.join(cycle(edges))}"


def test_the_check_finds_a_cycle_and_a_script_import_when_there_is_one(tmp_path):
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    import a\n")
    known = {"a": tmp_path / "a.py", "b": tmp_path / "b.py", "train": ROOT / "train.py"}
    edges = {name: imports(path, known) - {name} for name, path in known.items() if name != "train"}
    assert cycle(edges) == ["a", "b", "a"]
    (tmp_path / "c.py").write_text("from oneblock import settings\nimport train\n")
    assert imports(tmp_path / "c.py", {**known, "oneblock.settings": None}) == {"train", "oneblock.settings"}


def test_every_command_line_refuses_an_abbreviated_flag():
    """argparse takes --step for --steps unless told not to: every parser of the lab is told."""
    parsers = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("ArgumentParser"):
                parsers.append(name)
                assert any(k.arg == "allow_abbrev" and ast.unparse(k.value) == "False" for k in node.keywords), name
    assert {"train", "sample", "explore", "bpe", "trace_block", "dev.bench", "experiments.recording"} <= set(parsers)


# ----------------------------------------------------------------------------------------------------------------
# The pins


def pins(path):
    """The requirement lines of a requirements file, without comments."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return sorted(line for line in lines if line)


def test_the_pins_of_the_requirements_files_are_pyprojects():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert sorted(extras["test"]) == pins(ROOT / "tests" / "requirements.txt")
    assert sorted(extras["torch"]) == pins(ROOT / "tests" / "requirements-torch.txt") == ["torch==2.13.0"]
    assert all("==" in pin for pin in extras["test"] + extras["torch"])  # every version pinned
    assert project["dependencies"] == [] and sys.version_info >= (3, 11)  # (tomllib: the tests' Python)
