"""Following the pages on a fresh clone leaves the suite passing: every file a page's command writes goes under out/
(which .gitignore ignores, and so the root test of tests/test_layout.py leaves out), or replaces a file of the tree
that the page names on purpose (a committed record), never a new file at the root.

Read from the pages for every command (the paths it names with WRITES); tests/test_readme.py runs them in a fresh
copy and finds nothing new at its root after them.
"""

import shlex
from pathlib import Path

from test_layout import FOLDERS, ROOT
from test_readme import PAGES, page_commands, page_text

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
