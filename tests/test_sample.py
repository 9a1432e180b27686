"""sample.py: deterministic sampling, greedy decoding checked against the reference model, cropping to 64 positions,
and friendly errors; sample.py runs in this process (runpy), as its command line runs it. (The twin's logits:
tests/test_one_config.py; sample.py's three backends giving the same greedy text: tests/test_torch_train.py; a
prompt the tokenizer cannot read: tests/test_own_text.py.)"""

import pytest
from run_helpers import ROOT, ran, run

import bpe
from oneblock import checkpoint, sampling
import model

np = pytest.importorskip("numpy")
TOK = bpe.Tokenizer.load(ROOT / "tokenizer.json")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A float32 checkpoint after a short training run (good enough to write story-like text)."""
    out = tmp_path_factory.mktemp("sample") / "ckpt.safetensors"
    proc = run("train.py", "--out", out, "--steps", 400, "--batch", 8, "--seq-len", 64, "--val-stories", 20,
               "--eval-every", 400, "--quiet", cwd=out.parent)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture
def run_sample(capsys):
    """sample.py in this process on a checkpoint: run_sample(ckpt, *args) gives returncode, stdout and stderr."""
    return lambda ckpt, *args: ran("sample.py", capsys, "--ckpt", ckpt, *args)


@pytest.fixture
def sample_text(run_sample):
    """The text of a sample.py run that must succeed: sample_text(ckpt, *args)."""
    def text(ckpt, *args):
        proc = run_sample(ckpt, *args)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout
    return text


def test_same_seed_same_text_other_seed_other_text(ckpt, sample_text):
    a = sample_text(ckpt, "--seed", 1, "--tokens", 80)
    assert a == sample_text(ckpt, "--seed", 1, "--tokens", 80)
    assert a != sample_text(ckpt, "--seed", 2, "--tokens", 80)
    assert len(TOK.encode(a.removesuffix("\n"))) == 80  # the empty prompt plus 80 new tokens, then print's newline


def test_greedy_follows_the_reference_models_argmax(ckpt, sample_text):
    # an independent greedy loop on model.py: the most likely token each time, context cropped to 64 tokens
    params = checkpoint.reference_params(checkpoint.load_checkpoint(ckpt))
    ids = TOK.encode("\nmia has")
    for _ in range(90):
        logits, _ = model.forward(params, ids[-64:])
        last = logits[-1]
        ids.append(last.index(max(last)))
    want = "mia has" + TOK.decode(ids[len(TOK.encode("\nmia has")):]) + "\n"
    for backend in ("numpy", "python"):
        assert sample_text(ckpt, "--prompt", "mia has", "--temperature", 0, "--tokens", 90, "--backend",
                           backend) == want, backend


def test_choose_draws_in_proportion_respects_top_k_and_greedy_draws_nothing():
    import random

    rng = random.Random(0)
    logits = [0.0, 1.0, 2.0]
    draws = [sampling.choose(logits, 1.0, 0, rng) for _ in range(20000)]
    p = np.exp(logits) / np.exp(logits).sum()
    assert np.allclose(np.bincount(draws, minlength=3) / len(draws), p, atol=0.02)
    assert set(sampling.choose(logits, 5.0, 2, rng) for _ in range(500)) == {1, 2}
    assert sampling.choose([1.0, 3.0, 3.0], 0, 0, None) == 1  # greedy: the first of equal largest, no draw
    assert {sampling.choose([1.0, 3.0, 3.0], t, 1, random.Random(seed)) for t in (0.5, 5.0) for seed in range(50)} == {
        1}  # top-k 1 is greedy, whatever the seed and the temperature


def test_bad_checkpoint_and_bad_options_are_messages(ckpt, tmp_path, run_sample):
    proc = run_sample(tmp_path / "missing.safetensors")
    assert proc.returncode == 2 and "no checkpoint at" in proc.stderr
    proc = run_sample(tmp_path)  # a folder, not a file
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr == (f"error: --ckpt {tmp_path} is a folder; expected a checkpoint file such as"
                           f" {tmp_path / 'ckpt.safetensors'}\n")
    for args, phrase in [(("--tokens", 0), "--tokens must be at least 1"),
                         (("--temperature", -1), "--temperature must be 0 (greedy) or a positive finite number"),
                         (("--temperature", "inf"), "a positive finite number, got inf"),
                         (("--top-k", 97), "--top-k 97 is more than the 96 tokens")]:
        proc = run_sample(ckpt, *args)
        assert proc.returncode == 2 and phrase in proc.stderr, proc.stderr
