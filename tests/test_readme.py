"""Every command the README shows runs as written, in the README's order, in a fresh copy of the repository.

A command is a code span or a line of a code block (after an optional `$ ` prompt) that starts with `python3`
(after optional VAR=value settings), and each ```python block. The few that train for minutes run here with fewer
steps, the same reduction for every command of a script (REDUCED); the few that set up the environment this test
already runs in, or take many minutes and have a reduced form of their own in the README, are skipped (SETUP, LONG).
A README command that fits none of these and fails, fails this test.
"""

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

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

SETUP = {  # a command starting with this -> why this test does not run it
    "python3 -m venv": "makes the virtual environment this test already runs in",
    "python3 -m pip install": "installs what this test already runs with (CI installs it)",
    "python3 -m pytest": "runs this very test",
}
LONG = {  # a command exactly -> why this test does not run it
    "python3 positions.py": "the full experiment takes minutes; `python3 positions.py --check` and `--rerun`, also"
                            " in the README, run its reduced versions",
    "python3 depth.py": "the full experiment takes about 20 minutes; `python3 depth.py --check` and `--rerun`, also in"
                        " the README, run its reduced versions",
}
REDUCED = {  # script -> arguments appended to each of its README commands here (later arguments win in argparse)
    "train.py": ["--steps", "300"],  # not to commands that set --steps themselves
    "plots.py": ["--steps", "100"],
    "spread.py": ["--schemes", "learned", "--steps", "20", "--out", "quick-spread.json"],
    "bench.py": ["--sizes", "series-b1", "--rounds", "1", "--reference-rounds", "1", "--round-seconds", "0.02"],
    "bench_explorer.py": ["--steps", "60"],
}
SERVERS = {  # a command that serves until Ctrl-C -> what this test adds to it (a browser cannot open here)
    "python3 explore.py": ["--no-open"],
    "python3 explore.py --ckpt out/topics.safetensors": ["--no-open"],
}
NEEDS_TORCH = ("--backend torch", "safetensors.torch")  # run only where torch is installed (always in CI)
NEEDS_CUDA = "--device cuda"  # run only where PyTorch sees a CUDA device (never on the machines CI uses)
ELSEWHERE = {  # a command starting with this -> why it cannot run on one machine
    "torchrun --nnodes 2": "needs two hosts",
}
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*(?:python3|torchrun) ")


def readme_commands(text):
    """The README's commands in order of appearance, each once: code spans that start with python3 (also when a line
    break falls inside one), code lines that do (after a `$ ` prompt, if any), and ```python blocks (as ("python",
    source)). A line indented by four spaces is code after a blank line or more code, prose within a paragraph.

    >>> readme_commands("Run `python3 a.py\\n--x`.\\n\\n    $ python3 b.py\\n    out\\n\\n```python\\nx = 1\\n```\\n")
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


def plan(command):
    """(how to run it, or None, and why not): the command as written, or reduced, or skipped as setup."""
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
    words = shlex.split(command)
    script = next((w for w in words if w.endswith(".py")), None)
    extra = REDUCED.get(script, [])
    if script == "train.py" and "--steps" in words:
        extra = []
    return command + "".join(" " + shlex.quote(a) for a in extra), None


def test_the_readme_lists_commands_and_each_has_a_plan():
    commands = readme_commands(README)
    assert "python3 trace_block.py" in commands and len(commands) > 20
    scripts = {w for c in commands if isinstance(c, str) for w in shlex.split(c) if w.endswith(".py")}
    assert set(REDUCED) <= scripts, "a reduction for a script the README no longer runs"
    for command in commands:
        plan(command)


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
    """Start a serving command, wait for the URL it prints, fetch that page, then stop it with Ctrl-C (SIGINT): it
    must have served the page and end with status 0."""
    proc = subprocess.Popen(shlex.split(run), cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
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
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, f"{run} ended with {proc.returncode} after Ctrl-C: {err[-2000:]}"


@pytest.mark.skipif(os.name == "nt", reason="the README's commands are the Linux and macOS ones")
def test_every_readme_command_runs_as_written_in_order(tmp_path):
    pytest.importorskip("numpy")
    try:
        import torch
        have_torch, have_cuda = True, torch.cuda.is_available()
    except ImportError:
        have_torch = have_cuda = False
    repo = tmp_path / "repo"
    fresh_copy(repo)
    bin_dir = tmp_path / "bin"  # `python3` in the commands is this interpreter
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    scripts = Path(sys.executable).parent  # where pip put torchrun beside this interpreter
    env = {**os.environ, "PATH": os.pathsep.join([str(bin_dir), str(scripts), os.environ["PATH"]])}
    ran = []
    for command in readme_commands(README):
        run, skipped = plan(command)
        text = command[1] if isinstance(command, tuple) else command
        if skipped or (not have_torch and any(marker in text for marker in NEEDS_TORCH)):
            continue
        if NEEDS_CUDA in text and not have_cuda:
            continue
        if isinstance(run, tuple):
            (repo / "readme_block.py").write_text(run[1], encoding="utf-8")
            run = "python3 readme_block.py"
        if command in SERVERS:
            serve(run, repo, env)
        else:
            proc = subprocess.run(run, shell=True, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, f"README command failed: {run}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        ran.append(run)
    assert len(ran) > 20
