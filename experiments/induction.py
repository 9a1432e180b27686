"""The induction task (Elhage et al. 2021, Olsson et al. 2022), which depth.py measures and plots.py draws: periodic
sequences of token IDs, a model trained on them with train.py's step, and what it learned to copy.

Each sequence is a segment of p distinct tokens, p from 4 to 16, repeated to fill the 65 tokens of a window: why
copying it takes two blocks, and what the experiment measures: docs/depth.md, "The experiment".

    >>> ids, targets, periods = periodic(random.Random(0), 3)
    >>> ids.shape, periods.tolist(), bool(copyable(periods, 64)[0, 10]), bool(copyable(periods, 64)[0, 9])
    ((3, 64), [10, 7, 15], True, False)
"""

import math
import random  # noqa: F401  (the example above)

import numpy as np

import bpe
from experiments.recording import lr_values, target_nats
from oneblock import numpy_fast, training
from oneblock.settings import Settings, checked, model_config

PERIODS = (4, 16)  # the shortest and longest repeated segment of an induction sequence
WINDOW = Settings().max_len  # 64: tokens an induction sequence is read in (train.py's max_len)
VOCAB = bpe.VOCAB_SIZE  # the tokenizer's vocabulary: induction sequences are IDs 0..95
TUNE_SEED, TEST_SEED = 1001, 1002  # random.Random seeds of depth.py's fixed tuning and test sequences (training
                                   # draws its own from each run's seed)


def induction_config(size):
    """The ModelConfig of an induction model of size (blocks, heads): train.py's width and positions, over the
    VOCAB tokens.

    >>> induction_config((2, 4)).describe()
    '2 blocks x 4 heads, width 16, learned positions'
    """
    return model_config(Settings(blocks=size[0], heads=size[1]), VOCAB)

# ----------------------------------------------------------------------------------------------------------------
# Periodic sequences, and where copying can work


def periodic(rng, count, length=WINDOW + 1):
    """(ids, targets, periods): count sequences of length tokens, each a segment of p distinct tokens (p from
    PERIODS, the tokens from the VOCAB, both drawn with rng) repeated; ids are the first length - 1 tokens of each,
    targets the last length - 1, periods (count,) each p.

    >>> ids, targets, periods = periodic(random.Random(0), 2, 12)
    >>> p = periods[0]
    >>> ids.shape, bool((ids[:, 1:] == targets[:, :-1]).all()), bool((ids[0, p:] == ids[0, :-p]).all())
    ((2, 11), True, True)
    """
    rows, periods = [], []
    for _ in range(count):
        p = rng.randint(*PERIODS)
        segment = rng.sample(range(VOCAB), p)
        rows.append((segment * (length // p + 1))[:length])
        periods.append(p)
    sequences = np.array(rows)  # (count, length)
    return sequences[:, :-1], sequences[:, 1:], np.array(periods)


def copyable(periods, T):
    """(S, T) True where position t can copy its target: t >= p, so the token at t occurred one period back, and the
    target is the token after that occurrence.

    >>> copyable(np.array([3]), 5).astype(int)
    array([[0, 0, 0, 1, 1]])
    """
    return np.arange(T)[None, :] >= periods[:, None]


def first_period(periods, T):
    """(S, T) True where the target is a token of the first segment not yet seen: t + 1 < p. (The position t = p - 1
    between them, whose target starts the second period, is in neither: its token has not occurred before, and
    nothing says the segment ends there.)

    >>> first_period(np.array([3]), 5).astype(int)
    array([[1, 1, 0, 0, 0]])
    """
    return np.arange(T)[None, :] + 1 < periods[:, None]


# ----------------------------------------------------------------------------------------------------------------
# What a model learned: losses, copying, and each head's scores


def head_scores(weights, periods):
    """{"induction", "previous_token"} of one head, weights (S, T, T): over the copyable positions t, its attention
    summed over the positions j after an earlier occurrence of token t (j = t + 1 - k p, k >= 1: every earlier
    period, since a copying head may read any of them), averaged; and its mean attention from each position t >= 1
    to t - 1.

    >>> w = np.zeros((1, 5, 5)); w[0, np.arange(5), np.maximum(np.arange(5) - 1, 0)] = 1.0  # each reads the one before
    >>> head_scores(w, np.array([3]))
    {'induction': 0.0, 'previous_token': 1.0}
    >>> w = np.zeros((1, 5, 5)); w[0, 3, 1] = w[0, 4, 2] = 1.0  # t = 3 and 4 read the token after one period back
    >>> head_scores(w, np.array([3]))
    {'induction': 1.0, 'previous_token': 0.0}
    """
    S, T, _ = weights.shape
    t, j = np.arange(T)[:, None], np.arange(T)[None, :]  # (T, 1), (1, T)
    p = periods[:, None, None]  # (S, 1, 1)
    after_earlier = (j >= 1) & (j <= t) & ((t + 1 - j) % p == 0)  # (S, T, T) j follows an earlier occurrence of t
    copy = copyable(periods, T)  # (S, T)
    induction = (weights * after_earlier).sum(axis=2)[copy]  # (n,)
    previous = weights[:, np.arange(1, T), np.arange(T - 1)]  # (S, T - 1)
    return {"induction": float(induction.mean()), "previous_token": float(previous.mean())}


def induction_measures(params, config, sequences, chunk=100):
    """{"loss", "copy_loss", "copy_accuracy", "first_period_loss"} on sequences = (ids, targets, periods), and each
    head's scores (`head_scores`) as [[{...} for each head] for each block], of the model of params and config,
    through numpy_fast.py in chunks."""
    ids, targets, periods = sequences
    heads = config.heads
    losses, right, scores = [], [], []
    for start in range(0, len(ids), chunk):
        part = slice(start, start + chunk)
        logits, cache = numpy_fast.forward(params, ids[part], config)  # (s, T, V)
        losses.append(target_nats(logits, targets[part]))  # (s, T)
        right.append(np.asarray(logits).argmax(axis=2) == targets[part])
        weights = [np.asarray(b["att"]["weights"], dtype=np.float64) for b in cache["blocks"]]
        weights = [w[:, None] if heads == 1 else w for w in weights]  # (s, nh, T, T) each
        scores.append([[head_scores(w[:, h], periods[part]) for h in range(heads)] for w in weights])
    losses, right = np.concatenate(losses), np.concatenate(right)  # (S, T) each
    copy, first = copyable(periods, ids.shape[1]), first_period(periods, ids.shape[1])  # (S, T) each
    weight = [min(chunk, len(ids) - start) for start in range(0, len(ids), chunk)]  # sequences per chunk
    blocks = [[{key: sum(w * chunk_scores[b][h][key] for w, chunk_scores in zip(weight, scores)) / len(ids)
                for key in ("induction", "previous_token")} for h in range(heads)] for b in range(len(scores[0]))]
    return {"loss": float(losses.mean()), "copy_loss": float(losses[copy].mean()),
            "copy_accuracy": float(right[copy].mean()), "first_period_loss": float(losses[first].mean())}, blocks


# ----------------------------------------------------------------------------------------------------------------
# Training on fresh sequences


def train_induction(size, lr, seed, settings, tuning, until=None, report=None):
    """Train a model of size (blocks, heads) on fresh periodic sequences with train.py's step (its Adam, clipping
    and schedule) and the settings of a plan's induction task (steps, batch, eval_every) at peak learning rate lr;
    return (params, tuning curve [[step, mean loss on the tuning sequences], ...]). report, when given, is called
    with (step, training loss) after every step (the lessons' progress lines)."""
    s = checked(Settings(steps=settings["steps"], batch=settings["batch"], seq_len=WINDOW, **lr_values(lr),
                         blocks=size[0], heads=size[1], seed=seed))
    init, loss_and_grads, loss = training.model_functions(s, model_config(s, VOCAB))
    state = training.fresh_state(init, s.seed)  # the weights, and state["rng"] draws the sequences
    curve = [[0, loss(state["params"], *tuning[:2])]]
    last = s.steps if until is None else until
    while state["step"] < last:
        ids, targets, _ = periodic(state["rng"], s.batch)
        step_loss, norm = training.step(state, ids, targets, loss_and_grads, s)
        if not (math.isfinite(step_loss) and math.isfinite(norm)):
            raise RuntimeError(f"{size[0]}x{size[1]} lr {lr:g} seed {seed}: the loss is {step_loss} at step"
                               f" {state['step'] + 1}: the run diverged")
        if report is not None:
            report(state["step"], step_loss)
        if state["step"] % settings["eval_every"] == 0 or state["step"] == last:
            curve.append([state["step"], loss(state["params"], *tuning[:2])])
    return state["params"], curve
