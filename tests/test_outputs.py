"""The files that the developers' commands write (dev/bench.py --json, dev/bench_explorer.py --json and its
screenshots) follow the lab's never-replace rules, judged before any timing starts: a file that is not of their kind
(your notes, the README), a folder, a FIFO, a path through a file, a name too long and a link that leads nowhere are
each one line of usage error, and the file there stays as it was; a file of their own kind is replaced, through a
link to it the file it leads to. Each case is the command in a real subprocess."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from run_helpers import one_line_error

from atomic import output_problem

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("numpy")


def dev(module, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", f"dev.{module}", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


def cases(tmp_path):
    """(path, phrase of its refusal) for every kind of --json that must be refused, made in tmp_path."""
    (tmp_path / "notes.txt").write_text("my notes\n", encoding="utf-8")
    (tmp_path / "folder").mkdir()
    made = [(tmp_path / "notes.txt", "exists and is not a JSON of"), (tmp_path / "folder", "is a folder"),
            (tmp_path / "notes.txt" / "t.json", "notes.txt is a file, not a folder"),
            (tmp_path / ("x" * 300), "a name of 300 bytes")]
    if os.name == "posix":
        os.mkfifo(tmp_path / "fifo")
        (tmp_path / "nowhere.json").symlink_to(tmp_path / "missing" / "t.json")
        made += [(tmp_path / "fifo", "is a FIFO (a named pipe), not a regular file"),
                 (tmp_path / "nowhere.json", "which does not exist (or is a loop)")]
    return made


def test_dev_bench_refuses_a_json_path_it_does_not_own_before_it_times_anything(tmp_path):
    for path, phrase in cases(tmp_path):
        before = sorted(p.name for p in tmp_path.rglob("*"))
        started = time.monotonic()
        proc = dev("bench", "--tricks", "--rounds", "1", "--json", path)  # before the fix: it timed, then wrote
        one_line_error(proc, "--json", phrase)
        assert time.monotonic() - started < 30 and "trick" not in proc.stdout
        assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "my notes\n"


@pytest.mark.skipif(os.name != "posix", reason="links are POSIX's")
def test_dev_bench_replaces_its_own_json_through_a_link(tmp_path):
    (tmp_path / "figures").mkdir()
    figures, link = tmp_path / "figures" / "tricks.json", tmp_path / "tricks.json"
    figures.write_text('{"command": "an earlier run", "tricks": []}\n', encoding="utf-8")
    link.symlink_to(figures)
    proc = dev("bench", "--tricks", "--rounds", "1", "--json", link)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and '"column sums"' in figures.read_text(encoding="utf-8")  # before: the link replaced


def test_dev_bench_explorer_refuses_outputs_it_does_not_own_before_it_starts_a_browser(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# mine\n", encoding="utf-8")
    for flag, what in (("--json", "a JSON of dev.bench_explorer's figures"), ("--screenshot", "a PNG picture"),
                       ("--depth-screenshot", "a PNG picture")):
        started = time.monotonic()
        proc = dev("bench_explorer", "--steps", "1", flag, readme)  # before the fix: minutes, then README replaced
        one_line_error(proc, flag, f"exists and is not {what}", "never replaced")
        assert time.monotonic() - started < 30
    assert readme.read_text(encoding="utf-8") == "# mine\n"


def test_output_problem_lets_a_missing_file_or_one_of_its_kind_be_written(tmp_path):
    ours = lambda raw: raw.startswith(b"{")  # noqa: E731
    assert output_problem(tmp_path / "new" / "deeper" / "t.json", "--out", "a record", ours, "t.json") is None
    (tmp_path / "t.json").write_text("{}", encoding="utf-8")
    assert output_problem(tmp_path / "t.json", "--out", "a record", ours, "t.json") is None
    (tmp_path / "big.json").write_bytes(b"{" + b" " * 100)
    too_big = output_problem(tmp_path / "big.json", "--out", "a record", ours, "t.json", most=10)
    assert "more than the 10 bytes" in too_big
