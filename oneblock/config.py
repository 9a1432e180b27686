"""One description of a model: `ModelConfig`, the sizes and the position scheme that every implementation, every
checkpoint and the explorer page read (explorer/model.js has its mirror, under the same names). Standard library only.

A model is seven values: its vocabulary, width d, the MLP's hidden width, max_len (the rows of learned positions),
the number of blocks, the heads of each block's attention, and the position scheme. Everything else follows from
them: the parameters' names and shapes, how many numbers they hold, what a training step costs, and the config a
checkpoint records.

    >>> cfg = ModelConfig(vocab=96, d=16, hidden=64, max_len=64, blocks=2, heads=4)
    >>> cfg.checked() is cfg, len(cfg.param_shapes()), cfg.parameter_count()
    (True, 30, 10656)
    >>> ModelConfig.from_json(cfg.to_json()) == cfg
    True
    >>> ModelConfig(96, 16, 64, 64, heads=3).checked()
    Traceback (most recent call last):
    ...
    ValueError: heads = 3 does not divide the width d = 16; expected one of 1, 2, 4, 8, 16

model.py, the seed's one-block reference, knows two of the schemes through its own switch `use_positions` (True is
"learned", False is "none"); `seed_switch` is the one place that turns a config into it, and the checkpoint's JSON
keeps the switch beside the scheme (`to_json`), so that a file written before the schemes still reads.

A grown model's equations and parameter names are docs/growing.md's, "The sizes".
"""

import dataclasses
import functools
import math
import random

from model import PARAM_SHAPES, param_shapes as one_block_shapes

SCHEMES = ("learned", "none", "sinusoidal", "rope")  # where a token is: the one list of schemes in Python
SIZE_KEYS = ("vocab", "d", "hidden", "max_len")  # the sizes every model has, in the order of its JSON
GROWN_KEYS = ("blocks", "heads")  # the sizes of a grown model, in its JSON only when not both 1
SWITCH_KEY = "use_positions"  # model.py's switch, in the JSON beside the scheme (true exactly for "learned")
JSON_KEYS = (*SIZE_KEYS, *GROWN_KEYS, SWITCH_KEY, "positions")  # every key a config's JSON may have, in its order
ONE_BLOCK_VERSION = "1"  # checkpoint format version of a model of one block and one head: the sizes are all shapes
GROWN_VERSIONS = ("2", "3")  # ... of a grown model, whose JSON has blocks and heads: 2 repeats the model in its
#                              training settings (read, no longer written), 3 records it in its config alone
GROWN_VERSION = GROWN_VERSIONS[-1]  # what a grown model's file is written as
SEED_SCHEMES = ("learned", "none")  # the schemes model.py has (its switch use_positions true and false)
OUTSIDE = ("tok_emb", "pos_emb", "lnf_g", "lnf_b", "W_out", "b_out")  # the tensors that are no block's
BLOCK_NAMES = tuple(name for name in PARAM_SHAPES if name not in OUTSIDE)  # ln1_g, ..., b2: one block's, in order


# ----------------------------------------------------------------------------------------------------------------
# The config


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The sizes and the position scheme of a model. Frozen: a model's description is a value, passed beside its
    weights, never changed under them (dataclasses.replace makes another)."""

    vocab: int  # V, the tokens of the tokenizer
    d: int  # the width: every token is a vector of d numbers between the layers
    hidden: int  # H, the hidden units of each block's MLP (4 d in every model the lab trains)
    max_len: int  # L, the rows of learned positions: the most positions the "learned" scheme reads
    blocks: int = 1  # transformer blocks, each with its own layer norms, attention and MLP
    heads: int = 1  # attention heads in each block, each of width d / heads
    positions: str = "learned"  # one of SCHEMES

    def checked(self):
        """self, or a ValueError that names the first value that makes no sense and what was expected.

        >>> ModelConfig(96, 15, 60, 64, positions="rope").checked()
        Traceback (most recent call last):
        ...
        ValueError: rope rotates pairs of channels: the width d must be even, got d = 15
        """
        for name in (*SIZE_KEYS, *GROWN_KEYS):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} = {value!r}: expected a whole number of at least 1")
        if not isinstance(self.positions, str) or self.positions not in SCHEMES:
            raise ValueError(f"positions = {self.positions!r}: expected one of {', '.join(SCHEMES)}")
        if self.d % self.heads:
            raise ValueError(f"heads = {self.heads} does not divide the width d = {self.d}; expected one of"
                             f" {', '.join(map(str, divisors(self.d)))}")
        if self.positions == "rope" and (self.d // self.heads) % 2:
            even = [n for n in divisors(self.d) if (self.d // n) % 2 == 0]
            if self.heads == 1:
                raise ValueError(f"rope rotates pairs of channels: the width d must be even, got d = {self.d}")
            raise ValueError(f"heads = {self.heads} gives heads of width d / heads = {self.d // self.heads}, but rope"
                             f" turns pairs of channels in each head: the head width must be even; expected one of"
                             f" {', '.join(map(str, even))} heads for d = {self.d}")
        return self

    @property
    def grown(self):
        """Whether the model has more than one block or one head: its checkpoint is then format version 3."""
        return (self.blocks, self.heads) != (1, 1)

    def seed_problem(self):
        """Why model.py, the seed's reference (one block, one head, learned positions or none), cannot run this
        model, in words that follow the model's name, or None when it can: the one such check.

        >>> ModelConfig(96, 16, 64, 64).seed_problem() is None, ModelConfig(96, 16, 64, 64, heads=4).seed_problem()
        (True, 'has 1 block x 4 heads, but model.py has one block and one head')
        >>> ModelConfig(96, 16, 64, 64, positions="rope").seed_problem()
        "has positions 'rope', but model.py has learned positions and none only"
        """
        if self.grown:
            return f"has {self.blocks_and_heads()}, but model.py has one block and one head"
        if self.positions not in SEED_SCHEMES:
            return f"has positions {self.positions!r}, but model.py has learned positions and none only"
        return None

    # ---- what the config implies

    def param_names(self):
        """The parameter names, in the order of the parameter dict.

        >>> ModelConfig(96, 4, 8, 8, blocks=2).param_names()[12:16]
        ['W2', 'b2', 'block1.ln1_g', 'block1.ln1_b']
        """
        return list(self.param_shapes())

    def param_shapes(self):
        """Every parameter's name and shape, in order: with one block exactly model.param_shapes.

        >>> ModelConfig(96, 16, 64, 64, blocks=3).param_shapes()["block2.W1"]
        (16, 64)
        """
        return dict(_shapes(self.vocab, self.d, self.hidden, self.max_len, self.blocks))

    def init_params(self, seed):
        """Fresh parameters as model.init_params makes them, for any number of blocks, drawn in the order
        docs/growing.md gives ("The sizes"): with one block, exactly model.init_params.

        >>> import model
        >>> ModelConfig(96, 4, 8, 8).init_params(3) == model.init_params(96, 4, 8, 8, 3)
        True
        """
        rng = random.Random(seed)
        params = {}
        for name, (rows, *cols) in self.param_shapes().items():
            if cols:
                params[name] = [[rng.gauss(0.0, 0.02) for _ in range(cols[0])] for _ in range(rows)]
            else:
                params[name] = [1.0 if name.endswith("_g") else 0.0] * rows
        return params

    def shape_problem(self, shapes):
        """What is wrong with tensors of these shapes ({name: shape}) as this model's parameters, in one line, or
        None: a missing or unknown name, or a shape other than the config's.

        >>> cfg = ModelConfig(96, 4, 8, 8)
        >>> cfg.shape_problem(cfg.param_shapes()) is None
        True
        >>> cfg.shape_problem({**cfg.param_shapes(), "W1": (4, 9)})
        'parameter W1 has shape (4, 9), expected (4, 8)'
        """
        want = _shapes(self.vocab, self.d, self.hidden, self.max_len, self.blocks)
        missing = [name for name, _ in want if name not in shapes]
        if missing:
            return f"parameter dict is missing tensors: {missing[:5]}{' ...' if len(missing) > 5 else ''}"
        if len(shapes) != len(want):
            known = dict(want)
            return f"parameter dict has unknown tensors: {[name for name in shapes if name not in known][:5]}"
        for name, shape in want:
            if tuple(shapes[name]) != shape:
                return f"parameter {name} has shape {tuple(shapes[name])}, expected {shape}"
        return None

    def describe(self):
        """The sizes in words, for headers and titles.

        >>> ModelConfig(96, 16, 64, 64, blocks=2, heads=4, positions="rope").describe()
        '2 blocks x 4 heads, width 16, rope positions'
        """
        return f"{self.blocks_and_heads()}, width {self.d}, {self.positions} positions"

    def blocks_and_heads(self):
        """The blocks and heads in words.

        >>> ModelConfig(96, 16, 64, 64).blocks_and_heads(), ModelConfig(96, 16, 64, 64, 2, 4).blocks_and_heads()
        ('1 block x 1 head', '2 blocks x 4 heads')
        """
        return (f"{self.blocks} block{'s' if self.blocks != 1 else ''} x {self.heads}"
                f" head{'s' if self.heads != 1 else ''}")

    # ---- what the config costs: the numbers a model and a training step hold, by formula, so that a size can be
    # refused before its memory is spent (dev/scale.py prints them for any size; tests/test_scale.py holds them to
    # the model's own arrays)

    def parameter_count(self):
        """How many numbers the parameters hold, by arithmetic (a config of 10^12 blocks makes no name).

        >>> ModelConfig(96, 16, 64, 64).parameter_count(), ModelConfig(96, 16, 64, 64, 10**12).parameter_count()
        (7440, 3216000000004224)
        """
        one = {name: math.prod(shape) for name, shape in
               one_block_shapes(self.vocab, self.d, self.hidden, self.max_len).items()}
        return sum(one[name] for name in OUTSIDE) + self.blocks * sum(one[name] for name in BLOCK_NAMES)

    def non_embedding_parameters(self):
        """The parameters of the blocks and the final layer norm: every parameter but the token and position tables
        and the output layer, which scaling laws count apart (Kaplan et al. 2020).

        >>> ModelConfig(96, 16, 64, 64).non_embedding_parameters(), 7440 - 96 * 16 - 64 * 16 - 16 * 96 - 96
        (3248, 3248)
        """
        return dataclasses.replace(self, vocab=0, max_len=0).parameter_count()

    def activations_per_token(self, T):
        """The numbers numpy_model's cache keeps per token for the backward pass, in windows of T tokens: per block
        its input, two layer norms' outputs and normalised rows (5 d in all) and their deviations (2), q, k, v, the
        attention's context and the residual after it (5 d), both hidden layers of the MLP (2 hidden), and each
        head's row of T attention weights; then the final layer norm's input, output and normalised rows (3 d) and
        deviation (1), and the logits and their gradient (2 V).

        >>> ModelConfig(96, 16, 64, 64).activations_per_token(64)
        595
        """
        d = self.d
        return self.blocks * (10 * d + 2 * self.hidden + 2 + self.heads * T) + 3 * d + 1 + 2 * self.vocab

    def flops_per_token(self, T):
        """The floating-point operations of one training step per token (a multiply-add is 2), in windows of T
        tokens: the forward pass's matrix products, per block Wq, Wk, Wv and Wo (4 d^2 multiply-adds), the MLP's two
        layers (2 d hidden), every score of the (T, T) attention matrix and the weighted sum of the values (2 T d, as
        the kernels compute the whole matrix before the causal mask), then the output layer (d V); the backward pass
        costs twice the forward, a product for the gradient of each of its two inputs. Layer norms, softmaxes, the
        loss and Adam are left out: they grow with d, not d^2.

        >>> ModelConfig(96, 16, 64, 64).flops_per_token(64)  # 3 (24 d^2 + 4 T d + 2 d V) for hidden = 4 d
        39936
        """
        d = self.d
        forward = self.blocks * (2 * (4 * d * d + 2 * d * self.hidden) + 4 * T * d) + 2 * d * self.vocab
        return 3 * forward

    def step_bytes(self, batch, seq_len, itemsize):
        """About how many bytes a training step of the NumPy paths holds at once, numbers of itemsize bytes: the
        parameters, their gradients and Adam's two moments (4 numbers a parameter), and the activations of
        batch x seq_len tokens twice over (the backward pass makes arrays of the same sizes).

        >>> ModelConfig(96, 16, 64, 64).step_bytes(batch=16, seq_len=64, itemsize=4)
        4993280
        """
        return itemsize * (4 * self.parameter_count()
                           + 2 * batch * seq_len * self.activations_per_token(seq_len))

    # ---- the checkpoint's JSON

    def to_json(self):
        """The JSON object a checkpoint records (json.dumps writes it): the sizes, blocks and heads only for a grown
        model (so that a one-block, one-head file is byte for byte what it was before models could grow), model.py's
        switch and the scheme.

        >>> ModelConfig(96, 16, 64, 64, positions="rope").to_json()
        {'vocab': 96, 'd': 16, 'hidden': 64, 'max_len': 64, 'use_positions': False, 'positions': 'rope'}
        """
        grown = {name: getattr(self, name) for name in GROWN_KEYS} if self.grown else {}
        return {**{name: getattr(self, name) for name in SIZE_KEYS}, **grown, SWITCH_KEY: seed_switch(self),
                "positions": self.positions}

    @classmethod
    def from_json(cls, value, grown=None):
        """The config of a parsed JSON object, or a ValueError naming its first bad entry: known keys only, every
        size a positive whole number, the switch true or false and the scheme one of SCHEMES that agrees with it (a
        file from before the schemes has the switch only). grown: True when the sizes must hold blocks and heads
        (format versions 2 and 3), False when they must not (version 1), None for either. The sizes' fit to each
        other is `checked()`'s, after the caller has held them to what its file holds.

        >>> ModelConfig.from_json({"vocab": 96, "d": 16, "hidden": 64, "max_len": 64, "use_positions": False})
        ModelConfig(vocab=96, d=16, hidden=64, max_len=64, blocks=1, heads=1, positions='none')
        >>> ModelConfig.from_json({"vocab": 96, "d": "16"})
        Traceback (most recent call last):
        ...
        ValueError: config d is '16', expected a positive int
        """
        if not isinstance(value, dict):
            raise ValueError(f"metadata config is a JSON {type(value).__name__}, expected an object")
        unknown = next((key for key in value if key not in JSON_KEYS), None)
        if unknown is not None:
            raise ValueError(f"config has the key {said(unknown)}, which no model config has; expected some of"
                             f" {list(JSON_KEYS)}")
        given = tuple(key for key in GROWN_KEYS if key in value)  # (read as sizes when they may be there)
        needed = SIZE_KEYS + (GROWN_KEYS if grown else given if grown is None else ())
        for key in needed:
            if type(value.get(key)) is not int or value[key] < 1:
                raise ValueError(f"config {key} is {said(value.get(key))}, expected a positive int")
        if grown is False and any(key in value for key in GROWN_KEYS):
            raise ValueError(f"config has blocks or heads, but format version {ONE_BLOCK_VERSION!r} is of one block"
                             f" and one head: a grown model's file is version {GROWN_VERSION!r}")
        switch = value.get(SWITCH_KEY)
        if type(switch) is not bool:
            raise ValueError(f"config {SWITCH_KEY} is {said(switch)}, expected true or false")
        scheme = value.get("positions", "learned" if switch else "none")
        if "positions" in value:  # (files written before the position schemes have the switch only)
            if not isinstance(scheme, str) or scheme not in SCHEMES:
                raise ValueError(f"config positions is {said(scheme)}, expected one of {list(SCHEMES)}")
            if switch != (scheme == "learned"):
                raise ValueError(f"config {SWITCH_KEY} is {str(switch).lower()} but positions is {scheme!r}:"
                                 f" {SWITCH_KEY} is true exactly for 'learned'")
        return cls(*(value[key] for key in SIZE_KEYS), value.get("blocks", 1), value.get("heads", 1), scheme)


def seed_switch(config):
    """model.py's own third argument for a config: True when the learned position rows are added. The one adapter
    between a config and the seed's signature, which knows "learned" (True) and "none" (False) only.

    >>> seed_switch(ModelConfig(96, 16, 64, 64)), seed_switch(ModelConfig(96, 16, 64, 64, positions="none"))
    (True, False)
    """
    return config.positions == "learned"


def said(value, most=80):
    """repr(value) for a message, cut to most characters: what a file holds may be any length.

    >>> said("heads"), said("x" * 100, 10)
    ("'heads'", "'xxxxxx...")
    """
    if isinstance(value, (list, tuple)) and len(value) > most:  # (the first items begin the same text)
        value = value[:most]
    text = repr(value)
    return text if len(text) <= most else text[:most - 3] + "..."


def divisors(n):
    """The divisors of n in order, found up to its square root (so that a huge width is answered at once).

    >>> divisors(16), divisors(7)
    ([1, 2, 4, 8, 16], [1, 7])
    """
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return small + [n // k for k in reversed(small) if k * k != n]


# ----------------------------------------------------------------------------------------------------------------
# The parameters' names, block by block


def prefix(block):
    """What goes before a tensor's name in block `block` (counted from 0).

    >>> prefix(0), prefix(1), prefix(12)
    ('', 'block1.', 'block12.')
    """
    return f"block{block}." if block else ""


def each_param_name(blocks):
    """The parameter names of a model of this many blocks, in the order of the parameter dict, one at a time (10^12
    blocks cost nothing until their names are read).

    >>> list(each_param_name(2))[12:16]
    ['W2', 'b2', 'block1.ln1_g', 'block1.ln1_b']
    """
    yield from OUTSIDE[:2]
    for block in range(blocks):
        yield from (prefix(block) + name for name in BLOCK_NAMES)
    yield from OUTSIDE[2:]


def block_params(params, block):
    """The tensors of one block under their names inside it (model.py's names, without the prefix). The first
    block's names have no prefix: for it, params itself (the tensors outside the blocks ride along unread), so
    that a one-block step builds no dict for it.

    >>> p = ModelConfig(96, 4, 8, 8, blocks=2).init_params(3)
    >>> sorted(block_params(p, 1)) == sorted(BLOCK_NAMES), block_params(p, 1)["Wq"] is p["block1.Wq"]
    (True, True)
    >>> block_params(p, 0) is p
    True
    """
    if block == 0:
        return params
    return {name: params[prefix(block) + name] for name in BLOCK_NAMES}


# Every forward and backward pass of numpy_model.py checks its parameters against the table of its config
# (ModelConfig.param_shapes). Worked out once per size (functools.cache) instead of on every call, the plain
# mirror's step at series size, B = 1, is as fast as before models could grow
# (python3 -m dev.bench --sizes series-b1 --against DIR).


@functools.cache
def _shapes(vocab, d, hidden, max_len, blocks):
    """The (name, shape) pairs of a config's parameters, worked out once for each size."""
    if type(blocks) is not int or blocks < 1:
        raise ValueError(f"blocks = {blocks!r}: expected a whole number of at least 1")
    one = one_block_shapes(vocab, d, hidden, max_len)
    return tuple((name, one[name.rpartition(".")[2]]) for name in each_param_name(blocks))
