"""The files that the developers' commands write (dev/bench.py --json, dev/bench_explorer.py --json and its
screenshots) follow the lab's never-replace rules (atomic.output_problem, whose every kind of path
tests/test_locks.py tries), judged before any timing starts: a file that is not of their kind (your notes, the
README) is one line of usage error, and the file there stays as it was; a file of their own kind is replaced, through
a link to it the file it leads to. Each case is the command in a real subprocess."""

import os
import time

import pytest
from run_helpers import ROOT, one_line_error, run

pytest.importorskip("numpy")


def dev(module, *args):
    """python3 -m dev.module with args, in a subprocess in the lab's folder."""
    return run(f"-m dev.{module}", *args, cwd=ROOT, timeout=120)


def test_dev_bench_refuses_a_json_path_it_does_not_own_before_it_times_anything(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n", encoding="utf-8")
    started = time.monotonic()
    proc = dev("bench", "--tricks", "--rounds", "1", "--json", notes)  # before the fix: it timed, then wrote
    one_line_error(proc, "--json", "exists and is not a JSON of")
    assert time.monotonic() - started < 30 and "trick" not in proc.stdout
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["notes.txt"]
    assert notes.read_text(encoding="utf-8") == "my notes\n"


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
