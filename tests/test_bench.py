"""dev/bench.py's options that the docs' reduced run does not reach: a grown size on every path that grows, and
--against, which times another checkout's backends in the same rounds (here this checkout against itself); the
targets it prints, PyTorch eager and compiled, and the profile."""

import pytest
from run_helpers import ROOT, run

pytest.importorskip("numpy")

QUICK = ["--rounds", "1", "--round-seconds", "0.01", "--pause", "0", "--no-torch", "--threads", "1"]


def bench(*args):
    return run("-m dev.bench", *args, cwd=ROOT, timeout=600)


def rows(stdout):
    """{(size, backend as the table names it): the numbers of its row} of the table bench.py prints."""
    table = stdout.split("rounds x steps\n", 1)[1].split("\n\n", 1)[0]
    found = {}
    for line in table.splitlines():
        words = line.split()
        first_number = next(i for i, word in enumerate(words) if word[0].isdigit())
        found[words[0], " ".join(words[1:first_number])] = words[first_number:]
    return found


@pytest.fixture(scope="module")
def quick_run():
    """The table and targets of one quick run of a grown size and two series sizes, the reference for one round
    (where it runs), and this checkout's backends timed against itself (--against): what the next three tests read."""
    proc = bench(*QUICK, "--sizes", "grown-b32,series-b1,series-b32", "--reference-rounds", "1", "--against", str(ROOT))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_grown_size_runs_on_both_numpy_paths_and_not_on_the_reference(quick_run):
    found = rows(quick_run)
    assert sorted(key for key in found if key[0] == "grown-b32") == [
        ("grown-b32", b) for b in ("fast-f32", "fast-f64", "plain-f32", "plain-f64")]


def test_against_another_checkout_times_both_in_the_same_rounds(quick_run, tmp_path, capsys):
    from dev import bench as bench_module

    found = rows(quick_run)
    assert sorted(b for size, b in found if size == "series-b1") == sorted(
        ["reference", "plain-f64", "plain-f32", "fast-f64", "fast-f32"]
        + [f"{b} before" for b in ("plain-f64", "plain-f32", "fast-f64", "fast-f32")])
    assert "vs before" in quick_run
    for backend in ("plain-f32", "fast-f32"):  # ms, tokens/s, GFLOP/s, %ceil, vs ref, vs before, rounds x steps
        assert float(found["series-b1", backend][5].rstrip("x")) > 0
        assert len(found["series-b1", f"{backend} before"]) == len(found["series-b1", backend]) - 1  # no ratio
    with pytest.raises(SystemExit) as refused:  # (before any timing: in this process)
        bench_module.main(["--sizes", "series-b1", "--against", str(tmp_path)])
    assert refused.value.code == 2
    assert f"--against {tmp_path}: expected a folder holding another checkout" in capsys.readouterr().err


def target_lines(stdout):
    """{target: (status, value or why not)} from the targets bench.py prints at the end."""
    found = {}
    for line in stdout.split("\ntargets (medians over ", 1)[1].splitlines()[1:]:
        status = next(s for s in ("MET", "NOT MET", "not measured") if line.strip().startswith(s + " "))
        target, rest = line.strip()[len(status):].strip().rsplit(": ", 1)
        found[target] = (status, rest)
    return found


def test_every_target_is_printed_met_not_met_or_not_measured(quick_run):
    from dev import bench as bench_module

    assert "vs eager" in quick_run and "vs compile" in quick_run and "%ceil" in quick_run
    found = target_lines(quick_run)
    assert sorted(found) == sorted(what for *_, what in bench_module.TARGETS)
    share = found["series B=32 f32: NumPy fast >= 30% of the f32 matmul ceiling"]
    assert share[0] in ("MET", "NOT MET") and share[1].endswith("%")
    assert found["series B=32 f32: NumPy fast / PyTorch eager >= 1.5x"] == (
        "not measured", "no torch-f32 at series-b32 in this run")
    assert found["large f32: NumPy fast >= 50% of the f32 matmul ceiling"] == (
        "not measured", "no fast-f32 at large in this run")


def test_torch_eager_and_compile_are_timed_with_the_compile_time_stated():
    pytest.importorskip("torch")
    quick = [a for a in QUICK if a != "--no-torch"]
    proc = bench(*quick, "--sizes", "series-b1", "--reference-rounds", "0")
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "graph break" not in proc.stderr, proc.stderr  # the twin compiles whole
    found = rows(proc.stdout.split("\n\ntorch.compile:", 1)[0] + "\n\n")
    assert sorted(found) == sorted(("series-b1", b) for b in ("plain-f64", "plain-f32", "fast-f64", "fast-f32",
                                                               "torch-f64", "torch-f32", "compile-f32"))
    # ms, tokens/s, GFLOP/s, %ceil, vs eager, vs compile (float32 NumPy rows), rounds x steps
    assert found["series-b1", "fast-f32"][4].endswith("x") and found["series-b1", "fast-f32"][5].endswith("x")
    assert found["series-b1", "compile-f32"][4].endswith("x")  # compiled against eager
    assert "torch.compile: the first step, which compiles (not counted in the step times above): series-b1 " in (
        proc.stdout)
    status, value = target_lines(proc.stdout)["series B=1 f32: NumPy fast / PyTorch eager >= 3x"]
    assert status in ("MET", "NOT MET") and value.endswith("x")


def test_the_profile_names_every_layer_and_the_slowest_lines():
    proc = bench("--profile", "--sizes", "series-b1", "--threads", "1", "--profile-lines", "3")
    assert proc.returncode == 0, proc.stderr
    head = proc.stdout.splitlines()[0]
    assert head.startswith("numpy_fast.py float32 at series-b1 (B 1, T 63), 1 BLAS thread(s): ") and "untraced" in head
    table, slowest = proc.stdout.split("  function ", 1)[1].split("\n  the 3 slowest lines", 1)
    functions = {line.split()[0]: float(line.split()[1]) for line in table.splitlines()[1:]}  # name: calls a step
    assert functions["layernorm_forward"] == functions["layernorm_backward"] == 3
    assert {"attention_forward", "attention_backward", "block_forward", "block_backward", "softmax_blocks"} <= set(
        functions)
    lines = [line for line in slowest.splitlines()[1:] if line.strip()]
    assert len(lines) == 3 and all(" us " in line and "%" in line for line in lines)
