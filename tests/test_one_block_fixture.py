"""One block and one head stay exactly what they were before the model could grow: the same bits from both NumPy
paths (every intermediate, the loss and every gradient, each position scheme, float64 and float32) and the same
bytes of train.py's checkpoints, as recorded in one_block_fixture.json by this file run as a script on the code
before blocks and heads (commit 0cdc8fa):

    python3 tests/test_one_block_fixture.py --write

BLAS results depend on the machine's kernels (spread.py), so the record names the NumPy, OpenBLAS kernels and
thread count it was made with; the digests are computed again in a fresh process with one BLAS thread and, where the
processor has the instructions of the recorded kernels, with those kernels (OPENBLAS_CORETYPE). On a machine that
computes with other kernels the test is skipped, saying so (the other tests check the maths there to rounding)."""

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORD = Path(__file__).resolve().parent / "one_block_fixture.json"
SCHEMES = ("learned", "none", "sinusoidal", "rope")
TRAIN_RUNS = {  # name -> train.py arguments of a short run whose checkpoint's bytes are recorded
    "numpy-learned": [],
    "numpy-rope": ["--positions", "rope"],
    "numpy-plain-sinusoidal": ["--backend", "numpy-plain", "--positions", "sinusoidal"],
    "numpy-plain-float64": ["--backend", "numpy-plain", "--dtype", "float64"],
}
NEEDS = {  # OpenBLAS kernels -> the processor's flags (/proc/cpuinfo) that they run on
    "SkylakeX": {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"},
    "Haswell": {"avx2", "fma"},
}
SHORT = ["--steps", "12", "--batch", "4", "--seq-len", "32", "--val-stories", "20", "--eval-every", "6",
         "--ckpt-every", "6", "--quiet"]


def digest(x):
    """The SHA-256 of an array's bytes (C order), or of a float's repr, shortened to 16 hex digits."""
    import numpy as np

    raw = repr(x).encode() if isinstance(x, float) else np.ascontiguousarray(x).tobytes()
    return hashlib.sha256(raw).hexdigest()[:16]


def digests():
    """{what: digest} for fixed inputs through both NumPy paths and train.py: run in a process with one BLAS
    thread (see main)."""
    import numpy as np

    from oneblock import machine, numpy_fast, numpy_model
    from oneblock.config import ModelConfig
    import model

    out = {"machine": machine.blas(1)}
    rng = np.random.default_rng(5)
    ref = model.init_params(96, 8, 16, 16, 5)
    jittered = {name: (np.array(t) + rng.normal(0.0, 0.1, np.shape(t))).tolist() for name, t in ref.items()}
    ids, targets = rng.integers(0, 96, (2, 12)), rng.integers(0, 96, (2, 12))
    for path in (numpy_model, numpy_fast):
        for dtype in (np.float64, np.float32):
            params = numpy_model.from_lists(jittered, dtype)
            for scheme in SCHEMES:
                config = ModelConfig(96, 8, 16, 16, positions=scheme)  # (the jittered model's sizes)
                key = f"{path.__name__.rsplit('.', 1)[-1]}.{np.dtype(dtype).name}.{scheme}"  # (the record's names)
                logits, cache = path.forward(params, ids, config)
                out[f"{key}.logits"] = digest(logits)
                for name in ("x0", "h1", "x1", "h2", "act", "x2"):
                    out[f"{key}.{name}"] = digest(cache[name])
                out[f"{key}.weights"] = digest(cache["att"]["weights"])
                loss, grads = path.loss_and_grads(params, ids, targets, config)
                out[f"{key}.loss"] = digest(loss)
                out[f"{key}.grad_names"] = " ".join(grads)
                for name, g in grads.items():
                    out[f"{key}.grad.{name}"] = digest(g)
    out["init_params.float32"] = digest(np.concatenate(
        [t.ravel() for t in numpy_model.init_params(ModelConfig(96, 16, 64, 64), 3, np.float32).values()]))
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in TRAIN_RUNS.items():
            path = Path(tmp) / f"{name}.safetensors"
            subprocess.run([sys.executable, str(ROOT / "train.py"), "--out", str(path), *SHORT, *args], check=True,
                           capture_output=True, cwd=tmp, timeout=300)
            out[f"train.{name}"] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return out


def runnable(machine):
    """The OpenBLAS kernels a record's machine line names, if this processor has their instructions, else None.

    >>> runnable("NumPy 2.4.6, a BLAS that does not name its kernels, 1 thread") is None
    True
    """
    named = re.search(r"OpenBLAS (\w+) kernels", machine)
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = set(next((line for line in f if line.startswith("flags")), ":").split(":", 1)[1].split())
    except OSError:
        return None
    return named[1] if named and named[1] in NEEDS and NEEDS[named[1]] <= flags else None


def computed(core=None):
    """digests() in a fresh process with one BLAS thread, as train.py computes by default, and OpenBLAS's kernels
    core where one is given."""
    env = {**os.environ, **{var: "1" for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}}
    if core is not None:
        env["OPENBLAS_CORETYPE"] = core
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--print"], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_one_block_one_head_gives_the_recorded_bits():
    pytest.importorskip("numpy")
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    now = computed(runnable(record["machine"]))
    if now["machine"] != record["machine"]:
        pytest.skip(f"the fixture was recorded with {record['machine']}; here the NumPy path computes with"
                    f" {now['machine']}, whose last bits differ (spread.py)")
    assert list(now) == list(record)
    differ = [key for key in record if now[key] != record[key]]
    assert not differ, f"{len(differ)} of {len(record)} digests differ from the record, the first: {differ[:5]}"


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT)]
    if sys.argv[1:] == ["--print"]:
        print(json.dumps(digests()))
    elif sys.argv[1:] == ["--write"]:
        RECORD.write_text(json.dumps(computed(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {RECORD}")
    else:
        sys.exit("usage: python3 tests/test_one_block_fixture.py --write  (records the digests of this code)")
