"""Hundreds of damaged checkpoints (checkpoint_edits.mutations of its three RUNS) through every tool that reads one:
sample.py, compare.py --ckpt, train.py --resume and explore.py --export. Each must either refuse the file (exit
status 2, one line on stderr that starts with "error:", nothing on stdout, nothing written) or give exactly what the
undamaged file gives: the same exit status, stdout, stderr and files, the checkpoint as it was (train.py --resume has
nothing left to do), and for explore.py the same export (`exported`). The own text is read in windows as long as the
model (seq_len = max_len = 8), so that no damaged digit of seq_len is both in range and different.

Each case runs in a process forked from tests/fork_server.py, under RLIMIT_AS: the HOSTILE_HEADERS first, each
refused within HOSTILE_S of CPU time, then the rest; no deadline cuts the run short, so any machine tries the same
files.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

from oneblock import checkpoint
from oneblock.config import ModelConfig
from checkpoint_edits import HOSTILE_HEADERS, ROOT, RUNS, mutations, two_documents

pytest.importorskip("numpy")
if not hasattr(os, "fork"):
    pytest.skip("the fork server needs os.fork (not on Windows)", allow_module_level=True)

CHILD_MEMORY = 4 << 30  # RLIMIT_AS of each case's process: a regression that allocates without end stops there
CHILD_LIMIT_S = 30  # one case, at most
CKPT = "m.safetensors"  # each tool's copy of the case, in its own folder
SITE = "site"  # explore.py --export's folder
HOSTILE_S = 5.0  # the most CPU time (the machine's other load is not the tool's) to refuse one of HOSTILE_HEADERS


# ----------------------------------------------------------------------------------------------------------------
# Running the tools


COMMANDS = {"sample": "sample.py", "compare": "-m dev.compare", "train": "train.py", "explore": "explore.py"}


def exported(folder, one_block):
    """What explore.py --export wrote, in a form to compare: every file's bytes, but the weights as their tensors and
    config, and the manifest parsed (without val_loss for a version 1 file, whose metadata is not hashed). The config
    with its scheme spelled out: one without "positions" says it by use_positions, as files from before the schemes
    do, and the page (checkpoint.js) reads the two the same way, as ModelConfig.from_json does."""
    site = folder / SITE
    files = {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}
    tensors, metadata = checkpoint.decode(files.pop("data/weights.safetensors"))
    manifest = json.loads(files.pop("data/manifest.json"))
    if one_block:
        manifest.pop("val_loss")
    config = json.loads(metadata["config"])
    config["positions"] = ModelConfig.from_json(config).positions
    return (files, manifest, json.dumps(config, sort_keys=True),
            {name: (dtype, shape, values.tobytes()) for name, (dtype, shape, values) in tensors.items()})


TOOLS = {  # tool -> the arguments of its case, for a base run's train.py arguments
    "sample": lambda run: ["--ckpt", CKPT, "--tokens", "12", "--seed", "1"],
    "compare": lambda run: ["--ckpt", CKPT, "--no-torch", "--batch", "1", "--length", "6"],
    "train": lambda run: [*run, "--out", CKPT, "--resume"],
    "explore": lambda run: ["--ckpt", CKPT, "--export", SITE],
}


def outcome(tool, folder, name, raw):
    """Run tool on the checkpoint bytes raw (a mutation of the base name) in folder: (status, stdout, stderr, what
    else it did: the files it left in folder, whether the checkpoint is as it was, what it exported; the CPU seconds
    it took), from a forked run of the tool's server."""
    (folder / CKPT).write_bytes(raw)
    shutil.rmtree(folder / SITE, ignore_errors=True)
    argv, server = TOOLS[tool](RUNS[name]), SERVERS[tool]
    request = {"argv": argv, "cwd": str(folder), "stdout": str(folder.parent / f"{folder.name}.out"),
               "stderr": str(folder.parent / f"{folder.name}.err"), "limit_s": CHILD_LIMIT_S}
    server.stdin.write(json.dumps(request) + "\n")
    server.stdin.flush()
    reply = json.loads(server.stdout.readline())
    assert not reply["timed_out"], f"{argv} ran past {CHILD_LIMIT_S} s"
    out = (folder.parent / f"{folder.name}.out").read_text(encoding="utf-8", errors="replace")
    err = (folder.parent / f"{folder.name}.err").read_text(encoding="utf-8", errors="replace")
    status = reply["status"] if reply["signal"] is None else -reply["signal"]
    out = re.sub(r"\b[0-9]+\.[0-9] s\b", "N s", out)  # (train.py's summary says how long it took: not the file's)
    left = sorted(p.name for p in folder.iterdir())
    said = re.sub(r", val loss [0-9.]+", "", err) if name != "grown" else err  # (version 1's val_loss: see above)
    more = {"files": left, "ckpt_unchanged": (folder / CKPT).read_bytes() == raw, "stderr": said}
    if tool == "explore" and status == 0:
        more["export"] = exported(folder, one_block=name != "grown")
    return status, out, err, more, reply["cpu_s"]


def problem(got, want):
    """Why the outcome got of a damaged file is neither a one-line refusal that left nothing behind nor the outcome
    want of the good file; None if it is one of the two."""
    status, out, err, more = got[:4]
    if "Traceback" in err:
        return f"a traceback: {err[-600:]}"
    if not more["ckpt_unchanged"]:
        return "the checkpoint file changed"
    if (status, out) == want[:2] and more == want[3]:
        return None
    lines = err.splitlines()
    if status == 2 and out == "" and len(lines) == 1 and lines[0].startswith("error: ") and err.endswith("\n"):
        expected = [name for name in want[3]["files"] if name != SITE]  # a refusal exports nothing
        return None if more["files"] == expected else f"a refusal that left {more['files']}, not {expected}"
    return (f"exit {status}, stdout {out[-300:]!r}, stderr {err[-400:]!r}; the good file gives exit {want[0]},"
            f" stdout {want[1][-300:]!r}, stderr {want[2][-400:]!r}")


SERVERS = {}


def test_damaged_checkpoints_are_refused_in_one_line_or_read_as_the_good_one(base_checkpoints, tmp_path):
    _, bases = base_checkpoints
    started = time.monotonic()
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    for tool in TOOLS:
        SERVERS[tool] = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fork_server.py"), COMMANDS[tool],
                                          str(CHILD_MEMORY)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         env=env)
    try:
        folders = {}  # (tool, base) -> the folder its cases run in, with the text the own text's model learned
        for tool in TOOLS:
            for name in RUNS:
                folders[tool, name] = tmp_path / f"{tool}-{name}"
                folders[tool, name].mkdir()
                (folders[tool, name] / "notes.txt").write_text(two_documents(), encoding="utf-8")
        # the good files first: what each tool gives for them is what a damaged file that is read must give
        want = {(tool, name): outcome(tool, folders[tool, name], name, raw)
                for name, raw in bases.items() for tool in TOOLS}
        for (tool, name), (status, out, err, more, _) in want.items():
            assert status == 0, (tool, name, err)
            assert "Traceback" not in err and more["ckpt_unchanged"], (tool, name, err)
        cases = mutations(bases)
        failures, ran, read = [], dict.fromkeys(TOOLS, 0), dict.fromkeys(TOOLS, 0)

        def work(tool):
            for label, raw in sorted(cases, key=lambda case: not case[0].endswith(HOSTILE_HEADERS)):  # (those first)
                name = label.split(":")[0]
                got = outcome(tool, folders[tool, name], name, raw)
                why = problem(got, want[tool, name])
                if not why and label.endswith(HOSTILE_HEADERS) and got[4] > HOSTILE_S:
                    why = f"refused after {got[4]:.1f} s of CPU, not at once"
                if why:
                    failures.append(f"{tool} on {label}: {why}")
                ran[tool] += 1
                read[tool] += got[:2] == want[tool, name][:2] and got[3] == want[tool, name][3]

        threads = [threading.Thread(target=work, args=(tool,)) for tool in TOOLS]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for server in SERVERS.values():
            server.stdin.close()
            server.wait(timeout=60)
        SERVERS.clear()
    elapsed = time.monotonic() - started
    print(f"\n{len(cases)} damaged checkpoints; cases run: {ran} in {elapsed:.1f} s, of which read as the good file"
          f" (the rest refused): {read}")
    assert failures == [], f"{len(failures)} of {sum(ran.values())} cases:\n" + "\n".join(failures[:15])
    assert ran == dict.fromkeys(TOOLS, len(cases)), ran  # (a thread that died on an error ran fewer)
