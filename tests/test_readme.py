"""Every command that the README and the pages of docs/ show runs as written, in its page's order, in a fresh copy of
the repository: one test per page, so that pytest-xdist runs the pages side by side.

A command is a code span or code line that starts with `python3` or `torchrun` (page_commands), or a ```python
block. The tables below say, each with its reason, which commands run reduced (REDUCED), are skipped (SETUP, LONG),
must be refused in one line (REFUSED), report work not done yet (NOT_YET) or make a run that another command makes
(RUN_ELSEWHERE); any other that fails fails its page's test. After a page's commands the copy's root holds nothing
new that git does not ignore (tests/test_layout.py's root_entries): they write under out/.

Every page under docs/ is linked from the README and has commands of its own, and every relative link of every page
leads to a file of the repository.
"""

import importlib.util
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from test_layout import ROOT, root_entries

PAGES = ["README.md"] + sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))

SETUP = {  # a command starting with this -> why this test does not run it
    "python3 -m venv": "makes the virtual environment this test already runs in",
    "python3 -m pip install": "installs what this test already runs with (CI installs it)",
    "python3 -m pytest": "runs this very test",
}
LONG = {  # a command exactly -> why this test does not run it
    "python3 -m experiments.positions": "the full experiment takes about 20 minutes of CPU; `--check` and `--rerun`,"
                                        " on the same page, run its reduced versions",
    "python3 -m experiments.depth": "the full experiment takes about 20 minutes; `--check` and `--rerun`, on the same"
                                    " page, run its reduced versions",
    "python3 -m dev.bench_explorer --against 0fb4c05 --rounds 3": "reads the page of a git revision, and this copy"
                                    " has no git history; tests/test_explorer.py runs --against on a short run",
    "python3 -m experiments.scaling": "the full grid takes about an hour and a half of both cores; `--check`"
                                      " and `--rerun`, on the same page, run its reduced versions",
    "python3 -m experiments.drops": "the full experiment takes minutes of both cores; `--check` and `--rerun`, on"
                                    " the same page, run its reduced versions",
    "python3 -m dev.bench_grid --rounds 3 --full 2 --out out/bench-grid-full.json": "times the recorded grid's own"
        " runs, about 12 minutes; the page's other dev.bench_grid commands time the reduced grid (run on scaling.md)",
    **{f"python3 -m experiments.lessons --lesson {key} --guess {guess}": "a lesson that trains, whose labelled output"
       " tests/test_lessons.py runs (in its process) and holds the page to" for key, guess in [
           ("floor", "no"), ("positions-past-length", "3"), ("second-block", "1")]},
}
REDUCED = {  # script or module -> arguments appended to each of its commands here (later arguments win in argparse)
    "train.py": ["--steps", "300"],  # not to commands that set --steps themselves
    "experiments.plots": ["--steps", "100"],
    "experiments.spread": ["--schemes", "learned", "--steps", "20"],
    "dev.bench": ["--sizes", "series-b1", "--rounds", "1", "--reference-rounds", "1", "--round-seconds", "0.02",
                  "--no-torch"],  # (its PyTorch workers take seconds to start: tests/test_bench.py times them)
    "experiments.depth": ["--until", "250"],  # a rerun's shortest check, to its --rerun commands; others as written
    "dev.bench_train": ["--steps", "20", "--rounds", "1"],
    "dev.bench_explorer": ["--steps", "60", "--depth-steps", "25"],
    "dev.lessons_page": ["--lesson", "tokens"],  # one lesson timed (and the pictured one, with --screenshot)
    "dev.bench_grid": ["--rounds", "1", "--scale", "0.25"],  # one short round of each pool
    "dev.bench_fits": ["--rounds", "1", "--bootstrap", "10"],  # 120 fits, here and in a pool, seconds
}
RUN_ELSEWHERE = {  # (page, a command) -> (page, the command there that makes the same run): run once, there
    ("docs/developers.md", "python3 -m experiments.scaling --check"): ("docs/scaling.md",
                                                                      "python3 -m experiments.scaling --check"),
    ("docs/developers.md", "python3 -m dev.bench_fits"): ("docs/scaling.md", "python3 -m dev.bench_fits"),
    ("docs/developers.md", "python3 -m dev.bench_fits --rounds 3"): ("docs/scaling.md", "python3 -m dev.bench_fits"),
    ("docs/developers.md", "python3 -m dev.bench_grid"): ("docs/scaling.md", "python3 -m dev.bench_grid"),
    ("docs/developers.md", "python3 -m dev.bench_grid --rounds 5"): ("docs/scaling.md", "python3 -m dev.bench_grid"),
    ("docs/developers.md", "python3 -m dev.bench_grid --rounds 3 --scale 4"): ("docs/scaling.md",
                                                                              "python3 -m dev.bench_grid"),
    ("docs/developers.md", "python3 -m dev.bench --sizes series-b1 --no-torch"): ("docs/developers.md",
                                                                                 "python3 -m dev.bench"),
    ("docs/build.md", "python3 -m unittest -v test_model.py"): ("README.md", "python3 -m unittest -v test_model.py"),
    **{(page, "python3 trace_block.py --check"): ("docs/model.md", "python3 trace_block.py --check")
       for page in ("README.md", "docs/build.md", "docs/lessons.md", "docs/reproducibility.md")},
    **{("docs/reproducibility.md", command): (page, command) for page, command in [  # the checks it gathers
        ("docs/model.md", "python3 make_corpus.py --check"), ("docs/model.md", "python3 bpe.py --check"),
        ("docs/model.md", "python3 -m oneblock.floor --check"),
        ("docs/depth.md", "python3 -m experiments.depth --check"),
        ("docs/positions.md", "python3 -m experiments.positions --check"),
        ("docs/positions.md", "python3 -m experiments.positions --rerun rope --seed 3")]},
}  # (the same run: the same text, or the same once the reduction's options replace the page's values of them)
SERVERS = {  # a command that serves until Ctrl-C -> what this test adds to it (a browser cannot open here)
    "python3 explore.py": ["--no-open"],
    "python3 explore.py --ckpt out/topics.safetensors": ["--no-open"],
}
REFUSED = {  # (page, a command it shows being refused) -> its exit status; its message is one line, "error: ..."
    ("docs/training.md", "python3 train.py"): 2,  # a second run on a finished checkpoint's --out
    ("docs/explorer.md", "python3 explore.py --ckpt out/missing.safetensors"): 2,
    ("docs/own-text.md", "python3 train.py --data out/notes.txt --out out/notes.safetensors"): 2,
}
NOT_YET = {  # (page, a command it shows reporting work not done yet) -> the exit statuses it may end with
    ("README.md", "python3 -m oneblock.workbook check out/mine/model.py"): {1},  # (the workbook's steps still blank)
    ("docs/build.md", "python3 -m oneblock.workbook check out/mine/model.py"): {1},
    ("docs/build.md", "python3 -m oneblock.workbook check out/mine/model.py --json"): {1},
    ("docs/build.md", "python3 -m oneblock.workbook guess out/hunt/model.py layernorm_backward"): {0, 1},  # (a guess)
}
NEEDS = {  # a command containing this -> the module it needs; where that is missing the command is not run
    "--backend torch": "torch", "safetensors.torch": "torch", "torchrun ": "torch", "dev.bench_train": "torch",
    "dev.jit_probe": "numba",  # not a requirement of the lab; dev/jit_probe.py alone uses it
}
NEEDS_CUDA = "--device cuda"  # run only where PyTorch sees a CUDA device (never on the machines CI uses)
NEEDS_CHROMIUM = ("dev.bench_explorer", "dev.lessons_page")  # run where there is a Chromium, as
# tests/test_explorer.py does; always in CI
ELSEWHERE = {  # a command starting with this -> why it cannot run on one machine
    "torchrun --nnodes 2": "needs two hosts",
}
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*(?:python3|torchrun) ")
LINK = re.compile(r"\]\(([^)\s]+)\)")  # the target of a Markdown link or picture


def page_text(page):
    return (ROOT / page).read_text(encoding="utf-8")


def page_commands(text):
    """A page's commands in order of appearance, each once: code spans that start with python3 (also when a line
    break falls inside one), code lines that do (after a `$ ` prompt, if any), and ```python blocks (as ("python",
    source)). A line indented by four spaces is code after a blank line or more code, prose within a paragraph.

    >>> page_commands("Run `python3 a.py\\n--x`.\\n\\n    $ python3 b.py\\n    out\\n\\n```python\\nx = 1\\n```\\n")
    ['python3 a.py --x', 'python3 b.py', ('python', 'x = 1\\n')]
    """
    found, fenced, block, paragraph, in_code = [], None, [], [], False

    def end_paragraph():
        spans = re.findall(r"`([^`]+)`", " ".join(paragraph))
        found.extend(" ".join(span.split()) for span in spans if COMMAND.match(span))
        paragraph.clear()

    for line in text.splitlines():
        if line.startswith("```"):
            end_paragraph()
            if fenced == "python":
                found.append(("python", "".join(block)))
            fenced = None if fenced is not None else line[3:].strip() or "text"
            block = []
            continue
        in_code = fenced is not None or (line.startswith("    ") and (in_code or not paragraph))
        if in_code:
            code = line if fenced is not None else line[4:]
            block.append(code + "\n")
            code = code.removeprefix("$ ")
            if fenced != "python" and COMMAND.match(code):
                found.append(code)
        elif line.strip():
            paragraph.append(line.strip())
        else:
            end_paragraph()
    end_paragraph()
    return list(dict.fromkeys(found))


def program(words):
    """The script or module a command runs.

    >>> program(["python3", "-m", "dev.bench", "--tricks"]), program(["torchrun", "--standalone", "train.py"])
    ('dev.bench', 'train.py')
    """
    if "-m" in words:
        return words[words.index("-m") + 1]
    return next((w for w in words if w.endswith(".py")), None)


def plan(command):
    """(how to run it, or None, and why not): the command as written, or reduced, or skipped as setup.

    >>> plan("python3 train.py --out a.safetensors   # a comment")
    ('python3 train.py --out a.safetensors --steps 300', None)
    """
    if isinstance(command, tuple):
        return command, None
    if command in LONG:
        return None, LONG[command]
    for prefix, why in ELSEWHERE.items():
        if command.startswith(prefix):
            return None, why
    if command in SERVERS:
        return command + "".join(" " + a for a in SERVERS[command]), None
    for prefix, why in SETUP.items():
        if command.startswith(prefix):
            return None, why
    words = shlex.split(command, comments=True)
    if words != shlex.split(command):  # a shell comment ends it: the reduction goes before the comment
        command = command[:command.index(" #")].rstrip()
    extra = REDUCED.get(program(words), [])
    if program(words) == "train.py" and "--steps" in words or program(words) == "experiments.depth" and (
            "--rerun" not in words):  # (--until is an option of --rerun alone)
        extra = []
    return command + "".join(" " + shlex.quote(a) for a in extra), None


def as_run(run):
    """A run's words with each option that the reduction gives again left out where the page gave it: argparse keeps
    the last value of an option stored once (not of one appended to, such as dev.lessons_page's --lesson, which
    RUN_ELSEWHERE therefore never names).

    >>> as_run("python3 -m dev.bench_grid --rounds 5 --rounds 1 --scale 0.25")
    ['python3', '-m', 'dev.bench_grid', '--rounds', '1', '--scale', '0.25']
    """
    words = shlex.split(run)
    extra = REDUCED.get(program(words), [])
    if not extra or words[-len(extra):] != extra:  # (a command plan did not reduce)
        return words
    page, reduction = words[:-len(extra)], extra
    kept, i = [], 0
    while i < len(page):
        if page[i].startswith("--") and page[i] in extra:  # (given again by the reduction: left out, with its value)
            at = extra.index(page[i]) + 1
            i += 2 if at < len(extra) and not extra[at].startswith("--") else 1
        else:
            kept.append(page[i])
            i += 1
    return kept + reduction


def links(page):
    """The targets of a page's relative links, as paths of the repository (without a #fragment)."""
    targets = []
    for target in LINK.findall(page_text(page)):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        targets.append(((ROOT / page).parent / target.split("#")[0]).resolve())
    return targets


def test_every_docs_page_is_linked_from_the_readme_shows_commands_and_every_link_leads_to_a_file():
    assert len(PAGES) > 5, "no pages under docs/"
    linked = set(links("README.md"))
    assert [p for p in PAGES[1:] if (ROOT / p).resolve() not in linked] == [], "docs pages the README does not link"
    for page in PAGES:
        assert page_commands(page_text(page)), f"{page} shows no command"
        missing = [str(t.relative_to(ROOT)) if t.is_relative_to(ROOT) else str(t) for t in links(page) if
                   not t.is_file()]
        assert missing == [], f"{page} links to files that are not there"
    assert "python3 trace_block.py" in page_commands(page_text("README.md"))


def test_every_reduction_and_exception_is_of_a_command_a_page_shows():
    commands = [c for page in PAGES for c in page_commands(page_text(page)) if isinstance(c, str)]
    programs = {program(shlex.split(c)) for c in commands}
    assert set(REDUCED) <= programs, "a reduction for a script no page runs any more"
    for table in (LONG, SERVERS):
        assert set(table) <= set(commands), "an entry for a command no page shows any more"
    for page, command in [*REFUSED, *NOT_YET, *RUN_ELSEWHERE]:
        assert command in page_commands(page_text(page)), f"{page} no longer shows {command}"


def test_a_command_run_once_on_another_page_is_the_same_run_there():
    """RUN_ELSEWHERE's skips cannot go stale: each names (a command its page shows, checked above) a command of the
    other page that runs there (not skipped, not run elsewhere in turn) and makes the same run."""
    for (page, command), (other, there) in RUN_ELSEWHERE.items():
        assert there in page_commands(page_text(other)), f"{other} no longer shows {there}"
        assert (other, there) not in RUN_ELSEWHERE and plan(there)[0] is not None, f"{other} does not run {there}"
        assert as_run(plan(command)[0]) == as_run(plan(there)[0]), f"{page}: {command} is not the run of {there}"


def fresh_copy(dest):
    """The repository's files as a fresh clone would have them, plus changes not yet committed."""
    proc = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True)
    if proc.returncode != 0:
        pytest.skip("not a git checkout: cannot tell the repository's files from local ones")
    for name in proc.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)


def serve(run, repo, env):
    """Start a serving command, wait for the URL it prints, fetch that page, then stop it with Ctrl-C (SIGINT, as a
    terminal sends it: a background pytest starts its children with it ignored): it must have served the page and end
    with status 0. One that does not stop is killed, not left behind."""
    proc = subprocess.Popen(shlex.split(run), cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        url = None
        for line in proc.stdout:  # the URL line comes after the export
            url = next(iter(re.findall(r"http://127\.0\.0\.1:\d+/\S*", line)), None)
            if url:
                break
        assert url, f"{run} printed no URL: {proc.stderr.read()[-2000:]}"
        with urllib.request.urlopen(url, timeout=30) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    assert proc.returncode == 0, f"{run} ended with {proc.returncode} after Ctrl-C: {err[-2000:]}"


def missing(text):
    """Why this machine cannot run a command, or None."""
    for marker, module in NEEDS.items():
        if marker in text and importlib.util.find_spec(module) is None:
            return f"needs {module}"
    if NEEDS_CUDA in text:
        import torch
        if not torch.cuda.is_available():
            return "needs a CUDA device"
    if any(name in text for name in NEEDS_CHROMIUM) and not os.environ.get("CI"):
        from oneblock import machine
        if not machine.find_chromium():
            return "needs a Chromium"
    return None


@pytest.mark.skipif(os.name == "nt", reason="the pages' commands are the Linux and macOS ones")
@pytest.mark.parametrize("page", PAGES)
def test_every_command_of_the_page_runs_as_written_in_order(page, tmp_path):
    pytest.importorskip("numpy")
    repo = tmp_path / "repo"
    fresh_copy(repo)
    before = root_entries(repo)
    bin_dir = tmp_path / "bin"  # `python3` in the commands is this interpreter, in its virtual environment if any
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')  # (not a link: a
    (bin_dir / "python3").chmod(0o755)  # venv's python is known by its own path, a link to it would run without it)
    scripts = Path(sys.executable).parent  # where pip put torchrun beside this interpreter
    env = {**os.environ, "PATH": os.pathsep.join([str(bin_dir), str(scripts), os.environ["PATH"]])}
    ran, cannot = [], []
    for command in page_commands(page_text(page)):
        run, skipped = plan(command)
        text = command[1] if isinstance(command, tuple) else command
        if skipped or (page, command) in RUN_ELSEWHERE:
            continue
        if missing(text):
            cannot.append(missing(text))
            continue
        if isinstance(run, tuple):
            (repo / "page_block.py").write_text(run[1], encoding="utf-8")
            run = "python3 page_block.py"
        if command in SERVERS:
            serve(run, repo, env)
        else:
            proc = subprocess.run(run, shell=True, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
            said = f"{page}: {run}\n{proc.stdout[-2000:]}\n{proc.stderr[-8000:]}"  # (torchrun's report is long)
            if (page, command) in REFUSED:
                assert proc.returncode == REFUSED[page, command], f"not refused as the page says: {said}"
                assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("error: "), said
            elif (page, command) in NOT_YET:
                assert proc.returncode in NOT_YET[page, command] and proc.stderr == "", f"not as the page says: {said}"
            else:
                assert proc.returncode == 0, f"command failed: {said}"
        ran.append(run)
    if not ran and cannot:
        pytest.skip(f"{page}: every command " + ", ".join(sorted(set(cannot))))
    assert ran, f"{page}: no command ran"
    left = sorted(set(root_entries(repo)) - {"page_block.py"})  # (this test's own file for a ```python block)
    assert left == before, f"{page}: its commands left at the root what git does not ignore (write under out/)"
