"""Compare both NumPy paths (float64) and, when installed, PyTorch autograd (float64) with the reference model.py.

    python3 -m dev.compare                    # series size, 2 sequences of 63 tokens, positions on
    python3 -m dev.compare --batch 1 --no-positions --no-torch
    python3 -m dev.compare --positions rope --length 128    # NumPy against PyTorch: model.py has no rope
    python3 -m dev.compare --blocks 2 --heads 4             # a grown model: both NumPy paths against PyTorch
    python3 -m dev.compare --ckpt out/ckpt.safetensors      # at a checkpoint's weights, of any backend and size

The NumPy paths (docs/numpy-paths.md) and PyTorch run on the same parameters, token IDs and ModelConfig
(oneblock/config.py; model.py its switch, config.seed_switch), each with its own table: one row per tensor (every
intermediate of the forward pass, the loss, every gradient) with the largest absolute difference and the relative
error, that over the largest absolute value of the reference tensor (for an all-zero one, the absolute difference
itself). A row is OK when the relative error is within the tolerance; the exit status is 1 if any row is NOT OK.
The position schemes and the grown sizes model.py does not have are compared between each NumPy path and PyTorch
only, with the PyTorch tolerance (docs/positions.md, docs/growing.md); block k >= 1's intermediates are named like
its parameters, "block1.x1".

Without PyTorch (or with --no-torch) its rows are skipped, in one line that says why and how to install it, and the
rest is still compared; for a model the reference does not run, numpy_fast against numpy_model with the NumPy
tolerance (a check of the tricks, not of the maths the two share). The exit status is then 0 when every row that
ran is OK, and the last line says what was skipped.

The parameters are the reference's seed-3 initial values plus seeded noise, so that no layer-norm gain is exactly
1 and no bias exactly 0 (a bug that drops a gain or a bias would hide behind those values). With --ckpt they are a
checkpoint's (written by any backend of train.py, widened to float64 exactly), and its sizes, position scheme and
vocabulary are read from the file, so --blocks, --heads and --positions do not go with it; the token IDs are drawn
from its vocabulary, and a checkpoint whose tokenizer is not the one it recorded is refused. The reference runs one
sequence at a time; for a batch, its rows are stacked and its gradients averaged over the sequences, which is
what the batch's mean loss over all B * T positions asks for.

A bad checkpoint, and a --batch, --length or --blocks whose comparison would not fit in the memory this process can
still take (the reference runs in Python lists, about 32 bytes a number), is refused before any work with one line
on stderr and exit status 2.

Shape legend: B = sequences, T = positions, d = width, H = hidden width, V = vocabulary size.
"""

import argparse
import dataclasses
import random
import sys

from oneblock import machine
from oneblock.config import SCHEMES, SEED_SCHEMES, ModelConfig, prefix, seed_switch

with machine.needed_by("python3 -m dev.compare"):
    import numpy as np

    import model
    from oneblock import checkpoint, numpy_fast, numpy_model
    from oneblock.data import TOKENIZER_FILE

SERIES = ModelConfig(vocab=96, d=16, hidden=64, max_len=64)  # the series config
SEED = 3  # the seed of the reference's initial weights, under the noise
INTERMEDIATES = ["x0", "h1", "weights", "x1", "h2", "act", "x2", "logits"]  # in forward order, of one block
IN_BLOCK = INTERMEDIATES[1:-1]  # the intermediates each block has
NUMPY_PATHS = {"numpy_model": numpy_model, "numpy_fast": numpy_fast}  # name -> module, each compared in turn
TOLERANCE = 1e-12  # NumPy float64 vs the reference (or numpy_fast vs numpy_model), relative to the largest value
TORCH_TOLERANCE = 1e-11  # PyTorch float64 vs the reference

# ----------------------------------------------------------------------------------------------------------------
# Inputs


def intermediate_names(blocks):
    """The intermediates compared, in forward order, for a model of this many blocks.

    >>> intermediate_names(2)[:3], intermediate_names(2)[7:9]
    (['x0', 'h1', 'weights'], ['block1.h1', 'block1.weights'])
    """
    return ["x0", *(prefix(b) + name for b in range(blocks) for name in IN_BLOCK), "logits"]


def jittered_params(config, seed):
    """The seed-SEED initial parameters of config (dict of lists) with gauss(0, 0.05) added to every matrix entry and
    gauss(0, 0.1) to every gain and bias, drawn from seed.

    >>> p = jittered_params(SERIES, 1)
    >>> p["ln1_g"][0] != 1.0, len(p["W1"]), len(p["W1"][0])
    (True, 16, 64)
    """
    params = config.init_params(SEED)
    rng = random.Random(seed)
    for name, t in params.items():
        if isinstance(t[0], list):
            params[name] = [[v + rng.gauss(0.0, 0.05) for v in row] for row in t]
        else:
            params[name] = [v + rng.gauss(0.0, 0.1) for v in t]
    return params


def random_batch(seed, batch, length, vocab):
    """Token IDs and targets, each a list of `batch` lists of `length` ints.

    >>> ids, targets = random_batch(0, 2, 3, 96)
    >>> len(ids), len(targets[1])
    (2, 3)
    """
    rng = random.Random(seed)
    draw = lambda: [[rng.randrange(vocab) for _ in range(length)] for _ in range(batch)]  # noqa: E731
    return draw(), draw()


# ----------------------------------------------------------------------------------------------------------------
# The three runs; each returns ({intermediate name: (B, T, ...) array}, loss, {parameter name: gradient array})


def reference_run(params, ids, targets, config):
    """The reference, one sequence at a time (told config's scheme by seed_switch); intermediates stacked, loss and
    gradients averaged over sequences."""
    inter = {name: [] for name in INTERMEDIATES}
    losses, grads = [], []
    switch = seed_switch(config)
    for x, y in zip(ids, targets):
        logits, cache = model.forward(params, x, switch)
        loss, dlogits = model.loss_and_dlogits(logits, y)
        grads.append(model.backward(params, cache, dlogits))
        losses.append(loss)
        for name in INTERMEDIATES:
            value = logits if name == "logits" else cache["att"]["weights"] if name == "weights" else cache[name]
            inter[name].append(value)
    B = len(ids)
    mean_grads = {name: sum(np.array(g[name]) for g in grads) / B for name in grads[0]}
    return {name: np.array(v) for name, v in inter.items()}, sum(losses) / B, mean_grads


def numpy_run(params, ids, targets, config, path=numpy_model):
    """A NumPy path (the module numpy_model or numpy_fast) in float64 on the whole batch at once, for the model of
    config: the intermediates from its forward, the loss and gradients from its loss_and_grads."""
    p = numpy_model.from_lists(params, np.float64)
    logits, cache = path.forward(p, np.array(ids), config)
    inter = {"x0": np.array(cache["x0"])}
    for b, block in enumerate(cache["blocks"]):
        values = {**block, "weights": block["att"]["weights"]}
        inter.update({prefix(b) + name: np.array(values[name]) for name in IN_BLOCK})
    inter["logits"] = np.array(logits)
    loss, grads = path.loss_and_grads(p, np.array(ids), np.array(targets), config)
    return inter, loss, grads


def torch_run(params, ids, targets, config):
    """PyTorch autograd in float64 on the whole batch, for the model of config (imports torch)."""
    import torch

    from oneblock import torch_model

    p = torch_model.to_torch(params, torch.float64)
    loss, grads, inter = torch_model.loss_and_grads(p, torch_model.as_ids(ids), torch_model.as_ids(targets),
                                                    config)
    return ({n: t.numpy() for n, t in inter.items()}, loss, {n: g.numpy() for n, g in grads.items()})


# ----------------------------------------------------------------------------------------------------------------
# Comparing and reporting


def compare(ref, other, tol):
    """Rows (name, shape, max abs error, relative error, ok) for every intermediate, the loss and every gradient.

    >>> run = ({"x0": np.ones((1, 2))}, 1.0, {"w": np.zeros(2)})
    >>> [r[-1] for r in compare(run, run, 1e-12)]
    [True, True, True]
    """
    (ref_inter, ref_loss, ref_grads), (inter, loss, grads) = ref, other
    pairs = [(name, ref_inter[name], inter[name]) for name in ref_inter]
    pairs.append(("loss", np.array(ref_loss), np.array(loss)))
    pairs += [("grad " + name, ref_grads[name], grads[name]) for name in ref_grads]
    rows = []
    for name, want, got in pairs:
        want, got = np.asarray(want, dtype=np.float64), np.asarray(got, dtype=np.float64)
        if want.shape != got.shape:
            rows.append((name, got.shape, float("inf"), float("inf"), False))
            continue
        err = float(np.max(np.abs(want - got))) if want.size else 0.0
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        rel = err / scale if scale > 0.0 else err
        rows.append((name, want.shape, err, rel, bool(rel <= tol)))  # a NaN fails this test too
    return rows


def print_table(title, rows, tol):
    """Print one comparison as a table; return whether every row is OK."""
    width = max(14, *(len(r[0]) for r in rows))  # the names of a grown model's tensors are longer
    print(f"{title} (OK: relative error <= {tol:g})")
    print(f"  {'tensor':{width}s} {'shape':16s} {'max abs err':>12s} {'rel err':>10s}")
    for name, shape, err, rel, ok in rows:
        print(f"  {name:{width}s} {str(shape):16s} {err:12.3e} {rel:10.3e}  {'OK' if ok else 'NOT OK'}")
    all_ok = all(r[-1] for r in rows)
    print(f"  {'all OK' if all_ok else 'NOT OK: ' + str(sum(not r[-1] for r in rows)) + ' tensor(s) differ'}\n")
    return all_ok


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--batch", type=int, default=2, help="sequences (the reference runs them one by one)")
    parser.add_argument("--length", type=int, default=None,
                        help=f"tokens per sequence, 1 to 64 (to {numpy_model.LONGEST} for sinusoidal and rope;"
                             f" default 63, or with --ckpt the model's positions up to 63)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the parameter noise and the token IDs")
    parser.add_argument("--positions", choices=SCHEMES, default=None,
                        help="the position scheme (default: learned); sinusoidal and rope, which model.py does not"
                             " have, are compared between NumPy and PyTorch only")
    parser.add_argument("--no-positions", action="store_true", help="switch the position embeddings off (the same"
                                                                    " as --positions none)")
    parser.add_argument("--blocks", type=int, default=1, help="blocks of the model (default: 1); a grown model is"
                                                                  " compared between numpy_model.py and PyTorch")
    parser.add_argument("--heads", type=int, default=1, help="attention heads per block, dividing the width 16"
                                                             " (default: 1)")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison (as where torch is not"
                                                                " installed: what runs without it is still compared)")
    parser.add_argument("--ckpt", default=None, metavar="PATH",
                        help="compare at the weights of this checkpoint (train.py's, of any backend), with its sizes,"
                             " positions and vocabulary")
    args = parser.parse_args(argv)
    if args.ckpt is not None:  # the same tables at a checkpoint's weights, with the sizes it records
        given = [f"--{name}" for name in ("blocks", "heads") if getattr(args, name) != 1]
        given += ["--positions"] * (args.positions is not None) + ["--no-positions"] * args.no_positions
        if given:
            parser.error(f"{' and '.join(given)} and --ckpt: the checkpoint says its sizes and positions; drop"
                         f" {' and '.join(given)}")
        try:
            ckpt = checkpoint.load_checkpoint(args.ckpt)
            checkpoint.tokenizer_of(ckpt, TOKENIZER_FILE, args.ckpt)  # the one it carries, or the shipped one unchanged
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        config = ckpt["config"]  # the model's ModelConfig: its sizes, blocks, heads and scheme
        length, whose = min(63, config.max_len), " (the checkpoint's model)"
        model = f"{args.ckpt}: d = {config.d}, V = {config.vocab}"
        asked = f"at the weights of {args.ckpt} ({config.blocks_and_heads()})"
    else:
        if args.no_positions and args.positions not in (None, "none"):
            parser.error(f"--no-positions and --positions {args.positions} contradict each other; pick one")
        scheme = "none" if args.no_positions else args.positions or "learned"
        config = dataclasses.replace(SERIES, blocks=args.blocks, heads=args.heads, positions=scheme)
        try:
            config.checked()
        except ValueError as e:
            parser.error(f"--blocks {args.blocks} --heads {args.heads}: {e}")
        length, whose, model = 63, "", f"series config, seed {args.seed}"
        asked = f"--blocks {args.blocks} --heads {args.heads}"
    longest = config.max_len if config.positions in SEED_SCHEMES else numpy_model.LONGEST
    args.length = length if args.length is None else args.length
    if args.batch < 1 or not 1 <= args.length <= longest:
        parser.error(f"need --batch >= 1 and 1 <= --length <= {longest}{whose}")
    try:
        machine.check_memory(memory_needed(config, args.batch, args.length, config.seed_problem() is None),
                             f"--batch {args.batch} --length {args.length} {asked}")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    params = checkpoint.reference_params(ckpt) if args.ckpt is not None else jittered_params(config, args.seed)
    ids, targets = random_batch(args.seed, args.batch, args.length, config.vocab)
    print(f"{model}: B = {args.batch}, T = {args.length}, positions {config.positions}"
          + (f", {config.blocks_and_heads()}" if config.grown else "") + "\n")
    return compare_paths(params, ids, targets, config, args.no_torch)


def torch_skipped(no_torch):
    """Why the PyTorch rows are not run, in a few words, or None when they are: torch imports and no_torch is off.

    >>> torch_skipped(True)
    '--no-torch'
    """
    if no_torch:
        return "--no-torch"
    try:
        import torch  # noqa: F401
    except ImportError as e:  # not installed, or installed but broken (or something it imports is missing)
        missing = isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] == "torch"
        return "torch is not installed" if missing else f"torch cannot be imported: {e}"
    return None


def say_skipped(skipped):
    """Print the one line that says the PyTorch rows are skipped and why (and, when torch is missing, how to install
    it); nothing when none are.

    >>> say_skipped("--no-torch")
    PyTorch: skipped (--no-torch)
    """
    if skipped is not None:
        install = "" if skipped == "--no-torch" else f"; the twin's rows need it: {machine.INSTALL['torch']}"
        print(f"PyTorch: skipped ({skipped}){install}")


def compare_paths(params, ids, targets, config, no_torch):
    """For a model of config that model.py runs (ModelConfig.seed_problem): both NumPy paths and PyTorch (when it
    imports and not no_torch) against the reference. For one it does not have (its scheme, or its blocks and heads):
    each NumPy path against PyTorch, or, without PyTorch (torch_skipped), numpy_fast against numpy_model. The exit
    status, 0 when every row that ran is OK."""
    skipped, paths = torch_skipped(no_torch), dict(NUMPY_PATHS)
    setting = f"{config.positions}, {config.blocks_and_heads()}" if config.grown else config.positions
    if config.seed_problem() is None:
        base, against, tol = reference_run(params, ids, targets, config), "reference", TOLERANCE
    elif skipped is None:
        base, against, tol = torch_run(params, ids, targets, config), "PyTorch float64 autograd", TORCH_TOLERANCE
    else:
        say_skipped(skipped)
        print(f"the model {config.seed_problem()}, so it has no reference in model.py; without the twin numpy_fast"
              f" is compared with numpy_model: the tuned path against the plain one\n")
        base = numpy_run(params, ids, targets, config, paths.pop("numpy_model"))
        against, tol = "numpy_model float64", TOLERANCE
    ok = True
    for name, path in paths.items():
        rows = compare(base, numpy_run(params, ids, targets, config, path), tol)
        title = f"{name} float64 vs {against}" + (f" ({setting})" if against != "reference" else "")
        ok = print_table(title, rows, tol) and ok
    if against == "reference":
        say_skipped(skipped)
        if skipped is None:
            rows = compare(base, torch_run(params, ids, targets, config), TORCH_TOLERANCE)
            ok = print_table("PyTorch float64 autograd vs reference", rows, TORCH_TOLERANCE) and ok
    print(("all OK" if ok else "NOT OK") + (f" (PyTorch skipped: {skipped})" if skipped is not None else ""))
    return 0 if ok else 1


def memory_needed(config, batch, length, reference):
    """About how many bytes a comparison of a model of config on batch sequences of length tokens holds at once: the
    parameters, token IDs and targets as Python lists (LIST_NUMBER_BYTES a number, as checkpoint.py counts them),
    when the reference runs (reference) every sequence's intermediates and gradients as lists too, and a training
    step's float64 arrays (ModelConfig.step_bytes) for each NumPy path and PyTorch.

    >>> memory_needed(SERIES, 2, 63, True) < 10 * 2**20 < memory_needed(SERIES, 10**9, 63, True)
    True
    """
    params = config.parameter_count()
    per_token = config.activations_per_token(length)
    lists = checkpoint.LIST_NUMBER_BYTES * (params + 2 * batch * length)
    if reference:
        lists += checkpoint.LIST_NUMBER_BYTES * batch * (params + length * per_token)
    step = config.step_bytes(batch, length, 8)  # one path's
    arrays = (len(NUMPY_PATHS) + 1) * step
    return lists + arrays


if __name__ == "__main__":
    sys.exit(main())
