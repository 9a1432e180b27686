"""The first ten lessons of docs/lessons.md (predict, then check), on model.py, standard library only: each a Lesson
(below), answered from the lab that build_lab makes; `ask` goes through one with injectable read and write.
experiments/lessons_trained.py and lessons_scaling.py hold the rest, experiments/lessons.py the command line.

A guess is one of:
    ("number",)                         one number
    ("range",)                          two numbers, low high
    ("pair", ("first", "second"))       two numbers, each named (the order test's without and with)
    ("choice", ("a", "b", ...))         one of the choices, by its number or its words

    >>> lab = build_lab()
    >>> [lesson.key for lesson in LESSONS][5:]
    ['finite-difference', 'pre-norm', 'relu-mlp', 'softmax-gradient', 'skip-paths']
    >>> answer = LESSONS[0].answer(lab)
    >>> answer["value"], LESSONS[0].judge(4, answer), LESSONS[0].judge(3, answer)
    (4, 'right', 'close')
"""

import functools
import importlib
import math
from dataclasses import dataclass, field
from math import fsum
from types import SimpleNamespace
from typing import Callable

import bpe
import model
from oneblock import checkpoint
from oneblock.config import ModelConfig, seed_switch
from oneblock.data import CORPUS_FILE, TOKENIZER_FILE

SEED = (96, 16, 64, 64, 3)  # model.init_params(vocab, d, hidden, max_len, seed): the seed's series model
QUIT = "q"  # typed instead of a guess: the learner stops


# ----------------------------------------------------------------------------------------------------------------
# The shape of a lesson


@dataclass(frozen=True)
class Lesson:
    key: str          # "tokens", "init-loss", ... (unique, kebab-case)
    title: str        # one line
    question: str     # what the learner is asked, a few lines: a template whose slots ({vocab}, ...) words() fills
    guess: tuple      # what the learner enters first: one of the kinds the module lists
    answer: Callable  # answer(lab) -> {"value": the answer, "shown": its lines, "bounds": how exact} (shows)
    judge: Callable   # judge(guess_value, answer_dict) -> "right" / "close" / "off", in words a learner reads
    explain: str      # a short explanation, a few lines: a template, as the question
    source: str       # where the lab makes it so: "model.py: layernorm_forward" (file and function names)
    slots: dict = field(default_factory=dict)  # its own runs' values of its words' slots ({steps}, ...)
    trains: dict | None = None  # the settings of the run its page trains too (train.py's), slots of its words too
    numbers: dict = field(default_factory=dict)  # the constants its answer reads, for the page's copy (page_words)


def shows(*templates, bounds):
    """An answer of template lines: values(lab, ...) returns {"value", "slots", ...}, and the answer the same with
    "shown" and "bounds" for "slots", filled by fill_lines (the page fills the same: explorer/lessons.js).

    >>> answer = shows("loss {loss:.4f} over {n} tokens", bounds="exact, {n} tokens")(
    ...     lambda lab: {"value": 1, "slots": {"loss": 4.56, "n": 3}})
    >>> answer(None)["shown"], answer(None)["bounds"], answer.shown
    (['loss 4.5600 over 3 tokens'], 'exact, 3 tokens', ('loss {loss:.4f} over {n} tokens',))
    """
    def make(values):
        @functools.wraps(values)
        def answer(lab, *args, **kwargs):
            got = values(lab, *args, **kwargs)
            slots = got.pop("slots")
            return {**got, "shown": fill_lines(templates, slots), "bounds": bounds.format(**slots)}
        answer.shown, answer.bounds = templates, bounds
        return answer
    return make


def each(slot, **cases):
    """A template of one line per item of the answer's list slot: each item a dict of its own slots, with "case"
    naming its template where there are several.

    >>> fill_lines([each("steps", line="  h = {h:.0e}")], {"steps": [{"h": 0.01}, {"h": 0.001}]})
    ['  h = 1e-02', '  h = 1e-03']
    """
    return {"each": slot, "cases": cases}


def fill_lines(templates, slots):
    """The lines of templates (each a str.format template, or an each() of one line per item) filled with slots.

    >>> fill_lines(["{n} of", each("at", on="  {t}: on", off="  {t}: off")], {"n": 2, "at": [{"case": "off",
    ...                                                                                         "t": 0}]})
    ['2 of', '  0: off']
    """
    lines = []
    for template in templates:
        if isinstance(template, str):
            lines.append(template.format(**slots))
            continue
        cases = template["cases"]
        for item in slots[template["each"]]:
            case = item["case"] if len(cases) > 1 else next(iter(cases))
            lines.append(cases[case].format(**{**slots, **item}))
    return lines


class Skip(ValueError):
    """A lesson this lab cannot answer (a checkpoint model.py cannot run, a package not installed): the reason."""


# ----------------------------------------------------------------------------------------------------------------
# Why a lesson cannot answer, in one wording for the terminal's lab and the page's (explore.py exports both)

SKIPS = {  # the reasons; their slots are the lab's names (skip's, PAGE_NAMES) and the lesson's own
    "not-model-py": "{model} {problem}; this lesson runs model.py: {to_seed}",
    "unreadable": "{tokenizer} cannot read {what}: {error}",
    "no-positions": "{model} was trained without positions, so it has no second half to this test; {to_seed}",
    "cut-apart": "{tokenizer} does not cut the two sentences into the same tokens",
    "short": "the first story is only {tokens} tokens for the model's positions",
    "not-stories": "{model} learned {text}, not the stories of corpus.txt",  # (the page's: it trains on its own text)
}
SEED_WEIGHTS = "the seed's weights"
PAGE_NAMES = {"model": "the page's model", "tokenizer": "the page's tokenizer",
              "to_seed": "open the page with the seed's weights (python3 explore.py without --ckpt)",
              "weights": "the page's weights ({source}, step {step})", "seed_weights": SEED_WEIGHTS}


def skip(lab, reason, **slots):
    """The Skip of a reason of SKIPS, in a terminal lab's names for its model, its tokenizer and the way to the seed's
    weights (the page's are PAGE_NAMES).

    >>> skip(SimpleNamespace(ckpt_path="two.safetensors"), "cut-apart")
    Skip('the tokenizer of two.safetensors does not cut the two sentences into the same tokens')
    """
    names = {"model": lab.ckpt_path, "tokenizer": f"the tokenizer of {lab.ckpt_path}",
             "to_seed": "leave out --ckpt for the seed's weights"}
    return Skip(SKIPS[reason].format(**names, **slots))


def facts(tokenizer):
    """The numbers of the model's tokenizer that the lessons' words name, by their slots' names.

    >>> facts(build_lab().tokenizer)
    {'vocab': 96, 'characters': 26, 'merges': 70, 'ln_vocab': 4.564348191467836}
    """
    vocab = len(tokenizer.vocab)
    return {"vocab": vocab, "characters": len(tokenizer.alphabet), "merges": len(tokenizer.merges),
            "ln_vocab": math.log(vocab)}


def words(lesson, lab):
    """The lesson's question and explanation for the lab's model: their slots filled with its tokenizer's numbers
    (facts) and the lesson's own (slots). The page fills the same templates with its model's (page_words).

    >>> words(INIT_LOSS, build_lab())["question"].splitlines()[-1]
    'ln 96 = 4.5643.'
    """
    values = {**facts(lab.tokenizer), **(lesson.trains or {}), **lesson.slots}
    return {"question": lesson.question.format(**values), "explain": lesson.explain.format(**values)}


def page_words(lesson):
    """What the page gets of a lesson (explore.py's export, data/lessons.json): its words and answer lines as the
    templates the page fills, its guess, and its judge (spec, for the page's copy, and rule).

    >>> page_words(INIT_LOSS)["judge"], page_words(INIT_LOSS)["rule"]
    (['Within', 0.05, 0.5], 'right within 0.05 of the answer, close within 0.5')
    """
    return {"key": lesson.key, "title": lesson.title, "question": lesson.question, "explain": lesson.explain,
            "source": lesson.source, "shown": list(getattr(lesson.answer, "shown", ())),
            "bounds": getattr(lesson.answer, "bounds", None),
            "guess": [lesson.guess[0], *(list(part) for part in lesson.guess[1:])],
            "describe": describe_guess(lesson.guess), "judge": lesson.judge.spec, "rule": lesson.judge.rule,
            "trains": lesson.trains, "numbers": lesson.numbers}


# ----------------------------------------------------------------------------------------------------------------
# The lab: the weights every answer reads


def build_lab(ckpt_path=None):
    """The namespace the answers read: params (model.py's), config, tokenizer, ckpt_path (None for the seed's
    weights, SEED) and write (where a lesson that trains writes its progress; ask sets it). A missing or bad
    checkpoint is a ValueError that names it.

    >>> lab = build_lab()
    >>> lab.config == ModelConfig(96, 16, 64, 64), lab.ckpt_path, model.count_params(lab.params)
    (True, None, 7440)
    """
    if ckpt_path is None:
        return SimpleNamespace(params=model.init_params(*SEED), config=ModelConfig(*SEED[:4]),
                               tokenizer=bpe.Tokenizer.load(TOKENIZER_FILE), ckpt_path=None, write=print)
    ckpt = checkpoint.load_checkpoint(checkpoint.named_checkpoint(ckpt_path, ", or leave out --ckpt for the seed's"
                                                                             " weights"))
    tokenizer = checkpoint.tokenizer_of(ckpt, TOKENIZER_FILE, str(ckpt_path))
    return SimpleNamespace(params=checkpoint.reference_params(ckpt), config=ckpt["config"], tokenizer=tokenizer,
                           ckpt_path=str(ckpt_path), write=print)


def shipped_tokenizer(lab):
    """Whether the lab's tokenizer is the shipped one (learned from corpus.txt), not that of a text of its own.

    >>> shipped_tokenizer(build_lab())
    True
    """
    return lab.tokenizer.merges == bpe.Tokenizer.load(TOKENIZER_FILE).merges


def weights(lab):
    """What the seed's one-block lessons say about the lab's weights, in a few words."""
    return SEED_WEIGHTS if lab.ckpt_path is None else f"the weights of {lab.ckpt_path}"


def reference(lab):
    """(params, use_positions) for model.py, or Skip when the lab's model is not one model.py runs.

    >>> reference(build_lab())[1]
    True
    """
    problem = lab.config.seed_problem()
    if problem:
        raise skip(lab, "not-model-py", problem=problem)
    return lab.params, seed_switch(lab.config)


def encode(lab, text, what):
    """The token IDs of text, or Skip when the lab's tokenizer (a checkpoint's own text's) cannot read it."""
    try:
        return lab.tokenizer.encode(text)
    except ValueError as e:
        raise skip(lab, "unreadable", what=what, error=e) from None


def pieces(lab, ids):
    """Token IDs as the pieces of text they stand for, each quoted so that its spaces show.

    >>> pieces(build_lab(), [32, 76])
    "' g' | 'ar'"
    """
    return " | ".join(repr(lab.tokenizer.vocab[i]) for i in ids)


def first_story(lab):
    """The token IDs of the corpus's first story, cut to the model's positions plus the one it predicts last."""
    with open(CORPUS_FILE, encoding="utf-8") as f:
        story = f.readline()
    return encode(lab, story, "the corpus's first story")[: lab.config.max_len + 1]


def story_pass(lab, tokens=None):
    """model.py on the first story (its first `tokens` predicting the next, or all of it), as a namespace: params
    and positions (reference's), x and y (the inputs and their targets), forward's logits and cache, the loss and
    its gradient dlogits."""
    params, positions = reference(lab)
    ids = first_story(lab)[: None if tokens is None else tokens + 1]
    x, y = ids[:-1], ids[1:]
    logits, cache = model.forward(params, x, positions)
    loss, dlogits = model.loss_and_dlogits(logits, y)
    return SimpleNamespace(params=params, positions=positions, x=x, y=y, logits=logits, cache=cache, loss=loss,
                           dlogits=dlogits)


# ----------------------------------------------------------------------------------------------------------------
# Guesses: what the learner types, read and checked


def describe_guess(guess):
    """What to type for a guess, in words.

    >>> describe_guess(("range",)), describe_guess(("choice", ("yes", "no")))
    ('two numbers, low high', 'the number or the words of one choice')
    """
    return {"number": "a number", "range": "two numbers, low high",
            "pair": f"two numbers: {' then '.join(guess[1]) if len(guess) > 1 else ''}",
            "choice": "the number or the words of one choice"}[guess[0]]


def number(text):
    """A finite float from text, or a ValueError that names it.

    >>> number("1e-3"), number(" 4 ")
    (0.001, 4.0)
    """
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{text.strip()!r} is not a finite number")
    return value


def parse_guess(guess, text):
    """The guess the learner typed, as its value: a float, a (low, high) or (first, second) pair, or the words of a
    choice. Bad input is a ValueError that names it and says what was expected.

    >>> parse_guess(("range",), "0.9 1"), parse_guess(("choice", ("yes", "no")), "2")
    ((0.9, 1.0), 'no')
    >>> parse_guess(("range",), "1 0.9")
    Traceback (most recent call last):
    ...
    ValueError: '1 0.9': low 1 is above high 0.9; expected two numbers, low high
    """
    text = text.strip()
    kind = guess[0]
    if kind == "number":
        return number(text)
    if kind in ("range", "pair"):
        parts = text.replace(",", " ").split()
        if len(parts) != 2:
            raise ValueError(f"{text!r} is {len(parts)} number{'s' if len(parts) != 1 else ''}; expected"
                             f" {describe_guess(guess)}")
        low, high = number(parts[0]), number(parts[1])
        if kind == "range" and low > high:
            raise ValueError(f"{text!r}: low {low:g} is above high {high:g}; expected {describe_guess(guess)}")
        return low, high
    choices = guess[1]  # (a choice: describe_guess knows no other kind)
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1]
    for choice in choices:
        if text.lower() == choice.lower():
            return choice
    raise ValueError(f"{text!r} is not one of the choices; expected 1 to {len(choices)}, or the words of one")


def show(value):
    """A guess or an answer as a learner reads it.

    >>> show(0.0), show(4), show((0.0, 0.000659043)), show("only k")
    ('0.0', '4', '0.0 and 0.000659043', 'only k')
    """
    if isinstance(value, tuple):
        return " and ".join(show(v) for v in value)
    if isinstance(value, float):
        return "0.0" if value == 0.0 else f"{value:.7g}"
    return str(value)


# ----------------------------------------------------------------------------------------------------------------
# Judges: how near a guess is to the answer. Each says its rule, for the learner to read beside the verdict.


class Within:
    """A number right within an absolute distance, close within a wider one.

    >>> judge = Within(0.05, 0.5)
    >>> judge(4.52, {"value": 4.56}), judge(4.1, {"value": 4.56}), judge(1.0, {"value": 4.56})
    ('right', 'close', 'off')
    """

    def __init__(self, right, close):
        self.right, self.close = right, close
        self.spec = ["Within", right, close]
        self.rule = f"right within {right:g} of the answer, close within {close:g}"

    def __call__(self, guess, answer):
        miss = abs(guess - answer["value"])
        return "right" if miss <= self.right else "close" if miss <= self.close else "off"


class Factor:
    """A positive number right within a factor of the answer, close within a wider factor; an exact 0.0 answer is
    right only for a guess of 0, and close for one below `zero_close`.

    >>> judge = Factor(3, 10)
    >>> judge(0.001, {"value": 0.00066}), judge(0.005, {"value": 0.00066}), judge(0.0, {"value": 0.00066})
    ('right', 'close', 'off')
    >>> judge(0.0, {"value": 0.0}), judge(1e-12, {"value": 0.0}), judge(0.1, {"value": 0.0})
    ('right', 'close', 'off')
    """

    def __init__(self, right, close, zero_close=1e-9):
        self.right, self.close, self.zero_close = right, close, zero_close
        self.spec = ["Factor", right, close, zero_close]
        self.rule = f"right within a factor of {right:g} of the answer, close within {close:g}; exactly 0 only for 0"

    def __call__(self, guess, answer):
        value = answer["value"]
        if value == 0.0:
            return "right" if guess == 0.0 else "close" if abs(guess) < self.zero_close else "off"
        if guess <= 0.0 or value < 0.0:
            return "off"
        ratio = max(guess / value, value / guess)
        return "right" if ratio <= self.right else "close" if ratio <= self.close else "off"


class InRange:
    """A range right when it holds the answer and is at most `width` wide; close when it holds it but is wider, or
    misses it by at most `near`.

    >>> judge = InRange(0.1, 0.05)
    >>> [judge(r, {"value": 0.985}) for r in [(0.95, 1.0), (0.0, 1.0), (0.99, 1.0), (0.5, 0.6)]]
    ['right', 'close', 'close', 'off']
    """

    def __init__(self, width, near):
        self.width, self.near = width, near
        self.spec = ["InRange", width, near]
        self.rule = f"right when the range holds the answer and is at most {width:g} wide; close when it is wider, or" \
                    f" misses by at most {near:g}"

    def __call__(self, guess, answer):
        low, high, value = guess[0], guess[1], answer["value"]
        if low <= value <= high:
            return "right" if high - low <= self.width else "close"
        return "close" if min(abs(value - low), abs(value - high)) <= self.near else "off"


class Pair:
    """Two judges, one for each number of a pair: right when both are, close when one is and the other is close,
    off otherwise.

    >>> judge = Pair(Factor(3, 10), Factor(3, 10))
    >>> answer = {"value": (0.0, 0.00066)}
    >>> judge((0.0, 0.001), answer), judge((0.0, 0.005), answer), judge((0.001, 0.001), answer)
    ('right', 'close', 'off')
    """

    def __init__(self, first, second):
        self.first, self.second = first, second
        self.spec = ["Pair", first.spec, second.spec]
        self.rule = f"each number: {first.rule}"

    def __call__(self, guess, answer):
        verdicts = sorted(judge(g, {"value": v}) for judge, g, v in zip((self.first, self.second), guess,
                                                                         answer["value"]))
        return {("right", "right"): "right", ("close", "right"): "close"}.get(tuple(verdicts), "off")


class Exactly:
    """A choice or a count: right when it is the answer, close when it is one of the near misses (for a number,
    `off_by_one` makes one away close).

    >>> Exactly(off_by_one=True)(3, {"value": 4}), Exactly()("all", {"value": "k and after"})
    ('close', 'off')
    """

    def __init__(self, off_by_one=False):
        self.off_by_one = off_by_one
        self.spec = ["Exactly", off_by_one]
        self.rule = "right only when it is the answer" + (", close when one away" if off_by_one else "")

    def __call__(self, guess, answer):
        if guess == answer["value"]:
            return "right"
        if self.off_by_one and isinstance(guess, (int, float)) and abs(guess - answer["value"]) == 1:
            return "close"
        return "off"


# ----------------------------------------------------------------------------------------------------------------
# 1. tokens: how many pieces is " garden"?

WORD = " garden"  # with the space before it, as it stands in a sentence
KITE = " kite"  # a word of the stories that is one token


@shows("{word} -> {count} pieces: {pieces} (token IDs {ids})",
       each("made", character="  {piece}: a character", merge="  {piece}: merge {rank} of {merges}, {left} + {right}"),
       "the tokenizer: {characters} characters + {merges} merges = {vocab} tokens",
       each("counts", line="in corpus.txt: {word} {word_count} times, {kite} (one token) {kite_count} times"),
       bounds="exact")
def tokens_answer(lab):
    """How many tokens the lab's tokenizer cuts WORD into, and what each piece is made of."""
    tok = lab.tokenizer
    ids = encode(lab, WORD, repr(WORD))
    first_merge = len(tok.alphabet)
    made = [{"case": "character", "piece": repr(tok.vocab[i])} if i < first_merge else
            {"case": "merge", "piece": repr(tok.vocab[i]), "rank": i - first_merge + 1,
             "left": repr(tok.merges[i - first_merge][0]), "right": repr(tok.merges[i - first_merge][1])}
            for i in ids]
    counts = []  # how often WORD and KITE stand in corpus.txt: nothing for a tokenizer of a text of its own
    if shipped_tokenizer(lab):
        text = CORPUS_FILE.read_text(encoding="utf-8")
        counts = [{"word_count": text.count(WORD), "kite_count": text.count(KITE)}]
    return {"value": len(ids),
            "slots": {"word": repr(WORD), "count": len(ids), "pieces": pieces(lab, ids),
                      "ids": ", ".join(map(str, ids)), "made": made, **facts(tok), "kite": repr(KITE),
                      "counts": counts}}


TOKENS = Lesson(
    key="tokens",
    title='How many pieces is " garden"?',
    question='The model reads token IDs, not letters. Its tokenizer (bpe.py) has {vocab} tokens: the characters of\n'
             'the stories, then merges of the most frequent neighbouring pairs, learned from corpus.txt. "garden" is\n'
             'in many stories. Into how many tokens does the tokenizer cut " garden" (with the space before it, as\n'
             'it stands in a sentence)?',
    guess=("number",),
    answer=tokens_answer,
    judge=Exactly(off_by_one=True),
    explain="The {vocab} tokens are the {characters} characters of the stories and {merges} merges, and BPE spends\n"
            "the merges on the most frequent pairs first: ' the', ' has', the names, the things the stories hand\n"
            "over (' kite', ' hat', ...). ' garden' is in far fewer places than those, so it never earns a token of\n"
            "its own and stays in pieces, each a merge that other words paid for. A larger vocabulary would give it\n"
            "fewer pieces, and the model fewer positions to read for the same text.",
    source="bpe.py: Tokenizer.train (the merges), Tokenizer.encode_piece (applying them in rank order)",
    numbers={"word": WORD, "kite": KITE},
)


# ----------------------------------------------------------------------------------------------------------------
# 2. init-loss: the loss before training, against ln 96


@shows("loss {loss:.6f} over the {tokens} next tokens of the first story, with {weights}",
       "ln {vocab} = {uniform:.6f}, the loss of giving every token the same probability",
       "loss - ln {vocab} = {gap:+.6f}",
       "the logits' spread (standard deviation): {spread:.4f}",
       bounds="exact: every sum is one math.fsum")
def init_loss_answer(lab):
    """The mean next-token loss on the first story, against the loss of the uniform guess ln V."""
    run = story_pass(lab)
    uniform = math.log(lab.config.vocab)
    spread = math.sqrt(row_variance([v for row in run.logits for v in row]))
    return {"value": run.loss, "slots": {"loss": run.loss, "tokens": len(run.y), "weights": weights(lab),
                                         "vocab": lab.config.vocab, "uniform": uniform, "gap": run.loss - uniform,
                                         "spread": spread}}


INIT_LOSS = Lesson(
    key="init-loss",
    title="The loss before training, against ln 96",
    question="Before any training, every weight of the seed's model is a small random number (gauss(0, 0.02)).\n"
             "What is its loss, the mean cross-entropy of each next token, on the first story of corpus.txt?\n"
             "For scale: a model that gives each of the {vocab} tokens the same probability has loss\n"
             "ln {vocab} = {ln_vocab:.4f}.",
    guess=("number",),
    answer=init_loss_answer,
    judge=Within(0.05, 0.5),
    explain="The logits are the final layer norm's output (about unit size) times W_out, whose entries are about\n"
            "0.02: sixteen such products give logits spread by less than 0.1, so the softmax is nearly uniform and\n"
            "the loss is within a few thousandths of ln {vocab}, above or below it by chance. A loss far above\n"
            "ln {vocab} at step 0 would mean an initialisation that is too large; training then brings it far below.",
    source="model.py: init_params, forward, loss_and_dlogits",
)


# ----------------------------------------------------------------------------------------------------------------
# 3. layernorm-variance: the output's variance with tiny embeddings

SMALLER = 1e-3  # the embeddings made 1000 times smaller still


def row_variance(row):
    """The population variance of a row, as one exact-rounded sum.

    >>> row_variance([1.0, 3.0])
    1.0
    """
    mean = fsum(row) / len(row)
    return fsum((v - mean) ** 2 for v in row) / len(row)


def normed_variance(stream):
    """The mean variance of a stream's rows (T, d) after a layer norm of gain 1 and bias 0, one exact sum each."""
    d = len(stream[0])
    out, _ = model.layernorm_forward(stream, [1.0] * d, [0.0] * d)  # (T, d)
    return fsum(row_variance(row) for row in out) / len(out)


@shows("the variance of layer norm's output rows (before its gain): mean {mean_out:.6f} over the {positions}"
       " positions, from {low:.6f} to {high:.6f}",
       "the variance of its input rows x0 (token + position embeddings): mean {mean_before:.3e}",
       "each row's output variance is var / (var + EPS), with EPS = {eps:g}: for the mean input, {kept:.6f}",
       "with x0 {times:g} times smaller, the output variance is {mean_tiny:.3e}",
       bounds="exact: every sum is one math.fsum")
def layernorm_answer(lab):
    """The mean variance of layer norm's normalised rows (before its gain) on the first story's x0, and the same with
    x0 made SMALLER."""
    cache = story_pass(lab).cache
    out = [row_variance(row) for row in cache["ln1"]["xhat"]]  # layer norm's rows before the gain and bias
    before = [row_variance(row) for row in cache["x0"]]
    mean_out, mean_before = fsum(out) / len(out), fsum(before) / len(before)
    mean_tiny = normed_variance([[v * SMALLER for v in row] for row in cache["x0"]])
    return {"value": mean_out,
            "slots": {"mean_out": mean_out, "positions": len(out), "low": min(out), "high": max(out),
                      "mean_before": mean_before, "eps": model.EPS, "kept": mean_before / (mean_before + model.EPS),
                      "times": 1 / SMALLER, "mean_tiny": mean_tiny}}


LAYERNORM = Lesson(
    key="layernorm-variance",
    title="Layer norm's output variance with tiny embeddings",
    question="The first layer norm (ln1) takes each row of x0, a token's embedding plus its position's, and makes it\n"
             "mean 0 and variance 1 before its gain and bias. The seed's embeddings are tiny: every number is drawn\n"
             "with standard deviation 0.02. On the first story, what is the variance of layer norm's output rows\n"
             "(before the gain)? Give a range, low high.",
    guess=("range",),
    answer=layernorm_answer,
    judge=InRange(0.1, 0.05),
    explain="Layer norm divides each centred row by sqrt(var + EPS), not by sqrt(var): EPS guards against a row of\n"
            "equal numbers. So the output's variance is var / (var + EPS), just below 1 when var is large against\n"
            "EPS = 1e-5. The seed's rows have a variance of well under 1e-3, so EPS takes a visible share: the\n"
            "variance falls short of 1 by about a percent or two. Make the embeddings smaller still and EPS wins:\n"
            "layer norm no longer normalises, it shrinks.",
    source="model.py: layernorm_forward (EPS)",
    numbers={"smaller": SMALLER},
)


# ----------------------------------------------------------------------------------------------------------------
# 4. order: the seed's order test, both halves

ORDER_A = "now mia gives the hat to leo."  # the same tokens as ORDER_B, the two names swapped (trace_block.py's)
ORDER_B = "now leo gives the hat to mia."


def logit_gaps(params, a, b, positions):
    """The largest absolute difference between the logits of token IDs a and b at each position, by model.forward
    (the order and causality lessons'): 0.0 exactly where the two rows are the same floats.

    >>> logit_gaps(build_lab().params, [1, 2], [1, 3], True)[0]
    0.0
    """
    la, lb = model.forward(params, a, positions)[0], model.forward(params, b, positions)[0]  # (T, V) each
    return [max(abs(x - y) for x, y in zip(ra, rb)) for ra, rb in zip(la, lb)]  # (T,)


@shows("{a}: {a_pieces}", "{b}: {b_pieces}",
       "without positions: the last position's largest gap {gap_without} (each position's: {each_without})",
       "with positions: the last position's largest gap {gap_with} (each position's: {each_with})",
       bounds="exact: 0.0 without positions is bit-exact, on every machine; the gap with them to every digit")
def order_answer(lab):
    """The largest difference of the last position's logits between ORDER_A and ORDER_B, without and with the
    position embeddings."""
    params, positions = reference(lab)
    if not positions:
        raise skip(lab, "no-positions")
    a, b = encode(lab, ORDER_A, repr(ORDER_A)), encode(lab, ORDER_B, repr(ORDER_B))
    if sorted(a) != sorted(b):
        raise skip(lab, "cut-apart")
    slots = {"a": repr(ORDER_A), "a_pieces": pieces(lab, a), "b": repr(ORDER_B), "b_pieces": pieces(lab, b)}
    gaps = []
    for use, name in ((False, "without"), (True, "with")):
        each = logit_gaps(params, a, b, use)  # (T,)
        gaps.append(each[-1])
        slots[f"gap_{name}"] = repr(gaps[-1])
        slots[f"each_{name}"] = ", ".join(f"{gap:.3g}" for gap in each)
    return {"value": tuple(gaps), "slots": slots}


ORDER = Lesson(
    key="order",
    title="The order test: does the model see word order?",
    question=f"The seed's own question. These two sentences are the same tokens, the two names swapped:\n"
             f"    {ORDER_A!r}\n    {ORDER_B!r}\n"
             "Run the model on each and take the {vocab} scores (logits) at the last position. What is the largest\n"
             "difference between the two sentences' scores, first without the position embeddings\n"
             "(model.forward(..., use_positions=False)), then with them? Two numbers: without, with.",
    guess=("pair", ("without positions", "with positions")),
    answer=order_answer,
    judge=Pair(Factor(3, 10), Factor(3, 10)),
    explain="Without positions, the last position's attention is a weighted sum over the same (key, value) pairs,\n"
            "only listed in another order, and every sum in model.py is one math.fsum, rounded once whatever the\n"
            "order: the scores are the same floats, a gap of exactly 0.0. Earlier positions see different prefixes\n"
            "and differ. With positions, each token's vector carries its place, and the last scores tell the two\n"
            "sentences apart; the seed's position rows are tiny (0.02), so the gap is small until training grows it.",
    source="model.py: forward (use_positions), attention_forward; trace_block.py: last_logits_gap",
)


# ----------------------------------------------------------------------------------------------------------------
# 5. causality: change one token, which positions' scores move?

CAUSAL_T, CAUSAL_K = 12, 5  # the first 12 tokens of the first story; the token at position 5 (from 0) changes
CAUSAL_CHOICES = ("all positions", "position k and after", "only position k", "only positions before k")


@shows("the first {T} tokens: {pieces}", "position k = {k}: {before} becomes {after}",
       each("at", moved="  position {t:2d}: moved, by up to {gap:.3g}",
            same="  position {t:2d}: the same floats, bit for bit"),
       bounds="exact: the logits compared float for float")
def causality_answer(lab):
    """Which positions' logits differ at all when the token at CAUSAL_K changes: model.forward twice, compared
    exactly."""
    params, positions = reference(lab)
    ids = first_story(lab)[:CAUSAL_T]
    if len(ids) <= CAUSAL_K:
        raise skip(lab, "short", tokens=len(ids))
    changed = list(ids)
    changed[CAUSAL_K] = (ids[CAUSAL_K] + 1) % lab.config.vocab
    gaps = logit_gaps(params, ids, changed, positions)  # (T,)
    moved = [t for t in range(len(ids)) if gaps[t] > 0.0]
    value = {tuple(range(len(ids))): CAUSAL_CHOICES[0], tuple(range(CAUSAL_K, len(ids))): CAUSAL_CHOICES[1],
             (CAUSAL_K,): CAUSAL_CHOICES[2], tuple(range(CAUSAL_K)): CAUSAL_CHOICES[3]}.get(
        tuple(moved), f"positions {moved}")
    tok = lab.tokenizer
    at = [{"case": "moved", "t": t, "gap": gaps[t]} if t in moved else
          {"case": "same", "t": t} for t in range(len(ids))]
    return {"value": value,
            "slots": {"T": len(ids), "pieces": pieces(lab, ids), "k": CAUSAL_K,
                      "before": repr(tok.vocab[ids[CAUSAL_K]]), "after": repr(tok.vocab[changed[CAUSAL_K]]), "at": at}}


CAUSALITY = Lesson(
    key="causality",
    title="Causality: change one token, which scores move?",
    question=f"Take the first {CAUSAL_T} tokens of the first story and change the token at position k = {CAUSAL_K}\n"
             "(counting from 0) to another. Run the model on both. Which positions' scores (logits) change at\n"
             "all, by even one bit?",
    guess=("choice", CAUSAL_CHOICES),
    answer=causality_answer,
    judge=Exactly(),
    explain="In attention_forward, position i computes scores for j in range(i + 1) only: it reads positions 0..i,\n"
            "never the future. Layer norm and the MLP work row by row. So every position before k computes exactly\n"
            "what it computed before, the same floats, not merely close ones; position k changes through its own\n"
            "token, and every later position reads k through attention. That is what lets one pass train every\n"
            "position's prediction at once without any of them seeing its answer.",
    source="model.py: attention_forward (its mask: position i scores j <= i only), forward",
    numbers={"T": CAUSAL_T, "k": CAUSAL_K},
)


# ----------------------------------------------------------------------------------------------------------------
# 6. finite-difference: the error of a central difference against the step

STEPS = tuple(10.0 ** -e for e in range(2, 11))  # 1e-2 down to 1e-10
FD_T = 8  # the first 8 tokens predict the next 8
FD_CHOICES = ("keeps falling", "falls then rises", "flat", "keeps rising")
ROUND = 2.0 ** -52  # the gap between 1.0 and the next float: a sum rounded once is off by about this much of itself


def error_shape(errors, factor=10.0):
    """The shape of a list of errors, largest step first: whether it falls from the first to its least, and rises
    from there to the last, each by more than factor.

    >>> error_shape([1e-7, 1e-9, 1e-11, 1e-9, 1e-7]), error_shape([1e-3, 1e-5, 1e-7]), error_shape([1.0, 2.0])
    ('falls then rises', 'keeps falling', 'flat')
    """
    least = min(errors)
    falls, rises = errors[0] > factor * least, errors[-1] > factor * least
    return FD_CHOICES[1] if falls and rises else FD_CHOICES[0] if falls else FD_CHOICES[3] if rises else FD_CHOICES[2]


@shows("the weight W_out[0][{j}], with {weights}; the loss L = {loss:.6f} on {T} tokens",
       "backward's gradient: {grad:+.15e}",
       each("at", line="  h = {h:.0e}: central difference {central:+.15e}, error {error:.2e}"),
       "the two errors: truncation h^2 |L'''| / 6, with |L'''| = {third:.3g} read off h = 1e-2, and round-off about"
       " 2^-52 |L| / h = {round:.2g} / h",
       "they are equal near h = (3 2^-52 |L| / |L'''|)^(1/3) = {best:.1g}; the least error here is at h = {least:.0e}",
       bounds="the shape on every machine; the smallest errors are round-off, whose last digits may differ"
                      " where exp and log round differently")
def finite_difference_answer(lab):
    """backward's gradient of one weight, W_out[0][the first target], against central differences at each step."""
    run = story_pass(lab, FD_T)
    params, positions, x, y, loss = run.params, run.positions, run.x, run.y, run.loss
    grad = model.backward(params, run.cache, run.dlogits)["W_out"][0][y[0]]
    row, j = params["W_out"][0], y[0]
    saved = row[j]
    errors, at = [], []
    try:
        for h in STEPS:
            row[j] = saved + h
            up = model.sequence_loss(params, x, y, positions)
            row[j] = saved - h
            down = model.sequence_loss(params, x, y, positions)
            central = (up - down) / (2 * h)
            errors.append(abs(central - grad))
            at.append({"h": h, "central": central, "error": errors[-1]})
    finally:
        row[j] = saved
    third = 6 * errors[0] / STEPS[0] ** 2  # |L'''| read off the largest step, where truncation rules
    best = (3 * ROUND * abs(loss) / third) ** (1 / 3) if third > 0 else float("nan")
    return {"value": error_shape(errors),
            "slots": {"j": j, "weights": weights(lab), "loss": loss, "T": FD_T, "grad": grad, "at": at,
                      "third": third, "round": ROUND * abs(loss), "best": best,
                      "least": STEPS[errors.index(min(errors))]}}


FINITE_DIFFERENCE = Lesson(
    key="finite-difference",
    title="The finite-difference check: how small a step?",
    question="The tests check every gradient that backward computes against a central difference,\n"
             "(L(w + h) - L(w - h)) / 2h, for a step h. Take one weight, W_out[0][the first target], and steps\n"
             "h = 1e-2, 1e-3, ... down to 1e-10. As h shrinks, how does the error |central difference - backward's\n"
             "gradient| change?",
    guess=("choice", FD_CHOICES),
    answer=finite_difference_answer,
    judge=Exactly(),
    explain="Two errors pull against each other. The central difference is off by h^2 L''' / 6 (Taylor's next\n"
            "term), which falls a hundred times with each tenfold smaller step. But L itself is a float, off by\n"
            "about one rounding, 2^-52 |L|, and dividing the difference of two such numbers by 2h magnifies that as\n"
            "1/h. The error falls while truncation rules, reaches its least where the two meet, near h = 1e-5, and\n"
            "rises again as round-off takes over: the gradient check (trace_block.py) uses h = 1e-6, near the bottom.",
    source="model.py: backward, sequence_loss; trace_block.py: gradient_errors (STEP = 1e-6)",
    numbers={"T": FD_T, "steps": list(STEPS)},
)


# ----------------------------------------------------------------------------------------------------------------
# Shared by the lessons on the block's parts: a size, and the gradient at the end of the stream


def size(m):
    """The size of a matrix: the root of the sum of its entries' squares (one exact-rounded sum).

    >>> size([[3.0], [4.0]])
    5.0
    """
    return math.sqrt(fsum(v * v for row in m for v in row))


def stream_gradient(run):
    """dx2 (T, d): the gradient at the stream's end, below the final layer norm, as backward computes it, of a
    story_pass."""
    dhf = model.matmul_bt(run.dlogits, run.params["W_out"])  # (T, d)
    return model.layernorm_backward(dhf, run.params["lnf_g"], run.cache["lnf"])[0]  # (T, d)


def relu_gradient(params, cache, dx2):
    """dpre (T, H): the gradient at the MLP's pre-activations, as backward computes it (ReLU passes it where the
    input was positive)."""
    dact = model.matmul_bt(dx2, params["W2"])  # (T, H)
    return [[da if z > 0.0 else 0.0 for da, z in zip(ra, rz)] for ra, rz in zip(dact, cache["pre"])]  # (T, H)


# ----------------------------------------------------------------------------------------------------------------
# 7. pre-norm: scale the stream, what does attention see?

SCALE = 10.0  # every row of x0 made ten times larger


def attention_on(params, stream, norm):
    """Attention's output (T, d) on the stream, through the block's first layer norm (pre-norm, as forward) or not."""
    h = model.layernorm_forward(stream, params["ln1_g"], params["ln1_b"])[0] if norm else stream  # (T, d)
    return model.attention_forward(params, h)[0]  # (T, d)


@shows("attention's output a = attention(LN(x0)), its size (the root of its sum of squares): {small:.6g} on x0,"
       " {large:.6g} on {scale:g} x0: a factor of {ratio:.6f}",
       "layer norm's rows (before its gain) have variance {var_small:.6f} on x0 and {var_large:.6f} on {scale:g} x0:"
       " var / (var + EPS), nearer 1 for the larger rows",
       "the stream after it, x1 = x0 + a, grows by a factor of {x1:.4f}: it keeps its own scale",
       "attention on the stream itself, with no layer norm before it: its output grows by a factor of {raw:.4f}",
       bounds="exact: every sum is one math.fsum")
def pre_norm_answer(lab):
    """How much attention's output grows when x0 is SCALE times larger: through layer norm (the block's pre-norm),
    and on the stream itself."""
    run = story_pass(lab)
    params, x0 = run.params, run.cache["x0"]  # x0 (T, d)
    big = [[v * SCALE for v in row] for row in x0]  # (T, d)
    a, a_big = attention_on(params, x0, True), attention_on(params, big, True)  # (T, d), (T, d)
    ratio = size(a_big) / size(a)
    raw = size(attention_on(params, big, False)) / size(attention_on(params, x0, False))
    x1 = size(model.add(big, a_big)) / size(model.add(x0, a))
    return {"value": ratio,
            "slots": {"small": size(a), "large": size(a_big), "scale": SCALE, "ratio": ratio,
                      "var_small": normed_variance(x0), "var_large": normed_variance(big), "x1": x1, "raw": raw}}


PRE_NORM = Lesson(
    key="pre-norm",
    title="Pre-norm: scale the stream ten times, what does attention see?",
    question="The block normalises each sublayer's input, not the stream it adds to: x1 = x0 + attention(LN(x0)),\n"
             "x2 = x1 + mlp(LN(x1)) (pre-norm). On the first story, make every row of x0 (the token and position\n"
             "embeddings) ten times larger. By what factor does attention's output grow (its size: the root of the\n"
             "sum of its squares)?",
    guess=("number",),
    answer=pre_norm_answer,
    judge=Within(0.05, 0.5),
    explain="Layer norm divides each row by its own standard deviation, so a row ten times larger comes out the\n"
            "same: attention reads the same normalised rows and gives nearly the same output. Nearly: the seed's\n"
            "rows are so small that EPS takes a share of their variance, and ten times larger rows leave it less,\n"
            "so they come out a little nearer variance 1. The stream itself keeps its scale and grows tenfold: the\n"
            "sublayers read a normalised copy and add to the stream, which only the final layer norm normalises.\n"
            "Without the norm in front, attention's output would scale with its input, and the stream with it.",
    source="model.py: forward, layernorm_forward, attention_forward",
    numbers={"scale": SCALE},
)


# ----------------------------------------------------------------------------------------------------------------
# 8. relu-mlp: how many hidden units are zero, and what is their gradient?


@shows("pre = LN(x1) W1 + b1 on the first story: {T} positions x {H} hidden units = {n} numbers, with {weights}",
       "{off} of them are at most 0, and ReLU makes them 0: a share of {off_share:.4f}",
       "units 0 at every position: {never} of {H}; units 0 at none: {always} of {H}",
       "backward's gradient at pre, dpre: {still} of {n} entries exactly 0.0, a share of {still_share:.4f}: the same"
       " entries, where the unit was 0",
       "so W1's and b1's gradient for a unit sums only the positions where it was on",
       bounds="exact: counts")
def relu_answer(lab):
    """The share of the MLP's pre-activations that ReLU makes 0, and the share of backward's gradient at them that
    is exactly 0.0."""
    run = story_pass(lab)
    pre = run.cache["pre"]  # (T, H)
    dpre = relu_gradient(run.params, run.cache, stream_gradient(run))  # (T, H)
    T, H = len(pre), len(pre[0])
    off = sum(z <= 0.0 for row in pre for z in row)
    still = sum(g == 0.0 for row in dpre for g in row)
    never = sum(all(row[j] <= 0.0 for row in pre) for j in range(H))
    always = sum(all(row[j] > 0.0 for row in pre) for j in range(H))
    return {"value": (off / (T * H), still / (T * H)),
            "slots": {"T": T, "H": H, "n": T * H, "weights": weights(lab), "off": off, "off_share": off / (T * H),
                      "never": never, "always": always, "still": still, "still_share": still / (T * H)}}


RELU_MLP = Lesson(
    key="relu-mlp",
    title="The ReLU MLP: how many hidden units are zero, and what is their gradient?",
    question="The MLP takes each row of LN(x1) to its hidden units, pre = LN(x1) W1 + b1, then ReLU keeps the\n"
             "positive ones and makes the rest 0. At the seed's weights, on the first story: what share of the\n"
             "pre-activations does ReLU make 0, and what share of backward's gradient at them (dpre) is exactly 0?\n"
             "Two numbers between 0 and 1.",
    guess=("pair", ("share of units at 0", "share of gradients exactly 0")),
    answer=relu_answer,
    judge=Pair(Within(0.05, 0.2), Within(0.05, 0.2)),
    explain="At the seed, W1's entries are drawn around 0 and b1 is 0, so each pre-activation is as likely below 0\n"
            "as above it: about half the units are off at each position, a different half at each. ReLU's slope is 1\n"
            "where its input was positive and 0 where it was not, so backward passes the gradient only through the\n"
            "units that were on: the gradient is exactly 0.0 at the same entries. A unit off at every position of\n"
            "every batch would get no gradient at all and never come back (a dead unit); the seed has none.",
    source="model.py: forward (ReLU), backward (dpre)",
)


# ----------------------------------------------------------------------------------------------------------------
# 9. softmax-gradient: the loss's gradient at the right token's score

FD_H = 1e-6  # the central difference's step, as the gradient check's


@shows("the first position's target: {piece} (token {target}); the softmax gives it p = {p:.6f}, with {weights}"
       " (1/{V} = {uniform:.6f})",
       "dlogits[0][target] = (p - 1) / T with T = {T}: {gradient:.6e}; times T: {scaled:.6f}",
       "each other score j gets p_j / T: times T, from {low:.6f} to {high:.6f}",
       "the row sums to {total:.1e}: 0 but for rounding (p sums to 1, and so does the one-hot)",
       "the central difference of the loss in that score (h = {h:g}), times T: {central:.6f}",
       bounds="exact: every sum is one math.fsum; the central difference within about 1e-9 of it")
def softmax_gradient_answer(lab):
    """T x d loss / d logits[0][the first target], from loss_and_dlogits, with the softmax behind it and a central
    difference of the loss."""
    run = story_pass(lab)
    logits, y = run.logits, run.y
    T, target, row = len(y), y[0], run.dlogits[0]
    top = max(logits[0])
    e = [math.exp(z - top) for z in logits[0]]  # (V,)
    p = e[target] / fsum(e)

    def loss_at(z):
        changed = [list(r) for r in logits]  # (T, V)
        changed[0][target] = z
        return model.loss_and_dlogits(changed, y)[0]

    z = logits[0][target]
    central = (loss_at(z + FD_H) - loss_at(z - FD_H)) / (2 * FD_H)
    others = [T * v for j, v in enumerate(row) if j != target]
    return {"value": T * row[target],
            "slots": {"piece": repr(lab.tokenizer.vocab[target]), "target": target, "p": p, "weights": weights(lab),
                      "V": len(row), "uniform": 1 / len(row), "T": T, "gradient": row[target],
                      "scaled": T * row[target], "low": min(others), "high": max(others), "total": fsum(row),
                      "h": FD_H, "central": T * central}}


SOFTMAX_GRADIENT = Lesson(
    key="softmax-gradient",
    title="The loss's gradient at the right token's score",
    question="The loss is the mean over the T positions of -log softmax(logits[t])[target t]. Its gradient with\n"
             "respect to the scores is what backward starts from. At the seed's weights, on the first story: what\n"
             "is T times d loss / d logits[0][target 0], the gradient at the right token's score at the first\n"
             "position, times the number of positions? (Mind its sign.)",
    guess=("number",),
    answer=softmax_gradient_answer,
    judge=Within(0.02, 0.2),
    explain="Softmax and cross-entropy together have the simplest gradient in the model: softmax minus the one-hot\n"
            "of the target, divided by T because the loss is a mean. At the right token it is p - 1, negative:\n"
            "raising the right score lowers the loss. Every other score j gets +p_j. The seed's softmax is nearly\n"
            "uniform, p about 1/{vocab}, so T times the gradient is about 1/{vocab} - 1. Each row sums to 0: moving\n"
            "every score of a row up together changes no probability.",
    source="model.py: loss_and_dlogits",
)


# ----------------------------------------------------------------------------------------------------------------
# 10. skip-paths: what reaches the embeddings without them?


def sublayers_backward(params, cache, dx2, skips):
    """The gradient at x0 (T, d) from dx2 (T, d): back through the MLP and attention, each with its skip path (as
    backward) or without (x1 = attention(LN(x0)), x2 = mlp(LN(x1)))."""
    dpre = relu_gradient(params, cache, dx2)  # (T, H)
    dh2 = model.matmul_bt(dpre, params["W1"])  # (T, d)
    dx1 = model.layernorm_backward(dh2, params["ln2_g"], cache["ln2"])[0]  # (T, d) through the MLP
    if skips:
        dx1 = model.add(dx2, dx1)  # (T, d) skip path 2
    dh1 = model.attention_backward(params, cache["att"], dx1)[1]  # (T, d)
    dx0 = model.layernorm_backward(dh1, params["ln1_g"], cache["ln1"])[0]  # (T, d) through attention
    return model.add(dx1, dx0) if skips else dx0  # (T, d) skip path 1


@shows("the gradient at the stream's end (dx2, below the final layer norm): size {end:.6g}, with {weights}",
       "at x0 with the skip paths (backward's): size {both:.6g}",
       "at x0 without them, through the MLP and attention only: size {neither:.6g}",
       "without / with: {ratio:.4g}",
       bounds="exact: every sum is one math.fsum")
def skip_paths_answer(lab):
    """The size of the gradient at x0 without the skip paths against with them (backward's)."""
    run = story_pass(lab)
    dx2 = stream_gradient(run)  # (T, d)
    both, neither = (size(sublayers_backward(run.params, run.cache, dx2, skips)) for skips in (True, False))
    return {"value": neither / both,
            "slots": {"end": size(dx2), "weights": weights(lab), "both": both, "neither": neither,
                      "ratio": neither / both}}


SKIP_PATHS = Lesson(
    key="skip-paths",
    title="The skip paths: what reaches the embeddings without them?",
    question="Each sublayer's output is added to its input: x1 = x0 + attention(LN(x0)), x2 = x1 + mlp(LN(x1)).\n"
             "In backward, each addition hands its gradient to both the sublayer and the skip path around it. Without\n"
             "the skip paths (x1 = attention(LN(x0)), x2 = mlp(LN(x1))), the gradient at x0 would be only what comes\n"
             "back through both sublayers. At the seed's weights, on the first story: how large is that gradient\n"
             "against the one backward computes, as a ratio of their sizes (without / with)?",
    guess=("number",),
    answer=skip_paths_answer,
    judge=Factor(3, 10),
    explain="Through the skip paths the gradient at the stream's end reaches x0 unchanged: backward adds it, it\n"
            "does not multiply it. Through a sublayer it is multiplied by that sublayer's weights and layer norm's\n"
            "slope, and the seed's weights are small, so little comes back through both. The ratio is a few\n"
            "hundredths after one block; a stack of blocks without skip paths multiplies such factors, and the\n"
            "embeddings, the first block's weights with them, would learn almost nothing. With them, every block\n"
            "gets the gradient of the loss directly.",
    source="model.py: backward (skip path 1, skip path 2)",
)


# ----------------------------------------------------------------------------------------------------------------
# The path

LESSONS = [TOKENS, INIT_LOSS, LAYERNORM, ORDER, CAUSALITY, FINITE_DIFFERENCE, PRE_NORM, RELU_MLP, SOFTMAX_GRADIENT,
           SKIP_PATHS]


def by_key(key, lessons=LESSONS):
    """The lesson of a key, or a ValueError that names it and every key there is.

    >>> by_key("order").title
    'The order test: does the model see word order?'
    """
    for lesson in lessons:
        if lesson.key == key:
            return lesson
    raise ValueError(f"no lesson {key!r}; expected one of: {', '.join(lesson.key for lesson in lessons)}")


PACKAGES = {"numpy": "NumPy", "scipy": "SciPy"}  # what a module of lessons may need that is not installed


def imported_lessons(name, what, packages):
    """(the LESSONS of module name, None), or ([], why they are not here, in words: what they are) when that module
    or one of packages is missing. Any other error in it raises: a broken module is not a missing one."""
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name and e.name not in packages:
            raise
        why = f"{PACKAGES[e.name]} is not installed" if e.name in packages else \
            f"{name.replace('.', '/')}.py is not there"
        return [], f"{what} left out: {why}"
    return list(module.LESSONS), None


def numpy_lessons():
    """(the lessons after the ten, why some are left out, or None): the three that train, then the scaling lesson
    (which needs SciPy too): without NumPy, neither imports, and the path keeps its order."""
    trained, why = imported_lessons("experiments.lessons_trained", "the lessons that train are", ("numpy",))
    if why:
        return [], f"{why} (and the scaling lesson after them)"
    scaling, why = imported_lessons("experiments.lessons_scaling", "the scaling lesson is", ("numpy", "scipy"))
    return trained + scaling, why


# ----------------------------------------------------------------------------------------------------------------
# Asking: the question, the guess first, then the answer computed live


def read_guess(lesson, read, write):
    """The learner's guess as its value, asked again after bad input (which is named), or None at q or the end of
    input."""
    if lesson.guess[0] == "choice":
        for n, choice in enumerate(lesson.guess[1], 1):
            write(f"  {n}. {choice}")
    while True:
        try:
            text = read(f"your guess ({describe_guess(lesson.guess)}; {QUIT} to stop): ")
        except EOFError:
            return None
        if text.strip().lower() == QUIT:
            return None
        try:
            return parse_guess(lesson.guess, text)
        except ValueError as e:
            write(f"not a guess: {e}. Try again.")


def answer_lines(answer):
    """The lines that show an answer: the value and how exact it is, then what the lab computed (docs/lessons.md
    folds these under each question).

    >>> answer_lines({"value": 4, "shown": ["4 pieces"], "bounds": "exact"})
    ['the answer: 4 (exact)', '  4 pieces']
    """
    return [f"the answer: {show(answer['value'])} ({answer['bounds']})", *(f"  {line}" for line in answer["shown"])]


def ask(lesson, lab, read=input, write=print):
    """Go through one lesson: question, guess, the answer computed from lab, the verdict, the explanation and the
    source. Returns {"key", "guess", "value", "verdict"}, or {"key", "skipped": why}, or None when the learner stops.

    >>> said = []
    >>> ask(TOKENS, build_lab(), read=lambda prompt: "4", write=said.append)["verdict"]
    'right'
    """
    write(lesson.title)
    write("")
    said = words(lesson, lab)
    write(said["question"])
    guess = read_guess(lesson, read, write)
    if guess is None:
        return None
    write("")
    write("the lab computes the answer, live ...")
    lab.write = write  # (a lesson that trains writes its progress here)
    try:
        answer = lesson.answer(lab)
    except Skip as e:
        write(f"skipped: {e}")
        return {"key": lesson.key, "skipped": str(e)}
    verdict = lesson.judge(guess, answer)
    write(f"your guess: {show(guess)}")
    for line in answer_lines(answer):
        write(line)
    write(f"verdict: {verdict} ({lesson.judge.rule})")
    write("")
    write(said["explain"])
    write(f"source: {lesson.source}")
    return {"key": lesson.key, "guess": guess, "value": answer["value"], "verdict": verdict}
