"""The runs of the scaling grid (experiments/scaling.py, its command line and record): a size's model and cost, the
fresh stories a run reads, one run trained and validated, and `grid_run`, one run as a task of experiments/grid.py,
which the workers of a process pool or a Dask cluster import (so this module has no command line of its own); and
`drop_run`, a run of experiments/drops.py, one size followed closely over a fixed number of steps.

A worker builds a seed's stream of stories once and the held-out stories once (grid.kept), for every run of that
seed it trains; the task's arguments are plain values (the plan, the size, the budget, the rate, the seed), so that
its result file says what it is the result of.

    >>> flops_per_token([8, 1]), steps_for([8, 1], 300_000_000, 4)
    (15360, 76)
"""

import array
import base64
import functools
import json
import math
import random
import time
from types import SimpleNamespace

import numpy as np

import bpe
from experiments import chains, grid
from experiments.recording import need, rounded, trained
from experiments.scaling_law import name_of
from oneblock import numpy_fast
from oneblock.data import TOKENIZER_FILE
from oneblock.settings import Settings, model_config

# ----------------------------------------------------------------------------------------------------------------
# Settings

VOCAB, T = bpe.VOCAB_SIZE, Settings().max_len  # the tokenizer's 96 tokens; the window of every run, 64 (train.py's)
FULL = {  # the recorded grid: about an hour and a half of both cores
    "sizes": [[8, 1], [16, 1], [16, 2], [32, 1], [32, 2], [64, 1], [64, 2]],  # [width, blocks]
    "budgets": [10_000_000_000 * 2 ** k for k in range(9)],  # FLOPs of a run: 10 to 2,560 GFLOP
    "lrs": [0.003, 0.01, 0.03], "seeds": [3, 4, 5], "batch": 16,
    "split": 0.1, "split_seeds": [6, 7],  # (a cell whose seeds span more than 0.1 nats trains two more)
    "tune_stories": 300, "validation_stories": 8000, "curve_points": 4, "bootstrap": 200,
}
REDUCED = {  # --check: the same shape in seconds; a cell whose seeds span more than 0.1 nats trains two more
    "sizes": [[8, 1], [16, 1], [32, 1]], "budgets": [300_000_000, 600_000_000, 1_200_000_000, 2_400_000_000],
    "lrs": [0.01, 0.03], "seeds": [3, 4, 5], "batch": 4, "split": 0.1, "split_seeds": [6, 7],
    "tune_stories": 20, "validation_stories": 40, "curve_points": 2, "bootstrap": 10,
}
TUNE_SEED, VALIDATION_SEED = 1001, 1002  # random.Random seeds of the held-out stories (a run's: its own seed)

# ----------------------------------------------------------------------------------------------------------------
# A size's model and cost


def size_config(size):
    """The ModelConfig of a size [width, blocks]: train.py's model of that width (4 d hidden units, one head, learned
    positions) and blocks, over the VOCAB tokens.

    >>> size_config([64, 2]).describe(), size_config([64, 2]).hidden
    ('2 blocks x 1 head, width 64, learned positions', 256)
    """
    return model_config(Settings(width=size[0], blocks=size[1]), VOCAB)


def flops_per_token(size):
    """A size's FLOPs per training token (ModelConfig.flops_per_token, 4 d hidden units, 64 positions).

    >>> flops_per_token([16, 1])
    39936
    """
    return size_config(size).flops_per_token(T)


def parameters(size):
    """A size's non-embedding parameters (ModelConfig.non_embedding_parameters).

    >>> parameters([8, 1]), parameters([64, 2])
    (856, 99584)
    """
    return size_config(size).non_embedding_parameters()


def plan_settings(plan):
    """A plan as a record keeps it (scaling.py's and drops.py's), with each size's FLOPs per token and non-embedding
    parameters."""
    return {**plan, "flops_per_token": {name_of(s): flops_per_token(s) for s in plan["sizes"]},
            "parameters": {name_of(s): parameters(s) for s in plan["sizes"]}}


def steps_for(size, budget, batch):
    """The steps of batch windows of 64 tokens that spend about budget FLOPs (at least one).

    >>> steps_for([8, 1], 10_000_000_000, 16), steps_for([64, 2], 10_000_000_000, 16)
    (636, 13)
    """
    return max(1, round(budget / (flops_per_token(size) * batch * T)))


def tokens_for(size, budget, batch):
    """The training tokens of a run of size at budget: steps_for's steps of batch windows of 64 tokens.

    >>> tokens_for([8, 1], 300_000_000, 4)
    19456
    """
    return steps_for(size, budget, batch) * batch * T


# ----------------------------------------------------------------------------------------------------------------
# The data: fresh stories, read once


def held_out(tok, seed, count):
    """(stories as token IDs, each the newline before it, the story and its newline; their tokens predicted; their
    floor in nats per token) of count stories drawn with random.Random(seed)."""
    rng, pieces, newline = random.Random(seed), chains.piece_tokens(tok), tok.encode("\n")
    ids = [newline + chains.story_ids(chains.draw(rng), pieces) + newline for _ in range(count)]
    tokens = sum(len(x) - 1 for x in ids)
    return ids, tokens, count * chains.entropy() / tokens


def story_table(tok, world=chains.WORLD):
    """What story_tokens reads: each list's words' token IDs (in the list's order) and the fixed pieces'."""
    pieces = chains.piece_tokens(tok, world)
    words = {key: [pieces[" " + w] for w in world[key]] for key in chains.LISTS}
    return SimpleNamespace(world=world, words=words, piece=pieces)


def skipping(i, taken):
    """The position in a list of its i-th entry once the positions taken (sorted) are left out.

    >>> skipping(0, [0]), skipping(1, [0, 2]), skipping(1, [3])
    (1, 3, 1)
    """
    for t in taken:
        i += i >= t
    return i


def story_tokens(indices, table):
    """The token IDs of the story of these option indices (no newline): chains.story_ids(chains.words_of(indices),
    pieces) without the words, read straight from table (story_table's). The plain line builds each story's words
    and then its pieces; this picks token lists by position, about 4x faster (a seed's stream of 167M tokens, the
    longest of the larger grid, is 2.9M stories). tests/test_scaling.py holds the two equal.

    >>> import bpe; tok = bpe.Tokenizer.load("tokenizer.json")
    >>> story_tokens([1] + [0] * 11, story_table(tok)) == chains.story_ids(chains.words_of([1] + [0] * 11),
    ...                                                                    chains.piece_tokens(tok))
    True
    """
    world, words, piece = table.world, table.words, table.piece
    picks = iter(indices)
    out = piece["at"] + piece[" the"] + words["places"][next(picks)] + piece[","]
    names, things = [], []  # (the positions taken so far, sorted)
    for _ in range(world["people"]):
        name, verb = skipping(next(picks), names), next(picks)
        colour, thing = next(picks), skipping(next(picks), things)
        out += words["names"][name] + words["verbs"][verb] + piece[" a"] + words["colours"][colour]
        out += words["things"][thing] + piece["."]
        names, things = sorted(names + [name]), sorted(things + [thing])
    holder, held = name, words["things"][thing]
    for _ in range(world["handovers"]):
        receiver = skipping(next(picks), [holder])
        out += words["names"][holder] + piece[" gives"] + piece[" the"] + held + piece[" to"]
        out += words["names"][receiver] + piece["."]
        holder = receiver
    return out + piece[" now"] + words["names"][holder] + piece[" has"] + piece[" the"] + words["colours"][colour] \
        + held + piece["."]


def check_chains_data(record):
    """Raise a ValueError where a record of runs on the chains' stories (drops.py's, scaling.py's) holds another
    entropy than chains.py's, or a seed whose training stories (training_stream's counts) include held-out ones."""
    need(record["floor"]["entropy_nats_per_story"] == rounded(chains.entropy()), "the entropy is not chains.py's")
    for seed, counts in record["data"]["streams"].items():
        need(counts["held_out"] == 0, f"seed {seed}'s training stories include {counts['held_out']} held-out ones")


def training_stream(tok, seed, tokens, held=()):
    """(stream, counts): at least tokens + 1 token IDs of stories drawn with random.Random(seed), each with its
    newline (an int32 array), and {"stories", "distinct", "held_out"}: how many stories it holds, how many of them
    differ, and how many are among the held-out stories held (their numbers, held_numbers). A story is kept as its
    number (chains.index_number, 8 bytes), not its words, to count them."""
    rng, table, newline = random.Random(seed), story_table(tok), tok.encode("\n")
    stream = np.empty(tokens + 1 + T, dtype=np.int32)  # (tokens + 1 + T,): room for the last story (at most T)
    numbers, filled = array.array("q"), 0  # (the stories' numbers, below chains.stories() < 2^63)
    while filled < tokens + 1:
        indices = chains.draw_indices(rng)
        ids = story_tokens(indices, table) + newline
        stream[filled:filled + len(ids)] = ids  # (in place: a list of ints, then the array, held three times the
        filled += len(ids)  # array's memory at once)
        numbers.append(chains.index_number(indices))
    distinct = np.unique(np.frombuffer(numbers, dtype=np.int64))  # (distinct stories,)
    inside = np.isin(distinct, np.fromiter(held, dtype=np.int64, count=len(held)))  # (distinct stories,)
    return stream[:filled], {"stories": len(numbers), "distinct": len(distinct), "held_out": int(inside.sum())}


def held_numbers(seed, count):
    """The numbers (chains.index_number) of the count stories random.Random(seed) draws first (held_out's)."""
    rng = random.Random(seed)
    return {chains.index_number(chains.draw_indices(rng)) for _ in range(count)}


def story_nats(params, config, stories):
    """Each story's -log p in nats under the model of params and config (float64), predicting its tokens after the
    first; stories of equal length go through numpy_fast.forward as one batch."""
    out = np.empty(len(stories))  # (S,)
    for n in sorted({len(ids) for ids in stories}):
        rows = [i for i, ids in enumerate(stories) if len(ids) == n]
        batch = np.array([stories[i] for i in rows])  # (b, n)
        logits, _ = numpy_fast.forward(params, batch[:, :-1], config)  # (b, n - 1, V)
        z = np.asarray(logits, dtype=np.float64)  # (b, n - 1, V)
        z -= z.max(axis=2, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=2, keepdims=True))  # (b, n - 1, V)
        picked = np.take_along_axis(logp, batch[:, 1:, None], axis=2)[:, :, 0]  # (b, n - 1)
        out[rows] = -picked.sum(axis=1)
    return out


def mean_and_error(nats, tokens_each):
    """(loss in nats per token, its standard error): the ratio of the stories' total nats to their total tokens,
    and the ratio estimator's error over the stories (each story's residual nats - tokens x loss).

    >>> mean_and_error(np.array([2.0, 4.0]), np.array([2, 2]))
    (1.5, 0.5)
    """
    loss = float(nats.sum() / tokens_each.sum())
    residual = nats - tokens_each * loss  # (S,)
    error = float(residual.std(ddof=1) / math.sqrt(len(nats)) / tokens_each.mean())
    return loss, error


# ----------------------------------------------------------------------------------------------------------------
# One run


def run_values(plan, size, steps, lr, seed):
    """The training settings of one run: the size, its steps of the plan's batch, the peak rate lr decaying to a
    tenth of itself, a warm-up of a tenth of the run (at most 100 steps), the tuning loss curve_points times.

    >>> plan = {"batch": 16, "curve_points": 4}  # (the settings of a plan it reads)
    >>> run_values(plan, [64, 2], 13, 0.01, 4)["warmup"], run_values(plan, [8, 1], 40690, 0.03, 3)["eval_every"]
    (1, 10172)
    """
    return {"width": size[0], "blocks": size[1], "steps": steps, "batch": plan["batch"], "lr": lr, "min_lr": lr / 10,
            "warmup": min(100, steps // 10), "seed": seed, "eval_every": max(1, steps // plan["curve_points"])}


def run_cell(plan, size, budget, lr, seed, data):
    """Train one size at one budget, learning rate and seed on data (its seed's stream, the tuning stories in the
    place of validation stories); return (the trained weights, the run's raw numbers, its validation loss still
    None: only the runs the sweep chooses read the validation stories, `validate`)."""
    t0 = time.perf_counter()
    steps = steps_for(size, budget, plan["batch"])
    params, history = trained(run_values(plan, size, steps, lr, seed), data=data)
    tokens = steps * plan["batch"] * T
    return params, rounded({"size": name_of(size), "budget": budget, "lr": lr, "seed": seed, "steps": steps,
                            "tokens": tokens, "flops": tokens * flops_per_token(size), "tune": history[-1]["val"],
                            "tune_curve": [[h["step"], h["val"]] for h in history], "val": None, "val_error": None,
                            "seconds": round(time.perf_counter() - t0, 1)})


def validate(run, params, config, validation):
    """The run with its validation loss and that loss's standard error, from the weights it trained (of the model
    config describes); validation: (stories, their tokens each)."""
    val, error = mean_and_error(story_nats(params, config, validation[0]), validation[1])
    return {**run, "val": rounded(val), "val_error": rounded(error)}


def run_data(tok, plan, seed, tokens, tuning, held):
    """The data a run of seed reads: the stream of its stories (enough for tokens), its windows in order, and the
    tuning stories to judge it by; with the counts of its stories."""
    stream, counts = training_stream(tok, seed, tokens, held)
    windows = (len(stream) - 1) // T  # windows of T + 1 tokens that share their ends
    data = SimpleNamespace(tok=tok, vocab=VOCAB, stream=stream, order=range(0, windows * T, T), val_ids=tuning[0],
                           val_tokens=tuning[1], val_batch=None, val_floor=tuning[2])
    return data, counts


# ----------------------------------------------------------------------------------------------------------------
# One run as a grid task


def longest_run(plan):
    """The training tokens of the plan's longest run: what each seed's stream must hold.

    >>> longest_run({"sizes": [[8, 1], [16, 1]], "budgets": [300_000_000, 600_000_000], "batch": 4})
    39168
    """
    return max(tokens_for(size, budget, plan["batch"]) for size in plan["sizes"] for budget in plan["budgets"])


@functools.lru_cache(maxsize=1)
def tokenizer():
    """The lab's tokenizer (tokenizer.json), loaded once a process (not through grid.kept, whose KEPT places are
    the streams' and the validation stories')."""
    return bpe.Tokenizer.load(TOKENIZER_FILE)


def seed_data(plan_text, seed):
    """(run_data's data, the counts of its stories) of seed under the plan (as JSON text, so that grid.kept can key
    it): the stream long enough for the plan's longest run, the tuning stories to judge a run by; the counts of
    its stories among the held-out ones are of both the tuning and the validation stories."""
    plan, tok = json.loads(plan_text), tokenizer()
    tuning = held_out(tok, TUNE_SEED, plan["tune_stories"])
    held = held_numbers(TUNE_SEED, plan["tune_stories"]) | held_numbers(VALIDATION_SEED, plan["validation_stories"])
    return run_data(tok, plan, seed, longest_run(plan), tuning, held)


def validation_data(count):
    """(the count validation stories, their tokens each): what `validate` reads."""
    stories, _, _ = held_out(tokenizer(), VALIDATION_SEED, count)
    return stories, np.array([len(x) - 1 for x in stories])  # (S,)


def grid_run(plan, size, budget, lr, seed, validated, weights=None):
    """One run of the grid as a task (experiments/grid.py): train size at budget, rate lr and seed, validated or
    not, and return {"run": its raw numbers, "stream": the counts of its seed's stories, "cpu_seconds": the CPU
    seconds of this task in the process that ran it}, and for a run not validated (the sweep's) "weights": its
    trained weights (packed), so that the run the sweep chooses is validated without training it again. Given
    weights (a sweep run's), it trains nothing: {"run": {"val", "val_error"} of those weights, "cpu_seconds"}. Its
    seed's stream and the validation stories come from grid.kept, made once a worker."""
    cpu = time.process_time()
    validation = grid.kept(validation_data, plan["validation_stories"]) if validated else None
    if weights is not None:
        run = validate({}, unpacked(weights), size_config(size), validation)
        return {"run": run, "cpu_seconds": round(time.process_time() - cpu, 3)}
    data, counts = grid.kept(seed_data, json.dumps(plan, sort_keys=True), seed)
    params, run = run_cell(plan, size, budget, lr, seed, data)
    if validated:
        run = validate(run, params, size_config(size), validation)
    kept = {} if validated else {"weights": packed(params)}
    return {"run": run, "stream": counts, **kept, "cpu_seconds": round(time.process_time() - cpu, 3)}


# ----------------------------------------------------------------------------------------------------------------
# What a run can produce: a result file, or a record's run, checked against its own settings

BELOW = 0.05  # nats a tuning loss may lie below its stories' floor (300 stories' sampling error, never a model's gain)


def run_problem(run, plan, floors, validated):
    """Why run (a run's raw numbers, as grid_run returns them and the record keeps them) is not what a run of its own
    settings under plan can give, in one line that starts with the run's name, or None: its steps, tokens and FLOPs
    are its budget's; its tuning curve holds finite losses from step 0 up to its last step, ending with its tuning
    loss; no loss lies further below its stories' floor (floors: {"tuning", "validation"}, nats per token) than
    their sampling error (BELOW; the validation loss, five of its standard errors); a validated run has a finite
    validation loss and error, any other neither.

    >>> floors = {"tuning": 0.5, "validation": 0.5}
    >>> run = {"size": "8x1", "budget": 300_000_000, "lr": 0.03, "seed": 3, "steps": 76, "tokens": 19456,
    ...        "flops": 298844160, "tune": 1.5, "tune_curve": [[0, 4.6], [76, 1.5]], "val": None, "val_error": None}
    >>> run_problem(run, REDUCED, floors, False) is None
    True
    >>> run_problem({**run, "tune": 0.001, "tune_curve": [[0, 4.6], [76, 0.001]]}, REDUCED, floors, False)
    '8x1 at 300000000 FLOPs lr 0.03 seed 3: tune 0.001 is far below the floor of its stories (0.5)'
    """
    name = f"{run['size']} at {run['budget']} FLOPs lr {run['lr']:g} seed {run['seed']}"
    size = next((s for s in plan["sizes"] if name_of(s) == run["size"]), None)
    if size is None or run["budget"] not in plan["budgets"]:
        return f"{name}: not a size and budget of the plan"
    steps = steps_for(size, run["budget"], plan["batch"])
    tokens = steps * plan["batch"] * T
    curve = run["tune_curve"]
    if run["steps"] != steps or run["tokens"] != tokens:  # (whole numbers compared, never computed with)
        return f"{name}: steps or tokens are not the budget's"
    if run["flops"] != tokens * flops_per_token(size):
        return f"{name}: flops are not the formula's"
    if not (isinstance(curve, list) and len(curve) >= 2 and all(
            isinstance(point, list) and len(point) == 2 and isinstance(point[0], int) for point in curve)):
        return f"{name}: its tuning curve is not pairs of a step and a loss"
    if not all(finite(loss) for _, loss in curve):
        return f"{name}: its tuning curve holds a loss that is not a finite number"
    if curve[0][0] != 0 or curve[-1] != [steps, run["tune"]] or any(a[0] >= b[0] for a, b in zip(curve, curve[1:])):
        return f"{name}: the tuning curve does not run from step 0 to the last step, ending at its tuning loss"
    if min(loss for _, loss in curve) <= floors["tuning"] - BELOW:
        return (f"{name}: tune {min(loss for _, loss in curve)} is far below the floor of its stories"
                f" ({floors['tuning']})")
    return val_problem(name, run, floors, validated)


def val_problem(name, run, floors, validated):
    """Why a run's validation loss and its error (run["val"], run["val_error"]) are not what a run validated or
    not can give, in one line that starts with name, or None (run_problem's rule)."""
    val, error = run["val"], run["val_error"]
    if not validated:
        return None if val is None and error is None else f"{name}: a run the sweep did not choose has read the" \
                                                            f" validation stories"
    if not (finite(val) and finite(error) and error >= 0):
        return f"{name}: its validation loss and error are not finite numbers ({val!r}, {error!r})"
    if val <= floors["validation"] - 5 * error - 1e-6:
        return f"{name}: val {val} is below the floor of the validation stories ({floors['validation']})"
    return None


def finite(x):
    """Whether x is a finite number (not a bool, NaN or infinity).

    >>> finite(1.5), finite(float("nan")), finite(True), finite(None)
    (True, False, False, False)
    """
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def result_problem(args, result, floors):
    """Why result, read from a result file of grid_run(*args), is not what that task can return, in one line, or
    None: the fields it returns and no others; the run's size, budget, rate and seed its arguments'; the run's
    numbers possible (run_problem; for a sweep run's weights validated, val_problem); its stream's counts whole
    numbers with no held-out story; a sweep run's weights of its size's names and shapes, finite."""
    plan, size, budget, lr, seed, validated = args[:6]
    name = f"{name_of(size)} at {budget} FLOPs lr {lr:g} seed {seed}"
    if not isinstance(result, dict) or not isinstance(result.get("run"), dict):
        return f"{name}: not an object with a run"
    if len(args) == 7:  # (the weights of a sweep run, validated)
        if set(result) != {"run", "cpu_seconds"} or set(result["run"]) != {"val", "val_error"}:
            return f"{name}: a validation of a sweep run's weights holds other fields than run's val and val_error"
        return val_problem(name, result["run"], floors, True)
    fields = {"run", "stream", "cpu_seconds"} | (set() if validated else {"weights"})
    if set(result) != fields:
        return f"{name}: its fields are {sorted(result)}, expected {sorted(fields)}"
    run, stream = result["run"], result["stream"]
    if not isinstance(run, dict) or set(run) != RUN_FIELDS:
        return f"{name}: its run's fields are {sorted(run)}, expected {sorted(RUN_FIELDS)}"
    if [run["size"], run["budget"], run["lr"], run["seed"]] != [name_of(size), budget, lr, seed]:
        return (f"{name}: it holds the run of {run['size']} at {run['budget']} FLOPs lr {run['lr']} seed"
                f" {run['seed']}")
    problem = stream_problem(name, stream) or run_problem(run, plan, floors, validated)
    if problem or validated:
        return problem
    return weights_problem(name, result["weights"], size_config(size).param_shapes())


RUN_FIELDS = {"size", "budget", "lr", "seed", "steps", "tokens", "flops", "tune", "tune_curve", "val", "val_error",
              "seconds"}  # the fields of a run's raw numbers (run_cell's)


def weights_problem(name, weights, shapes):
    """Why weights (packed's) are not finite float32 weights of these names and shapes, in one line, or None."""
    if not isinstance(weights, dict) or list(weights) != list(shapes):
        return f"{name}: its weights are not the parameters {', '.join(shapes)}"
    for key, shape in shapes.items():
        try:
            stored, text = weights[key]
            w = np.frombuffer(base64.b64decode(text, validate=True), dtype="<f4")  # (its numbers,)
        except (TypeError, ValueError):
            return f"{name}: its weights {key} are not a shape and base64 text"
        if stored != list(shape) or w.size != math.prod(shape) or not np.isfinite(w).all():
            return f"{name}: its weights {key} are not {len(shape)}-dimensional {shape} and finite"
    return None


def packed(params):
    """Weights as JSON values: {name: [its shape, its float32 bytes (little-endian) in base64]}, exactly.

    >>> unpacked(packed({"b": np.array([0.1, -2.0], dtype=np.float32)}))["b"].tolist() == [np.float32(0.1), -2.0]
    True
    """
    return {name: [list(w.shape), base64.b64encode(np.asarray(w, dtype="<f4").tobytes()).decode("ascii")]
            for name, w in params.items()}


def unpacked(weights):
    """packed's weights back as float32 arrays, bit for bit."""
    return {name: np.frombuffer(base64.b64decode(text), dtype="<f4").reshape(shape).astype(np.float32)
            for name, (shape, text) in weights.items()}


def task_key(size, budget, lr, seed, suffix=""):
    """The grid key of a run (the name of its result file).

    >>> task_key([16, 2], 10_000_000_000, 0.01, 3), task_key([8, 1], 300_000_000, 0.03, 3, "-chosen")
    ('16x2-10000000000-0.01-3', '8x1-300000000-0.03-3-chosen')
    """
    return f"{name_of(size)}-{budget}-{lr:g}-{seed}{suffix}"


def splits(losses, plan):
    """Whether a cell's seeds split: their validation losses (one a seed of the plan) span more than plan["split"]
    nats per token (None: never), so that some have learned to follow the chain and some not (the cell trains
    plan["split_seeds"] too).

    >>> splits([1.0, 1.05, 1.2], {"split": 0.1}), splits([1.0, 1.05, 1.09], {"split": 0.1})
    (True, False)
    """
    return plan["split"] is not None and max(losses) - min(losses) > plan["split"]


def sweep_tasks(plan):
    """(tasks, follow, chosen) of the plan's grid for grid.run_tasks(pool, grid_run, tasks, folder, follow): the
    tasks, the first seed's run of every cell at every learning rate; follow, which after the last rate of a cell
    (follow sees the tasks in order) adds the validation of the weights of the rate of least tuning loss (key
    "-chosen"), each other seed's run at that rate, validated, and after the last of those the runs of the plan's
    split_seeds where the seeds split (`splits`); chosen, {(size name, budget): that rate}, filled in as follow
    goes.

    >>> tasks, follow, chosen = sweep_tasks(REDUCED)
    >>> len(tasks), tasks[0][0], [key for key, _ in follow(tasks[0][0], {"run": {"tune": 2.0}, "weights": "W"})]
    (24, '8x1-300000000-0.01-3', [])
    >>> added = follow(tasks[1][0], {"run": {"tune": 1.0}, "weights": "W'"})
    >>> [key for key, _ in added], added[0][1][-1], chosen
    (['8x1-300000000-0.03-3-chosen', '8x1-300000000-0.03-4', '8x1-300000000-0.03-5'], "W'", {('8x1', 300000000): 0.03})
    >>> [follow(key, {"run": {"val": v}}) for key, v in [('8x1-300000000-0.03-3-chosen', 1.0),
    ...                                                  ('8x1-300000000-0.03-4', 1.5)]]
    [[], []]
    >>> [key for key, _ in follow('8x1-300000000-0.03-5', {"run": {"tune": 1.0, "val": 1.2}})]
    ['8x1-300000000-0.03-6', '8x1-300000000-0.03-7']
    >>> follow('8x1-300000000-0.03-6', {"run": {"tune": 1.0, "val": 1.1}})
    []
    """
    first, others = plan["seeds"][0], plan["seeds"][1:]
    cells = [(size, budget) for size in plan["sizes"] for budget in plan["budgets"]]
    tasks = [(task_key(size, budget, lr, first), [plan, size, budget, lr, first, False])
             for size, budget in cells for lr in plan["lrs"]]
    sweep = {key for key, _ in tasks}
    last = {task_key(size, budget, plan["lrs"][-1], first): (size, budget) for size, budget in cells}
    swept, chosen = {}, {}  # {sweep key: (its tuning loss, its weights)}; {(size name, budget): the rate chosen}
    validated = {}  # {key of a plan seed's validated run: (its cell's size, budget, its rate, the cell's losses)}

    def follow(key, result):
        if key in validated:
            size, budget, lr, losses = validated[key]
            losses.append(result["run"]["val"])
            if len(losses) < len(plan["seeds"]) or not splits(losses, plan):
                return []
            return [(task_key(size, budget, lr, seed), [plan, size, budget, lr, seed, True])
                    for seed in plan["split_seeds"]]
        if key not in sweep:  # (a split seed's run)
            return []
        swept[key] = result["run"]["tune"], result["weights"]
        if key not in last:
            return []
        size, budget = last[key]
        lr = min(plan["lrs"], key=lambda rate: swept[task_key(size, budget, rate, first)][0])  # the first of equals
        chosen[name_of(size), budget] = lr
        weights = swept[task_key(size, budget, lr, first)][1]
        for rate in plan["lrs"]:  # (the others' weights are not needed again)
            del swept[task_key(size, budget, rate, first)]
        new, losses = [(task_key(size, budget, lr, first, "-chosen"), [plan, size, budget, lr, first, True,
                                                                       weights])], []
        new += [(task_key(size, budget, lr, seed), [plan, size, budget, lr, seed, True]) for seed in others]
        for k, _ in new:
            validated[k] = size, budget, lr, losses  # (the cell's seeds' losses, as follow sees them)
        return new

    return tasks, follow, chosen


# ----------------------------------------------------------------------------------------------------------------
# The drop: one size trained for a fixed number of steps, its tuning loss followed closely (experiments/drops.py)


def drop_data(plan_text, seed):
    """(run_data's data, the counts of its stories) of seed under a drop plan (experiments/drops.py, as JSON text):
    the stream for plan["steps"] steps of plan["batch"] windows, and the tuning stories to follow the run by."""
    plan, tok = json.loads(plan_text), tokenizer()
    tuning = held_out(tok, TUNE_SEED, plan["tune_stories"])
    return run_data(tok, plan, seed, plan["steps"] * plan["batch"] * T, tuning,
                    held_numbers(TUNE_SEED, plan["tune_stories"]))


def drop_values(plan, size, seed):
    """The run settings of size under a drop plan: plan["steps"] steps of plan["batch"] windows at the peak rate
    plan["lr"] (run_values' schedule), the tuning loss every plan["eval_every"] steps."""
    return {**run_values({"batch": plan["batch"], "curve_points": 1}, size, plan["steps"], plan["lr"], seed),
            "eval_every": plan["eval_every"]}


def drop_run(plan, size, seed):
    """One run of a drop plan as a grid task: size trained for plan["steps"] steps of plan["batch"] windows at the
    peak rate plan["lr"] (run_values' schedule), its tuning loss every plan["eval_every"] steps; {"run": its raw
    numbers, "stream": the counts of its seed's stories, "cpu_seconds": the CPU seconds of the task}."""
    cpu, started = time.process_time(), time.perf_counter()
    data, counts = grid.kept(drop_data, json.dumps(plan, sort_keys=True), seed)
    _, history = trained(drop_values(plan, size, seed), data=data)
    tokens = plan["steps"] * plan["batch"] * T
    run = rounded({"size": name_of(size), "seed": seed, "lr": plan["lr"], "steps": plan["steps"], "tokens": tokens,
                   "flops": tokens * flops_per_token(size), "tune_curve": [[h["step"], h["val"]] for h in history],
                   "seconds": round(time.perf_counter() - started, 1)})
    return {"run": run, "stream": counts, "cpu_seconds": round(time.process_time() - cpu, 3)}


def drop_problem(run, plan, floor):
    """Why run (a drop run's raw numbers, drop_run's and the record's) is not what a run of its own settings under
    the drop plan can give, in one line that starts with its name, or None: its rate, steps, tokens and FLOPs the
    plan's; its tuning curve evaluated every plan["eval_every"] steps and at the end, every loss a finite number no
    further below its stories' floor (nats per token) than their sampling error (BELOW)."""
    name = f"{run['size']} seed {run['seed']}"
    size = next((s for s in plan["sizes"] if name_of(s) == run["size"]), None)
    tokens = plan["steps"] * plan["batch"] * T
    if size is None:
        return f"{name}: not a size of the plan"
    if not (run["lr"] == plan["lr"] and run["steps"] == plan["steps"] and run["tokens"] == tokens):
        return f"{name}: its rate, steps or tokens are not the plan's"
    if run["flops"] != tokens * flops_per_token(size):  # (the plan's numbers computed with, never the run's)
        return f"{name}: flops are not the formula's"
    last = plan["steps"] - plan["steps"] % plan["eval_every"]  # the last evaluation of the schedule
    evaluated = list(range(0, last + 1, plan["eval_every"])) + ([plan["steps"]] if last != plan["steps"] else [])
    curve = run["tune_curve"]
    if not (isinstance(curve, list) and all(isinstance(p, list) and len(p) == 2 for p in curve)
            and [step for step, _ in curve] == evaluated):  # (a list compared: a step of another type differs)
        return f"{name}: the tuning curve is not evaluated every {plan['eval_every']} steps and at the end"
    if not all(finite(loss) for _, loss in curve):
        return f"{name}: its tuning curve holds a loss that is not a finite number"
    if min(loss for _, loss in curve) <= floor - BELOW:
        return f"{name}: a tuning loss far below the floor"
    return None


def drop_result_problem(args, result, floor):
    """Why result, read from a result file of drop_run(*args), is not what that task can return, in one line, or
    None: its fields, its run's size and seed its arguments', its numbers possible (drop_problem), its stream's
    counts whole numbers with no held-out story."""
    plan, size, seed = args
    name = f"{name_of(size)} seed {seed}"
    if not isinstance(result, dict) or set(result) != {"run", "stream", "cpu_seconds"}:
        return f"{name}: its fields are not run, stream and cpu_seconds"
    run = result["run"]
    fields = {"size", "seed", "lr", "steps", "tokens", "flops", "tune_curve", "seconds"}
    if not isinstance(run, dict) or set(run) != fields:
        return f"{name}: its run's fields are not {', '.join(sorted(fields))}"
    if [run["size"], run["seed"]] != [name_of(size), seed]:
        return f"{name}: it holds the run of {run['size']} seed {run['seed']}"
    return stream_problem(name, result["stream"]) or drop_problem(run, plan, floor)


def stream_problem(name, stream):
    """Why stream is not the counts of a seed's stories (training_stream's), none held out, in one line, or None.

    >>> stream_problem("8x1", {"stories": 9, "distinct": 9, "held_out": 1})
    "8x1: its stream's counts are not whole numbers of stories, none of them held out"
    """
    if isinstance(stream, dict) and set(stream) == {"stories", "distinct", "held_out"} and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in stream.values()) \
            and stream["held_out"] == 0:
        return None
    return f"{name}: its stream's counts are not whole numbers of stories, none of them held out"
