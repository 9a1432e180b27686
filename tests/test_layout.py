"""The house: what stands at the root, and who imports whom, read from the code with ast (nothing is imported).

- The root holds the seed's lab, the day-to-day commands, the README, pyproject.toml and folders whose names say
  their role: at most 20 entries (dot-files aside), at most 10 of them Python files. What git ignores there is what
  running the lab made, not the tree's; any other file at the root is a stray that fails the test.
- No module imports a command-line script (SCRIPTS, but for the seed's EXCEPTION; the other tests run them as a user
  does, in subprocesses), and no lab module imports an experiment or benchmark that has a command line of its own (a
  test may, to check its parts).
- No import cycle, among all the lab's modules and the tests' helpers.
- The pins of tests/requirements*.txt are pyproject.toml's, and the other way round.
- A module of the page (explorer/*.js) mirrors a Python one only for maths the page computes live; every other rule
  and word is the Python's alone, exported to the page (oneblock/export.py's lessons_data). A module not named in
  PAGE_MODULES (such as a copy of the scaling law's fit) fails the test.
"""

import ast
import fnmatch
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SEED = ["model.py", "trace_block.py", "test_model.py", "bpe.py", "make_corpus.py", "atomic.py", "corpus.txt",
        "tokenizer.json", "block-trace.json"]  # the seed's lab, as the seed ships it
COMMANDS = ["train.py", "sample.py", "explore.py"]  # the day-to-day command lines
FOLDERS = ["oneblock", "experiments", "dev", "docs", "explorer", "tests"]  # the library, and a folder for each role
SCRIPTS = {"train", "sample", "explore", "trace_block"}  # command lines at the root, which nothing may import
EXCEPTION = ("test_model", "trace_block")  # the seed's own test reads the trace's functions, as the seed does
PAGE_MODULES = {  # explorer/'s modules: the Python each mirrors for the maths the page computes live (None: the
    # page's own, mirroring nothing)
    "bpe.js": "bpe.py", "checkpoint.js": "oneblock/checkpoint.py", "model.js": "oneblock/numpy_model.py",
    "fast.js": "model.py", "train.js": "oneblock/training.py", "worker.js": "oneblock/training.py",
    "random.js": "model.py", "sample.js": "sample.py", "trace_block.js": "trace_block.py",
    "induction.js": "experiments/induction.py", "positions.js": "experiments/positions.py",
    "experiments.js": "experiments/depth.py", "lessons.js": "oneblock/lessons.py", "draw.js": None, "page.js": None,
    "ui.js": None,
}


def gitignore_matches(patterns, name, is_dir):
    """Whether one of .gitignore's patterns ignores the entry name at the root (is_dir: a folder), as git reads them:
    a pattern ending in / names folders only, a leading / anchors it at the root, and one with a / inside names
    deeper paths, so never a root entry. Negations (!) and comments are passed over.

    >>> patterns = ["/out/", "*.pyc", "/explorer/data/", "# a comment"]
    >>> [gitignore_matches(patterns, *entry) for entry in [("out", True), ("out", False), ("a.pyc", False),
    ...                                                     ("explorer", True)]]
    [True, False, True, False]
    """
    for pattern in patterns:
        pattern = pattern.strip()
        if not pattern or pattern.startswith(("#", "!")):
            continue
        folders_only = pattern.endswith("/")
        pattern = pattern.strip("/")
        if "/" not in pattern and (is_dir or not folders_only) and fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def ignored(root, names):
    """The names (a folder's with a trailing /) of entries at root that git ignores there: `git check-ignore`'s
    answer in a git checkout of root (.gitignore, .git/info/exclude and the user's excludes; a tracked file never
    is), and elsewhere, or without git, what root's .gitignore ignores (gitignore_matches)."""
    root = Path(root)
    if shutil.which("git"):
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True)
        if top.returncode == 0 and Path(top.stdout.strip()).resolve() == root.resolve():
            found = subprocess.run(["git", "check-ignore", "--stdin", "-z"], cwd=root, capture_output=True,
                                   input="\0".join(names).encode())
            if found.returncode in (0, 1):  # 0: some are ignored, 1: none
                return set(filter(None, found.stdout.decode().split("\0")))
    rules = root / ".gitignore"
    patterns = rules.read_text(encoding="utf-8").splitlines() if rules.is_file() else []
    return {name for name in names if gitignore_matches(patterns, name.rstrip("/"), name.endswith("/"))}


def root_entries(root):
    """The names of the entries at root that are the tree's, sorted: dot-files aside, and what git ignores (ignored)
    left out, since running the lab made it."""
    names = [p.name + "/" * p.is_dir() for p in Path(root).iterdir() if not p.name.startswith(".")]
    return sorted(name.rstrip("/") for name in set(names) - ignored(root, names))


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
    entries = root_entries(ROOT)  # (what running the lab makes here, and git ignores, is not the tree's)
    assert set(SEED + COMMANDS + FOLDERS + ["README.md", "pyproject.toml"]) == set(entries), entries
    assert len(entries) <= 20 and len([e for e in entries if e.endswith(".py")]) <= 10
    for folder in ("oneblock", "experiments", "dev"):  # each package says what it holds, file by file
        doc = ast.get_docstring(ast.parse((ROOT / folder / "__init__.py").read_text(encoding="utf-8")))
        for path in (ROOT / folder).glob("*.py"):
            assert path.name == "__init__.py" or path.stem in doc, (folder, path.name)


def test_git_ignores_where_the_lab_writes():
    """out/ (where every page's commands write) and Python's caches are ignored at the root; a new file is not."""
    names = ["out/", "__pycache__/", "model.pyc", "spread-float64.json", "notes.txt"]
    assert ignored(ROOT, names) == {"out/", "__pycache__/", "model.pyc"}


@pytest.mark.parametrize("checkout", [True, False], ids=["git-checkout", "no-git"])
def test_what_git_ignores_at_the_root_is_left_out_and_a_stray_file_is_not(tmp_path, checkout):
    """A user's outputs that .gitignore ignores (out/, site/, a *.tmp) are not the tree's; a file it does not ignore
    is a stray that the root test sees; in a checkout a tracked file counts even where a pattern names it."""
    if checkout and not shutil.which("git"):
        pytest.skip("git is not installed")
    (tmp_path / ".gitignore").write_text("/out/\n/site/\n*.tmp\n", encoding="utf-8")
    for name in ("README.md", "kept.tmp", "stray.json", "out/spread-float64.json", "site/index.html", "x.tmp"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x\n", encoding="utf-8")
    if checkout:
        subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
        subprocess.run(["git", "add", "-f", "README.md", "kept.tmp", ".gitignore"], cwd=tmp_path, check=True)
    assert root_entries(tmp_path) == ["README.md", *["kept.tmp"] * checkout, "stray.json"]


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
    build = ("oneblock.workbook", "oneblock.grade", "oneblock.mistakes")  # the build's grader: on model.py alone
    for name in build:
        assert all(t in build or t in ("model", "atomic") for t in edges[name]), (name, edges[name])


def test_no_import_cycle():
    edges = graph()
    assert len(edges) > 40 and sum(len(t) for t in edges.values()) > 100  # (the graph is read, not empty)
    assert cycle(edges) is None, f"an import cycle: {' -> '.join(cycle(edges))}"


def test_the_check_reads_an_import_inside_a_function_and_a_script_import(tmp_path):
    """(That cycle finds a cycle is its doctest.)"""
    (tmp_path / "b.py").write_text("def f():\n    import a\n")
    (tmp_path / "c.py").write_text("from oneblock import settings\nimport train\n")
    known = {"a": None, "oneblock.settings": None, "train": None}
    assert imports(tmp_path / "b.py", known) == {"a"}
    assert imports(tmp_path / "c.py", known) == {"train", "oneblock.settings"}


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
    """The requirement lines of a requirements file, without comments and options (such as -c constraints.txt)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return sorted(line for line in lines if line and not line.startswith("-"))


def normal(name):
    """A package's name as PyPI compares them (PEP 503).

    >>> normal("Jinja2"), normal("typing_extensions")
    ('jinja2', 'typing-extensions')
    """
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_constraints_pin_every_package_the_install_brings_and_agree_with_the_named_pins():
    """tests/constraints.txt pins, at one version each, every package the named pins pull in (as this environment
    installed them, through each one's own requirements), so that a fresh clone installs the same set."""
    from importlib import metadata

    from packaging.requirements import Requirement

    folder = ROOT / "tests"
    named = [Requirement(pin) for pin in pins(folder / "requirements.txt") + pins(folder / "requirements-torch.txt")]
    constraints = {normal(Requirement(pin).name): str(Requirement(pin).specifier)
                   for pin in pins(folder / "constraints.txt")}
    for name in ("requirements.txt", "requirements-torch.txt"):
        assert "-c constraints.txt" in (folder / name).read_text(encoding="utf-8"), name
    assert all(constraints[normal(r.name)] == str(r.specifier) for r in named if normal(r.name) != "torch")
    assert all(spec.startswith("==") for spec in constraints.values())
    missing, seen, todo = [], set(), [r.name for r in named]
    while todo:  # (every installed package a pin requires, and what those require, for this Python and machine)
        name = normal(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # (torch, where it is not installed)
        if name != "torch" and name not in constraints:
            missing.append(name)
        todo += [r.name for r in map(Requirement, requires) if r.marker is None or r.marker.evaluate({"extra": ""})]
    assert missing == [], f"pin these in tests/constraints.txt: {missing}"


def test_the_pins_of_the_requirements_files_are_pyprojects():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert sorted(extras["test"]) == pins(ROOT / "tests" / "requirements.txt")
    assert sorted(extras["torch"]) == pins(ROOT / "tests" / "requirements-torch.txt") == ["torch==2.13.0"]
    assert project["dependencies"] == [] and sys.version_info >= (3, 11)  # (tomllib: the tests' Python)


def test_every_test_the_slow_tier_names_is_a_test_of_its_file():
    """tests/conftest.py's tiers name files and tests: each name is there, so that a renamed test never drops out of
    the slow tier unseen (it would slow the fast one)."""
    import conftest

    assert all((ROOT / "tests" / name).is_file() for name in conftest.SLOW_FILES), conftest.SLOW_FILES
    for name, tests in conftest.SLOW_TESTS.items():
        tree = ast.parse((ROOT / "tests" / name).read_text(encoding="utf-8"))
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert set(tests) <= defined, (name, sorted(set(tests) - defined))
        assert name not in conftest.SLOW_FILES


def test_a_page_module_mirrors_python_only_for_the_maths_the_page_computes_live():
    """The page's modules are PAGE_MODULES' (the scaling law's fit, explorer/scaling_law.js, is gone: the export
    fits it in Python), and each names a Python file there is."""
    assert sorted(path.name for path in (ROOT / "explorer").glob("*.js")) == sorted(PAGE_MODULES)
    for module, mirrored in PAGE_MODULES.items():
        assert mirrored is None or (ROOT / mirrored).is_file(), (module, mirrored)
