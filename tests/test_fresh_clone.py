"""Following the pages on a fresh clone leaves the suite passing: every file a page's command writes goes under out/
(which .gitignore ignores, and so the root test of tests/test_layout.py leaves out), or replaces a file of the tree
that the page names on purpose (a committed record), never a new file at the root.

Read from the pages for every command (the paths it names with WRITES), and run for the two that once wrote at the
root: the explorer's export for a static host and the reproducibility page's float64 spread.
"""

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from test_layout import FOLDERS, ROOT, root_entries
from test_readme import PAGES, fresh_copy, page_commands, page_text

WRITES = ("--out", "--export", "--json")  # the options by which a command names a file or folder it writes


# ----------------------------------------------------------------------------------------------------------------
# What a page's command writes


def written(command):
    """The paths a command names for what it writes: the values of WRITES (as `--out X` or `--out=X`) and the
    targets of shell redirections.

    >>> written("python3 train.py --out out/a.safetensors --quiet > log.txt 2>&1")
    ['out/a.safetensors', 'log.txt']
    >>> written("python3 -m dev.bench --json=out/b.json  # a comment")
    ['out/b.json']
    >>> written("python3 -m oneblock.workbook check out/mine/model.py --json")  # (a flag there: it names no file)
    []
    """
    words = shlex.split(command, comments=True)
    paths = []
    for i, word in enumerate(words):
        option, _, value = word.partition("=")
        follows = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("-") else None
        if option in WRITES and (value or follows):
            paths.append(value or follows)
        elif word in (">", ">>") and i + 1 < len(words):
            paths.append(words[i + 1])
    return paths


def allowed(path):
    """Whether a command may write path (relative to the repository's folder): under out/, or a file or folder that
    the tree has in one of its folders, which the command replaces on purpose (a committed record, the figures).

    >>> allowed("out/site/"), allowed("site/"), allowed("spread-float64.json"), allowed("experiments/spread.json")
    (True, False, False, True)
    """
    parts = Path(path).parts
    return parts[:1] == ("out",) or (len(parts) > 1 and parts[0] in FOLDERS and (ROOT / path).exists())


def test_every_command_of_every_page_writes_under_out_or_replaces_a_file_of_the_tree():
    commands = [(page, c) for page in PAGES for c in page_commands(page_text(page)) if isinstance(c, str)]
    named = [(page, c, path) for page, c in commands for path in written(c)]
    assert len(named) > 10  # (the pages' outputs are read, not none)
    stray = [f"{page}: {c} (writes {path})" for page, c, path in named if not allowed(path)]
    assert stray == [], "commands that write outside out/, at the root:\n" + "\n".join(stray)


# ----------------------------------------------------------------------------------------------------------------
# The two that once wrote at the root, run as a new user runs them


def page_command(page, start):
    """The one command of page that starts with start, as the page shows it."""
    (found,) = [c for c in page_commands(page_text(page)) if isinstance(c, str) and c.startswith(start)]
    return found


@pytest.mark.skipif(sys.platform == "win32", reason="the pages' commands are the Linux and macOS ones")
def test_the_export_and_the_float64_spread_leave_nothing_at_the_root_that_git_does_not_ignore(tmp_path):
    """In a fresh copy: the explorer's --export (as written) and the float64 spread (with 20 steps, not 12,000) write
    their files, and the root's entries that are the tree's (root_entries) are the same as before them."""
    pytest.importorskip("numpy")
    repo = tmp_path / "repo"
    fresh_copy(repo)
    before = root_entries(repo)
    export = page_command("docs/explorer.md", "python3 explore.py --export")
    spread = page_command("docs/reproducibility.md", "python3 -m experiments.spread --schemes learned --dtype float64")
    for command, extra in ((export, []), (spread, ["--steps", "20"])):
        run = subprocess.run([sys.executable, *shlex.split(command)[1:], *extra], cwd=repo, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, f"{command}: {run.stdout[-2000:]}{run.stderr[-2000:]}"
        for path in written(command):
            assert (repo / path).exists(), f"{command} did not write {path}"
    assert root_entries(repo) == before, "what the pages' commands left at the root"
