"""Training as a function of plain values: `train(settings)` trains a model as the settings say (settings.py) and
returns its run: the state (weights, Adam's moments and step, the batch sampler), the loss history, the lowest
validation loss and its step, and whether it stopped early. train.py is the command line on it; the experiments and
benchmarks call it with values.

    >>> run = train(Settings(steps=3, batch=2, seq_len=8, val_stories=20, eval_every=2, quiet=True))
    >>> [h["step"] for h in run.history], run.state["params"]["pos_emb"].shape, run.data.vocab
    ([0, 2, 3], (64, 16), 96)

The loop is `fit`, one step of it `step`, the backends the model files behind one interface, `model_functions`:
what a run does, and how it resumes bit for bit from a checkpoint, is docs/training.md's.
"""

import array
import dataclasses
import math
import random
import sys
import time
from contextlib import contextmanager
from functools import partial
from math import fsum
from types import SimpleNamespace

import model
from oneblock import checkpoint, settings
from oneblock import data as data_files, machine
from oneblock.config import seed_switch
from oneblock.settings import HOW_RUN, Settings, checked  # noqa: F401  (Settings: the example)

# ----------------------------------------------------------------------------------------------------------------
# The batches and the schedule


def draw_starts(rng, stream_len, seq_len, batch):
    """The start of each of batch windows of seq_len + 1 tokens, drawn uniformly with rng.

    >>> import random
    >>> draw_starts(random.Random(0), 100, 10, 3)
    [49, 53, 5]
    """
    return [rng.randrange(stream_len - seq_len) for _ in range(batch)]


def batch_starts(state, data, s):
    """The starts of the next step's B windows in data.stream: drawn with the state's seeded rng (draw_starts), or,
    when data carries an `order` (window starts, each to be read once), the step's B of them in that order, so that
    a run reads no window twice; a run longer than its order is a ValueError.

    >>> import random
    >>> batch_starts({"rng": random.Random(0), "step": 1}, SimpleNamespace(stream=range(100)), SimpleNamespace(
    ...     seq_len=10, batch=3))
    [49, 53, 5]
    >>> batch_starts({"step": 1}, SimpleNamespace(order=[40, 0, 20, 30, 10, 50]), SimpleNamespace(batch=3))
    [30, 10, 50]
    """
    order = getattr(data, "order", None)
    if order is None:
        return draw_starts(state["rng"], len(data.stream), s.seq_len, s.batch)
    first = state["step"] * s.batch
    if first + s.batch > len(order):
        raise ValueError(f"step {state['step'] + 1} needs windows {first} to {first + s.batch - 1}, but the data's"
                         f" order has {len(order)}; expected a longer order, or fewer --steps or a smaller --batch")
    return order[first:first + s.batch]


def learning_rate(step, s):
    """The learning rate of step (0-based): linear warm-up to s.lr, then a cosine down to s.min_lr at the last step.

    >>> s = SimpleNamespace(lr=1.0, min_lr=0.1, warmup=10, steps=111)
    >>> learning_rate(0, s), learning_rate(9, s), learning_rate(60, s), learning_rate(110, s)
    (0.1, 1.0, 0.55, 0.1)
    """
    if step < s.warmup:
        return s.lr * (step + 1) / s.warmup
    progress = (step - s.warmup) / max(1, s.steps - 1 - s.warmup)  # 0 after the warm-up, 1 at the last step
    return s.min_lr + 0.5 * (s.lr - s.min_lr) * (1.0 + math.cos(math.pi * progress))


# ----------------------------------------------------------------------------------------------------------------
# Tensors: NumPy arrays, torch tensors, or model.py's nested lists of floats, and what the loop does to each


def each(fn, *tensors):
    """fn applied to matching tensors: to arrays and torch tensors whole (their operators loop), to nested lists
    number by number.

    >>> each(lambda a, b: a + 2 * b, [[1.0, 2.0]], [[3.0, 4.0]])
    [[7.0, 10.0]]
    """
    if isinstance(tensors[0], list):
        return [each(fn, *parts) for parts in zip(*tensors)]
    return fn(*tensors)


def squares(t):
    """The sum of the squares of a tensor's numbers (fsum over a nested list; a dot product of an array or a torch
    tensor with itself, which for an array is BLAS's dot, the same bits as numpy.vdot).

    >>> squares([[3.0], [4.0]])
    25.0
    """
    if isinstance(t, list):
        return fsum(squares(x) for x in t)
    if isinstance(t, float):
        return t * t
    return float(t.ravel() @ t.ravel())


def root(x):
    """The square root of a float, or of each number of an array (`x ** 0.5` is NumPy's sqrt, bit for bit).

    >>> root(2.25)
    1.5
    """
    return math.sqrt(x) if isinstance(x, float) else x ** 0.5


def zeros_like(t):
    """A tensor of zeros shaped and typed like t.

    >>> zeros_like([[1.5, -2.0]])
    [[0.0, 0.0]]
    """
    return each(lambda x: x - x, t)  # +0.0 for every finite number, in floats, arrays and tensors alike


def finite(t):
    """Whether every number of a tensor is finite.

    >>> finite([[1.0, float("inf")]])
    False
    """
    if isinstance(t, list):
        return all(finite(x) for x in t)
    if isinstance(t, float):
        return math.isfinite(t)
    return bool(abs(t).max() < math.inf)  # NaN is not below infinity either


# ----------------------------------------------------------------------------------------------------------------
# The model files behind one interface: init(seed) -> params; loss_and_grads(params, ids, targets) -> (mean loss,
# gradients); loss(params, ids, targets) -> mean loss. ids and targets: B rows of T token IDs.


def python_loss_and_grads(params, ids, targets, switch):
    """model.py reads one sequence at a time: the mean of the B rows' losses and of their gradients, which is the
    mean over all B * T positions that the NumPy files compute, since every row has T positions. switch: model.py's
    own third argument (config.seed_switch)."""
    rows = []
    for x, y in zip(ids, targets):
        logits, cache = model.forward(params, x, switch)  # (T, V)
        loss, dlogits = model.loss_and_dlogits(logits, y)
        rows.append((loss, model.backward(params, cache, dlogits)))
    B = len(rows)
    grads = {name: each(lambda *g: fsum(g) / B, *(row_grads[name] for _, row_grads in rows)) for name in params}
    return fsum(loss for loss, _ in rows) / B, grads


def python_loss(params, ids, targets, switch):
    """The mean loss over the B rows, with model.py (switch: its third argument)."""
    return fsum(model.sequence_loss(params, x, y, switch) for x, y in zip(ids, targets)) / len(ids)


def model_functions(s, config):
    """(init, loss_and_grads, loss) of the model file --backend names, for this run's settings s and the model's
    ModelConfig (settings.model_config(s, vocab)). numpy_fast's Workspace holds every array of a step: its gradients
    live there until the next step."""
    if s.backend == "torch":
        from oneblock import torch_train

        return torch_train.model_functions(s, config)
    if s.backend == "python":
        switch = seed_switch(config)  # (settings.checked lets only "learned" and "none" through to model.py)
        return config.init_params, partial(python_loss_and_grads, switch=switch), partial(python_loss, switch=switch)
    import numpy as np

    from oneblock import numpy_fast, numpy_model

    init = partial(numpy_model.init_params, config, dtype=np.dtype(s.dtype))
    if s.backend == "numpy-plain":
        return (init, partial(numpy_model.loss_and_grads, config=config),
                partial(numpy_model.sequence_loss, config=config))
    workspace = numpy_fast.Workspace(init(0), config, s.batch, s.seq_len, s.threads)  # (init(0): shapes, dtype)
    return init, workspace.loss_and_grads, partial(numpy_fast.sequence_loss, config=config)


def story_nats(loss, params, stories, most=None):
    """Total -log p (a float) of predicting tokens 1.. of each story from the ones before; stories of equal length
    go through the model as one batch (of at most `most` stories, when given)."""
    total = []
    for n in sorted({len(ids) for ids in stories}):
        group = [ids for ids in stories if len(ids) == n]  # (b, n)
        for part in (group[i:i + most] for i in range(0, len(group), most)) if most else [group]:
            total.append(loss(params, [ids[:-1] for ids in part], [ids[1:] for ids in part]) * (len(part) * (n - 1)))
    return fsum(total)


# ----------------------------------------------------------------------------------------------------------------
# Checkpoints: the tensors of a state, and a state from tensors


def tensors_of(params, dtype):
    """{name: (safetensors dtype, shape, flat values)} of a dict of tensors, bit for bit.

    >>> tensors_of({"b": [0.5, 1.5]}, "float64")
    {'b': ('F64', (2,), [0.5, 1.5])}
    """
    out = {}
    for name, t in params.items():
        if isinstance(t, list):  # model.py's nested lists of Python floats
            out[name] = ("F64", model.shape(t), checkpoint.flat(t))
        else:
            if hasattr(t, "detach"):  # a torch tensor, on any device
                t = t.detach().cpu().numpy()
            st = checkpoint.DTYPE_NAMES[dtype]
            values = array.array(checkpoint.DTYPES[st])
            values.frombytes(t.astype(dtype, copy=False).tobytes())
            out[name] = (st, t.shape, values)
    return out


def from_tensors(tensors, s):
    """A dict of tensors of s.backend from {name: (dtype, shape, flat values)} of s.dtype (resumed_state holds a
    checkpoint's dtype to the run's), bit for bit."""
    if s.backend == "python":
        return {name: checkpoint.nested([float(x) for x in values], shape)
                for name, (_, shape, values) in tensors.items()}
    import numpy as np

    arrays = {name: np.frombuffer(values, dtype=s.dtype).reshape(shape).copy()
              for name, (_, shape, values) in tensors.items()}
    if s.backend == "torch":
        from oneblock import torch_train

        return torch_train.from_arrays(arrays, s)
    return arrays


# ----------------------------------------------------------------------------------------------------------------
# Progress on stderr


def rate(tokens_per_s):
    """Tokens per second at their scale: thousands as k above 10,000, every token below.

    >>> rate(678_300.0), rate(1_049.6)
    ('678k', '1,050')
    """
    return f"{tokens_per_s / 1000:,.0f}k" if tokens_per_s >= 10_000 else f"{tokens_per_s:,.0f}"


def progress(step, total, loss, tokens_per_s, started, final=False):
    """One progress-bar line on stderr, redrawn in place on a terminal, printed every 10% otherwise."""
    width = 24
    filled = width * step // total
    eta = (time.perf_counter() - started) / max(step, 1) * (total - step)
    line = (f"step {step:>{len(str(total))}}/{total} [{'#' * filled}{'.' * (width - filled)}] loss {loss:.4f}"
            f" | {rate(tokens_per_s)} tok/s | eta {eta:4.0f}s")
    if sys.stderr.isatty():
        print("\r" + line, end="\n" if final else "", file=sys.stderr, flush=True)
    elif final or step % max(1, total // 10) == 0:
        print(line, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------------------------
# The optimiser, a fresh start, a resumed one


def adam(state, grads, lr, s):
    """One Adam step on every parameter of state, with bias correction: step number state["step"] + 1. The one
    optimiser of every backend (its formulas applied to arrays whole, or number by number to nested lists)."""
    t = state["step"] + 1
    c1, c2 = 1.0 - s.beta1 ** t, 1.0 - s.beta2 ** t
    params, m, v = state["params"], state["m"], state["v"]
    for name, g in grads.items():
        m[name] = each(lambda m, g: s.beta1 * m + (1.0 - s.beta1) * g, m[name], g)
        v[name] = each(lambda v, g: s.beta2 * v + (1.0 - s.beta2) * (g * g), v[name], g)
        params[name] = each(lambda p, m, v: p - lr * (m / c1) / (root(v / c2) + s.eps), params[name], m[name],
                            v[name])


def fresh_state(init, seed):
    """The state before the first step: the reference's initial weights, zero moments, a seeded batch sampler."""
    params = init(seed)
    return {"params": params, "m": {name: zeros_like(t) for name, t in params.items()},
            "v": {name: zeros_like(t) for name, t in params.items()}, "rng": random.Random(seed), "step": 0}


def resumed_state(s, ckpt, path, training, config, data):
    """The state a loaded checkpoint (checkpoint.load_checkpoint's, of the file at path) saved, for a run with the
    settings s, the recorded settings training and the ModelConfig that reads data; a ValueError says why it
    cannot be resumed (other data, other tokenizer, another model config in any field, other settings)."""
    recorded = ckpt["metadata"]["tokenizer_sha256"]
    if recorded != data.tokenizer_sha:
        raise ValueError(f"{path}: {checkpoint.tokenizer_mismatch(recorded, data.tokenizer_sha)}")
    if ckpt["metadata"].get("corpus_sha256") != data.metadata.get("corpus_sha256"):
        raise ValueError(f"{path} was trained on another corpus.txt; it cannot be resumed on this one")
    there, here = dataclasses.asdict(ckpt["config"]), dataclasses.asdict(config)  # the whole model, field by field
    other = [f"{key} {there[key]!r} there, {here[key]!r} here" for key in here if there[key] != here[key]]
    if other:
        raise ValueError(f"{path} is another model than this run's: {'; '.join(other)}. HINT: to resume, pass the"
                         f" settings of the run you resume")
    there, here = checkpoint.recorded_settings(ckpt["training"]), checkpoint.recorded_settings(training)
    differ = [f"--{k.replace('_', '-')} {there.get(k)!r} there, {v!r} here"
              for k, v in here.items() if there.get(k) != v and k not in HOW_RUN]
    if differ:
        raise ValueError(f"{path} was made with other settings: {'; '.join(differ)}. HINT: to resume, pass the"
                         f" settings of the run you resume")
    m, v = (from_tensors(moment, s) for moment in ckpt["moments"])
    return {"params": from_tensors(ckpt["params"], s), "m": m, "v": v, "rng": ckpt["rng"], "step": ckpt["step"]}


# ----------------------------------------------------------------------------------------------------------------
# The lowest validation loss, and a validation loss that keeps rising

RISES_TO_WARN = 3  # validations in a row, each above the one before, after which a run says that it memorises


class Watch:
    """What a run watches at each validation: the lowest loss so far (best: (step, loss), or None before the first)
    and how many validations in a row rose above the one before (rises). seen(step, loss) says "lowest" for a new
    finite lowest loss (the run keeps that checkpoint), "risen" once, at the RISES_TO_WARN-th rise in a row (the run
    warns), and None otherwise. The loss at step 0 counts for the rises but is never the best: those are the seed's
    initial weights, which the seed makes again (nanoGPT keeps no checkpoint of them either). A resumed run starts
    from the best it kept and the loss its checkpoint recorded (previous); a loss that is not a number is never the
    lowest and never a rise.

    >>> watch = Watch()
    >>> [watch.seen(step, loss) for step, loss in [(0, 3.0), (10, 2.0), (20, 2.5), (30, 2.6), (40, 2.7), (50, 2.8)]]
    [None, 'lowest', None, None, 'risen', None]
    >>> watch.best, watch.latest, watch.rises
    ((10, 2.0), (50, 2.8), 4)
    >>> Watch().seen(0, 1.0), Watch().seen(10, float("nan")), Watch(best=(10, 2.0), previous=2.0).seen(20, 1.5)
    (None, None, 'lowest')
    """

    def __init__(self, best=None, previous=None):
        self.best, self.previous, self.latest, self.rises, self.warned = best, previous, None, 0, False

    def seen(self, step, loss):
        self.rises = self.rises + 1 if self.previous is not None and loss > self.previous else 0
        self.previous, self.latest = loss, (step, loss)
        if step > 0 and math.isfinite(loss) and (self.best is None or loss < self.best[1]):
            self.best = (step, loss)
            return "lowest"
        if self.rises >= RISES_TO_WARN and not self.warned:
            self.warned = True
            return "risen"
        return None


def rise_warning(watch, kept, unigram=None):
    """The one line a run prints on stderr when its validation loss has risen RISES_TO_WARN times in a row (a Watch
    that said "risen"): what happened, against guessing by token frequency where the run knows that loss (unigram,
    a text of your own; None for the stories), and where the checkpoint of the lowest loss is kept.

    >>> watch = Watch(best=(500, 3.9977))
    >>> watch.latest, watch.rises = (3000, 4.3698), 3
    >>> print(rise_warning(watch, "out/gpl.best.safetensors", 5.0523))
    warning: the validation loss rose at each of the last 3 validations, to 4.3698 at step 3000 (still below the \
5.0523 of guessing by token frequency): the model is learning its training text by heart, which does not carry \
over to new text. The lowest, 3.9977 at step 500, is kept in out/gpl.best.safetensors
    """
    (step, loss), (best_step, best_loss) = watch.latest, watch.best
    against = ""
    if unigram is not None:
        against = (f" ({'above' if loss > unigram else 'still below'} the {unigram:.4f} of guessing by token"
                   f" frequency)")
    return (f"warning: the validation loss rose at each of the last {watch.rises} validations, to {loss:.4f} at step"
            f" {step}{against}: the model is learning its training text by heart, which does not carry over to new"
            f" text. The lowest, {best_loss:.4f} at step {best_step}, is kept in {kept}")


def kept_best(ckpt, resumed, path):
    """(step, val_loss) of a best checkpoint (ckpt, loaded from the file at path) for a run that resumes the loaded
    checkpoint resumed: the best so far, which the resumed run replaces only with a lower loss. It must be of the
    same run (the same model, tokenizer, data and settings, but for where it computes) and record its val_loss; a
    ValueError says why not."""
    meta, there = ckpt["metadata"], resumed["metadata"]
    runs = [{key: value for key, value in checkpoint.recorded_settings(c["training"]).items() if key not in HOW_RUN}
            for c in (ckpt, resumed)]
    hashes = ("tokenizer_sha256", "corpus_sha256", "text_sha256")
    if ckpt["config"] != resumed["config"] or runs[0] != runs[1] or any(meta.get(k) != there.get(k) for k in hashes):
        raise ValueError(f"{path}, where this run keeps its best checkpoint, holds a checkpoint of another run (step"
                         f" {ckpt['step']}) than the one it resumes; it is never replaced by a resume: move it"
                         f" away, and the resumed run keeps a best of its own from its next validation on")
    if "val_loss" not in meta:
        raise ValueError(f"{path}, where this run keeps its best checkpoint, records no val_loss (step"
                         f" {ckpt['step']}), so no validation loss can be compared with it; move it away, and the"
                         f" resumed run keeps a best of its own from its next validation on")
    return ckpt["step"], float(meta["val_loss"])


# ----------------------------------------------------------------------------------------------------------------
# The step and the loop


def versus_floor(val_loss, val_floor, gap=True):
    """The end of a loss line: the floor and the gap to it; nothing for a text of your own, which has no floor.

    >>> versus_floor(0.3306, 0.3074), versus_floor(2.5, None)
    (' | floor 0.3074 | gap +0.0232', '')
    """
    if val_floor is None:
        return ""
    return f" | floor {val_floor:.4f}" + (f" | gap {val_loss - val_floor:+.4f}" if gap else "")


def step(state, ids, targets, loss_and_grads, s):
    """One optimiser step on B rows of T IDs and their targets: the loss and its gradient, the gradient's global
    norm, clipping, Adam. Returns (loss, norm); when either is not finite the weights and moments stay as they were
    and state["step"] does not advance."""
    loss, grads = loss_and_grads(state["params"], ids, targets)
    norm = math.sqrt(fsum(squares(g) for g in grads.values()))  # the length of the whole gradient
    if math.isfinite(loss) and math.isfinite(norm):
        if norm > s.clip:
            grads = {name: each(lambda g: g * (s.clip / norm), g) for name, g in grads.items()}
        adam(state, grads, learning_rate(state["step"], s), s)
        state["step"] += 1
    return loss, norm


def fit(state, data, s, functions, save=None, report=print, watch=None, save_best=None, warn=None):
    """Take steps until state["step"] is s.steps (or s.stop_at, to stop a run early on its own schedule), with the
    model's (init, loss_and_grads, loss) functions. The validation loss at step 0 (on a fresh state), every
    s.eval_every steps and at the end goes to report as one line and into the history; every s.ckpt_every steps
    and at the end, save(state, val_loss or None) is called (if given) once the weights are checked to be finite.
    Each validation loss goes to watch (a Watch: a resumed run's, or a fresh one): at each new lowest,
    save_best(state, val_loss) is called (if given; the weights checked as for save), and once, when the loss has
    risen RISES_TO_WARN validations in a row, warn(watch) (if given).

    Returns SimpleNamespace(history, failure, val_loss, train_seconds, best): history a list of {"step", "train",
    "val"} (train: the mean training loss since the evaluation before, None at step 0); failure None, or (reason,
    hint) when the run stopped early because the loss or the weights stopped being finite (state keeps the last
    good step); best the watch's (step, val_loss) of the lowest validation loss, or None. A KeyboardInterrupt
    passes through.
    """
    _, loss_and_grads, loss_fn = functions
    first, last = state["step"], s.steps if s.stop_at is None else s.stop_at
    history, failure, val_loss, recent, train_seconds = [], None, None, [], 0.0
    watch = Watch() if watch is None else watch

    def evaluate():
        return story_nats(loss_fn, state["params"], data.val_ids, data.val_batch) / data.val_tokens

    def watched(done, val_loss):  # whether the loss is the lowest so far; a warning once, when it keeps rising
        said = watch.seen(done, val_loss)
        if said == "risen" and warn is not None:
            warn(watch)
        return said == "lowest"

    if first == 0:
        val_loss = evaluate()
        history.append({"step": 0, "train": None, "val": val_loss})
        report(f"step {0:>6} | val {val_loss:.4f}" + versus_floor(val_loss, data.val_floor, gap=False))
        watched(0, val_loss)  # (counted for the rises; never the best: Watch)
    started = time.perf_counter()
    newline = sys.stderr.isatty() and not s.quiet  # a progress bar drawn in place must end before a loss line
    while state["step"] < last:
        # ---- one step on B windows of T + 1 tokens drawn from the training stream
        t0 = time.perf_counter()
        starts = batch_starts(state, data, s)
        share = s.batch // s.world  # under torchrun, each rank takes its own share of the B windows, in order
        starts = starts[s.rank * share:(s.rank + 1) * share]
        ids = [data.stream[i:i + s.seq_len] for i in starts]  # (B, T)
        targets = [data.stream[i + 1:i + s.seq_len + 1] for i in starts]  # (B, T) the token after each one
        loss, norm = step(state, ids, targets, loss_and_grads, s)
        train_seconds += time.perf_counter() - t0
        if not (math.isfinite(loss) and math.isfinite(norm)):
            failure = (f"error: step {state['step'] + 1}: the loss is {loss} and the gradient norm {norm}: the run"
                       f" diverged and stops", "HINT: a lower --lr")
            break
        done = state["step"]

        # ---- progress, validation, checkpoint
        recent.append(loss)
        if not s.quiet:
            progress(done, s.steps, loss, (done - first) * s.batch * s.seq_len / train_seconds, started,
                     final=done == last)
        evaluated, lowest = done % s.eval_every == 0 or done == last, False
        if evaluated:
            val_loss = evaluate()
            train_loss = fsum(recent) / len(recent)
            history.append({"step": done, "train": train_loss, "val": val_loss})
            if newline and done != s.steps:
                print(file=sys.stderr)
            report(f"step {done:>6} | train {train_loss:.4f} | val {val_loss:.4f}"
                   + versus_floor(val_loss, data.val_floor))
            recent = []
            lowest = watched(done, val_loss)
        saving = save is not None and (done % s.ckpt_every == 0 or done == last)
        if saving or (lowest and save_best is not None):
            if not all(finite(t) for t in state["params"].values()):
                failure = (f"error: step {done}: the weights are no longer finite and the run stops",
                           "HINT: a lower --lr")
                break
            if saving:
                save(state, val_loss if evaluated else None)
            if lowest and save_best is not None:
                save_best(state, val_loss)
    if val_loss is None and failure is None:  # a resumed run that had nothing left to do
        val_loss = evaluate()
    return SimpleNamespace(history=history, failure=failure, val_loss=val_loss, train_seconds=train_seconds,
                           best=watch.best)


def train(s, data=None, state=None, save=None, report=None, watch=None, save_best=None, warn=None):
    """Train a model as the settings s say (checked here: a bad one is a ValueError naming it) and return fit's run
    with the state it changed and the data it read (data.prepare's: pass a run's back in to skip reading the corpus
    again). state: where to start, a dict that the run changes in place; None or an empty dict start from
    fresh_state's (filled into the dict given, so that a caller sees the step a KeyboardInterrupt came at). The rest
    as fit takes them (default: no checkpoints, no loss lines, no warning)."""
    s = checked(s)
    data = data_files.prepare(s) if data is None else data
    with use_threads(s):  # the run's BLAS threads, whatever the caller's are
        functions = model_functions(s, settings.model_config(s, data.vocab))
        state = {} if state is None else state
        if not state:
            state.update(fresh_state(functions[0], s.seed))
        result = fit(state, data, s, functions, save=save, report=report or (lambda line: None), watch=watch,
                     save_best=save_best, warn=warn)
    return SimpleNamespace(state=state, data=data, **vars(result))


@contextmanager
def use_threads(s):
    """For a with-block: the BLAS threads of the numpy backends' settings s (machine.use_threads), restored after it;
    nothing for the python backend, which needs no package, and torch, whose threads torch_train sets."""
    if s.backend not in ("numpy", "numpy-plain"):
        yield
        return
    with machine.use_threads(s.threads, f"train.py --backend {s.backend}"):
        yield
