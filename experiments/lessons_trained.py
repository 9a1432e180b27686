"""The lessons that train, 11 to 13 of docs/lessons.md, with oneblock/lessons.py's Lesson, judges and lab: each
answer trains a short NumPy run live, writing its progress through lab.write.

    >>> [lesson.key for lesson in LESSONS]
    ['floor', 'positions-past-length', 'second-block']
    >>> scheme_choice({"none", "sinusoidal", "rope"})
    'every scheme but learned'

The times the explanations quote, and how each was measured: docs/lessons.md's last section.
"""

import importlib.util
import random
import time
from functools import partial

from experiments.recording import run_config, target_nats, windows
from oneblock import floor, machine, numpy_model, training
from oneblock.config import SCHEMES
from oneblock.lessons import Exactly, Lesson, Skip, each, shipped_tokenizer, shows, weights
from oneblock.settings import Settings


def need_threadpoolctl():
    """Skip, with the command that installs it, where threadpoolctl is not installed: training.train sets its BLAS
    threads with it."""
    if importlib.util.find_spec("threadpoolctl") is None:
        raise Skip(machine.not_installed("threadpoolctl", "it"))


# ----------------------------------------------------------------------------------------------------------------
# 11. floor: can training go below the entropy floor?

FLOOR_RUN = {"steps": 600, "batch": 16, "lr": 0.01, "eval_every": 100, "seed": 3}  # the live run, on windows of 64
# tokens (train.py's settings otherwise), a validation loss and a progress line every eval_every steps
FLOOR_CHOICES = ("yes", "no")


def page_val_loss(lab, data):
    """(the validation loss of the lab's own model (its weights, its config) on data's validation stories, in nats
    per token, None), or (None, why that model cannot read them: the slots of floor_answer's line that says so)."""
    if not shipped_tokenizer(lab):
        return None, {"case": "own_text"}
    if lab.config.max_len < max(len(ids) - 1 for ids in data.val_ids) and lab.config.positions == "learned":
        return None, {"case": "short", "max_len": lab.config.max_len}
    params = numpy_model.from_lists(lab.params)
    loss = partial(numpy_model.sequence_loss, config=lab.config)
    return training.story_nats(loss, params, data.val_ids) / data.val_tokens, None


@shows("the floor of corpus.txt (corpus-entropy.json): {corpus_floor:.4f} nats per token",
       "the floor of the {stories} validation stories (floor.story_floor): {val_floor:.4f}",
       "a fresh run of {steps} steps, trained here in {seconds:.1f} s: validation loss {val_loss:.4f}",
       "{side} the floor by {gap:.4f} nats per token",
       each("page", measured="the page's model ({weights}): validation loss {loss:.4f}, the floor {over:+.4f}",
            own_text="the page's model ({weights}): not measured: its tokenizer is a text's own, not the stories'",
            short="the page's model ({weights}): not measured: it has {max_len} positions, fewer than a validation"
                  " story needs"),
       bounds="trained live, {steps} steps: {side} the floor by {gap:.4f}")
def floor_answer(lab, steps=FLOOR_RUN["steps"]):
    """Train a run of `steps` steps on the stories (the numpy backend, from the seed's initial weights) and read its
    validation loss against the floor of the validation stories (and the corpus's, corpus-entropy.json's)."""
    need_threadpoolctl()
    corpus_floor = floor.load_floor()
    s = Settings(**{**FLOOR_RUN, "steps": steps, "eval_every": min(FLOOR_RUN["eval_every"], steps)}, quiet=True)
    lab.write(f"training {steps} steps on the stories (numpy backend, the seed's initial weights) ...")
    started = time.perf_counter()
    run = training.train(s, report=lab.write)
    seconds = time.perf_counter() - started
    if run.failure is not None:
        raise RuntimeError(run.failure[0])
    data = run.data
    gap = run.val_loss - data.val_floor
    page, why = page_val_loss(lab, data)
    return {"value": "no" if gap > 0 else "yes",
            "slots": {"corpus_floor": corpus_floor, "stories": len(data.val_ids), "val_floor": data.val_floor,
                      "steps": steps, "seconds": seconds, "val_loss": run.val_loss, "gap": abs(gap),
                      "side": "above" if gap > 0 else "below", "weights": weights(lab),
                      "page": [why or {"case": "measured", "loss": page, "over": page - data.val_floor}]},
            "steps": steps, "val_loss": run.val_loss, "val_floor": data.val_floor, "corpus_floor": corpus_floor,
            "gap": gap}


FLOOR = Lesson(
    key="floor",
    title="The floor: can training go below it?",
    question="make_corpus.py knows the probability of every story it writes, so the loss no model can beat on\n"
             "average is known exactly: the generator's own -log p per token, the floor (oneblock/floor.py writes it\n"
             "to oneblock/corpus-entropy.json). Train a model on the stories and read its validation loss: can it\n"
             "go below the floor?",
    guess=("choice", FLOOR_CHOICES),
    answer=floor_answer,
    judge=Exactly(),
    explain="The floor is what the generator itself pays: the cross-entropy of the stories under their true\n"
            "probabilities. Any model's expected loss is that entropy plus the KL divergence from the true\n"
            "distribution to the model's, and a KL divergence is never negative, so no model can expect to go\n"
            "below it; a finite validation set could dip under it by luck only by a hair. The run here ({steps} steps\n"
            "of {batch} windows from the seed's initial weights; 600 take about 2 s on a 2-vCPU machine; longer on a\n"
            "busy one) stops far above it, and python3 train.py's 12,000 steps still end a few hundredths above it\n"
            "(val loss 0.3306 against 0.3074, in docs/training.md).",
    source="oneblock/floor.py: story_floor, load_floor; oneblock/training.py: fit (the floor and the gap)",
    trains=FLOOR_RUN,
)


# ----------------------------------------------------------------------------------------------------------------
# 12. positions-past-length: what each scheme does at position 100

TRAINED_LEN = 64  # the positions every run here trains on (train.py's max_len)
PAST_POSITION = 100  # the position asked about: a window of 101 tokens reads positions 0..100
PAST_RUN = {"steps": 400, "batch": 16, "lr": 0.01, "seed": 3}  # each scheme's quick run on the stories
PAST_SETS = {"no scheme": set(), "learned only": {"learned"}, "every scheme but learned": set(SCHEMES) - {"learned"},
             "all four": set(SCHEMES)}  # the choices, each the schemes it names


def scheme_choice(reads):
    """The choice that names a set of schemes that read position 100.

    >>> scheme_choice(set()), scheme_choice(set(SCHEMES))
    ('no scheme', 'all four')
    """
    for choice, schemes in PAST_SETS.items():
        if schemes == set(reads):
            return choice
    return f"these: {', '.join(sorted(reads))}"


class SchemesOff:
    """A choice of schemes: right when it is the answer, close when it names one scheme too many or too few.

    >>> judge = SchemesOff()
    >>> answer = {"value": "every scheme but learned"}
    >>> judge("every scheme but learned", answer), judge("all four", answer), judge("learned only", answer)
    ('right', 'close', 'off')
    """

    rule = "right only when it is the answer, close when it is one scheme off"
    spec = ["SchemesOff", {choice: sorted(schemes) for choice, schemes in PAST_SETS.items()}]

    def __call__(self, guess, answer):
        if guess == answer["value"]:
            return "right"
        if guess in PAST_SETS and answer["value"] in PAST_SETS:
            return "close" if len(PAST_SETS[guess] ^ PAST_SETS[answer["value"]]) == 1 else "off"
        return "off"


def position_losses(params, config, ids, targets):
    """(T,) the mean next-token loss at each position over the windows, in float64, from numpy_model.forward."""
    return target_nats(numpy_model.forward(params, ids, config)[0], targets).mean(axis=0)


def reads_past(params, config, ids, targets):
    """{"case": "refused", "refused": numpy_model's message} when the model cannot read ids' positions, or {"case":
    "reads", "before", "after", "at"}: its mean loss at positions 0..63, at 64..100 and at 100 itself."""
    try:
        losses = position_losses(params, config, ids, targets)
    except ValueError as e:
        return {"case": "refused", "refused": str(e)}
    return {"case": "reads", "before": float(losses[:TRAINED_LEN].mean()), "after": float(losses[TRAINED_LEN:].mean()),
            "at": float(losses[PAST_POSITION])}


READS = "reads it; loss {before:.3f} at positions 0-{last}, {after:.3f} at {trained}-{past}, {at:.3f} at {past}"
REFUSED = "refused: {refused}"  # what a model did with the windows of 101 tokens (reads_past), after its name
PAGE = "the page's model ({weights}, {positions} positions): "


@shows("{windows} windows of {length} tokens of the validation stories; each scheme trained {steps} steps here on"
       " windows of {trained} ({seconds:.1f} s for the four)",
       each("runs", reads="{name}: " + READS, refused="{name}: " + REFUSED),
       each("within", line="({name} at positions 0-{last}, in windows of {trained}: loss {within:.3f})"),
       each("page", reads=PAGE + READS, refused=PAGE + REFUSED,
            own_text="the page's model ({weights}): not run, its tokenizer is a text's own, not the stories'"),
       bounds="which schemes run is exact; the losses are of runs of {steps} steps trained here")
def past_length_answer(lab, steps=PAST_RUN["steps"]):
    """Train each scheme `steps` steps on windows of 64 tokens, then run it with numpy_model on windows of 101
    tokens of the validation stories: the learned scheme's refusal, the others' loss before and past 64."""
    need_threadpoolctl()
    data, runs = None, {}
    started = time.perf_counter()
    for scheme in SCHEMES:
        lab.write(f"training {scheme} positions, {steps} steps on windows of {TRAINED_LEN} tokens ...")
        run = training.train(Settings(**{**PAST_RUN, "steps": steps}, eval_every=steps, positions=scheme, quiet=True),
                             data=data)
        if run.failure is not None:
            raise RuntimeError(run.failure[0])
        data = run.data
        config = run_config({"positions": scheme}, data.vocab)
        ids, targets = windows(data.tok, data.val_texts, PAST_POSITION + 1)
        runs[scheme] = reads_past(run.state["params"], config, ids, targets)
        if "refused" in runs[scheme]:  # what it reads in its own length, for scale
            within = position_losses(run.state["params"], config, ids[:, :TRAINED_LEN], targets[:, :TRAINED_LEN])
            runs[scheme]["within"] = float(within.mean())
    seconds = time.perf_counter() - started
    page = [{"case": "own_text"}]
    if shipped_tokenizer(lab):
        page = [reads_past(numpy_model.from_lists(lab.params), lab.config, ids, targets)]
    reads = {scheme for scheme, got in runs.items() if "refused" not in got}
    return {"value": scheme_choice(reads),
            "slots": {"windows": len(ids), "length": PAST_POSITION + 1, "steps": steps, "trained": TRAINED_LEN,
                      "seconds": seconds, "last": TRAINED_LEN - 1, "past": PAST_POSITION, "weights": weights(lab),
                      "positions": lab.config.positions, "page": page,
                      "runs": [{"name": scheme, **got} for scheme, got in runs.items()],
                      "within": [{"name": scheme, **got} for scheme, got in runs.items() if "within" in got]},
            "steps": steps, "runs": runs, "windows": len(ids)}


POSITIONS_PAST_LENGTH = Lesson(
    key="positions-past-length",
    title="Positions past the trained length: what happens at position 100?",
    question=f"Four models, one for each position scheme (learned, none, sinusoidal, rope), each trained on windows\n"
             f"of {TRAINED_LEN} tokens: none of them has seen a position past {TRAINED_LEN - 1}. Now give each a"
             f" window of {PAST_POSITION + 1}\n"
             f"tokens, so that it must read position {PAST_POSITION}. Which schemes can read it at all?",
    guess=("choice", tuple(PAST_SETS)),
    answer=past_length_answer,
    judge=SchemesOff(),
    explain="Learned positions are a table, pos_emb, with one row per position: there is no row 100, so the\n"
            "model refuses the window (check_length) rather than invent one. The other three have no table\n"
            "to run out of: none adds nothing, sinusoidal computes its sine and cosine for any position, and rope\n"
            "turns q and k by an angle that any position has. Running is not the same as working: the loss past\n"
            "64 shows what each makes of positions it never trained on (none cannot tell them apart at all).\n"
            "The four runs here train {steps} steps of {batch} windows each (400 take about 5 s on a 2-vCPU\n"
            "machine; longer on a busy one).",
    source="oneblock/numpy_model.py: check_length (the refusal), forward, sinusoid_table, rope_tables",
    numbers={"trained": TRAINED_LEN, "past": PAST_POSITION},
    trains=PAST_RUN,
)


# ----------------------------------------------------------------------------------------------------------------
# 13. second-block: one block against two on the copying task

COPY_SIZES = ((1, 1), (2, 1))  # (blocks, heads): one block, then two
COPY_LR = {(1, 1): 0.01, (2, 1): 0.003}  # each size's learning rate, the one experiments/depth.json's sweep chose
COPY_STEPS = 1000  # steps of each model, on fresh periodic sequences
COPY_BATCH = 32  # sequences per step, as in the depth experiment
COPY_SEED = 3  # seeds the weights and the sequences each model trains on
TEST_SEED = 1  # seeds the sequences both models are measured on
TEST_SEQUENCES = 200
COPY_MARGIN = 0.2  # copied-token accuracies further apart than this are "far better"
COPY_CHOICES = ("two blocks copy far better", "about the same", "one block copies far better")


def copy_choice(one, two, margin=COPY_MARGIN):
    """The choice that the two models' copied-token accuracies make.

    >>> copy_choice(0.3, 0.98), copy_choice(0.3, 0.35), copy_choice(0.9, 0.3)
    ('two blocks copy far better', 'about the same', 'one block copies far better')
    """
    return COPY_CHOICES[0] if two - one > margin else COPY_CHOICES[2] if one - two > margin else COPY_CHOICES[1]


def copy_train(size, steps, write):
    """The weights of a model of size (blocks, heads) trained `steps` steps on fresh periodic sequences by
    experiments/induction.py's train_induction (this size's learning rate, COPY_BATCH sequences a step), writing a
    progress line a quarter of the way at a time."""
    from experiments.induction import periodic, train_induction

    every = max(1, steps // 4)

    def report(step, loss):
        if step % every == 0 or step == steps:
            write(f"  step {step:>5}/{steps}: training loss {loss:.3f}")

    tuning = periodic(random.Random(TEST_SEED), 1)  # (train_induction's tuning curve, read at the start and end only)
    with training.use_threads(Settings()):  # one BLAS thread, train.py's default: faster here
        params, _ = train_induction(size, COPY_LR[size], COPY_SEED, {"steps": steps, "batch": COPY_BATCH,
                                                                      "eval_every": steps}, tuning, report=report)
    return params


COPIED = ("copies {accuracy:.1f}% of the copyable tokens right; copy loss {copy_loss:.3f} nats (first period"
          " {first_period_loss:.3f}); trained in {seconds:.1f} s")  # a model's line, after its name


@shows("{sequences} fresh test sequences, each a segment of 4 to 16 tokens repeated to fill 64; a token is copyable"
       " once its segment has been seen",
       each("models", one="one block: " + COPIED, two="two blocks: " + COPIED),
       "two blocks minus one: {points:+.1f} points of copied-token accuracy ({seconds:.1f} s for both)",
       bounds="trained live, {steps} steps each; 'far' means more than {far:.0f} points apart")
def second_block_answer(lab, steps=COPY_STEPS):
    """Train one block and two blocks `steps` steps each on the copying task and measure both on the same fresh
    sequences: the copied-token accuracy and loss (experiments/induction.py's induction_measures)."""
    need_threadpoolctl()
    from experiments.induction import induction_config, induction_measures, periodic

    test = periodic(random.Random(TEST_SEED), TEST_SEQUENCES)
    measured, models = {}, []
    started = time.perf_counter()
    for size in COPY_SIZES:
        name = "one block" if size[0] == 1 else "two blocks"
        lab.write(f"training {name} on the copying task, {steps} steps of {COPY_BATCH} sequences,"
                  f" lr {COPY_LR[size]:g} ...")
        t0 = time.perf_counter()
        params = copy_train(size, steps, lab.write)
        with training.use_threads(Settings()):
            measured[name], _ = induction_measures(params, induction_config(size), test)
        m = measured[name]
        models.append({"case": "one" if size[0] == 1 else "two", "accuracy": 100 * m["copy_accuracy"],
                       "copy_loss": m["copy_loss"], "first_period_loss": m["first_period_loss"],
                       "seconds": time.perf_counter() - t0})
    seconds = time.perf_counter() - started
    one, two = (measured[name]["copy_accuracy"] for name in ("one block", "two blocks"))
    return {"value": copy_choice(one, two),
            "slots": {"sequences": TEST_SEQUENCES, "models": models, "points": 100 * (two - one), "seconds": seconds,
                      "steps": steps, "far": 100 * COPY_MARGIN},
            "steps": steps, "measures": measured}


SECOND_BLOCK = Lesson(
    key="second-block",
    title="A second block: can it copy a repeated sequence?",
    question="The copying task (experiments/induction.py): a segment of 4 to 16 random tokens, repeated to fill 64.\n"
             "After the first period every token can be copied from one period back, but the period changes from\n"
             "sequence to sequence, so the model must find where the current token stood before and read the token\n"
             "after it. Train one block and two blocks (one head each) the same number of steps: how do their\n"
             "copied-token accuracies compare?",
    guess=("choice", COPY_CHOICES),
    answer=second_block_answer,
    judge=Exactly(),
    explain="Copying needs two steps in turn: one attention marks each position with the token before it, and a\n"
            "later one looks for the position whose marked token is the current one and reads what stands there\n"
            "(an induction head). One block has one attention, whose keys hold only each position's own token, so\n"
            "it can learn which tokens tend to follow but not where to copy from; its accuracy stays near that\n"
            "guess. Two blocks compose the two steps and copy nearly every token. The runs here train {steps} steps\n"
            "of {batch} sequences each, lr {lr} (1,000 steps of both take about 12 s on a 2-vCPU machine; longer on\n"
            "a busy one); python3 -m experiments.depth has the full study.",
    source="experiments/induction.py: periodic, induction_measures; oneblock/numpy_model.py: block_forward,"
           " attention_forward",
    numbers={"margin": COPY_MARGIN},
    slots={"steps": COPY_STEPS, "batch": COPY_BATCH, "lr": f"{COPY_LR[1, 1]:g} for one block and {COPY_LR[2, 1]:g}"
                                                          f" for two"},
)


# ----------------------------------------------------------------------------------------------------------------
# The path

LESSONS = [FLOOR, POSITIONS_PAST_LENGTH, SECOND_BLOCK]
