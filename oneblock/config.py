"""One description of a model: `ModelConfig`, the sizes and the position scheme that every implementation, every
checkpoint and the explorer page read (explorer/model.js has its mirror, under the same names). Standard library only.

A model is seven values: its vocabulary, width d, the MLP's hidden width, max_len (the rows of learned positions),
the number of blocks, the heads of each block's attention, and the position scheme. Everything else follows from
them: the parameters' names and shapes, how many numbers they hold, and the config a checkpoint records.

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
"""

import functools
from dataclasses import dataclass

from oneblock import sizes

SCHEMES = ("learned", "none", "sinusoidal", "rope")  # where a token is: the one list of schemes in Python
SIZE_KEYS = ("vocab", "d", "hidden", "max_len")  # the sizes every model has, in the order of its JSON
GROWN_KEYS = ("blocks", "heads")  # the sizes of a grown model, in its JSON only when not both 1
SWITCH_KEY = "use_positions"  # model.py's switch, in the JSON beside the scheme (true exactly for "learned")
JSON_KEYS = (*SIZE_KEYS, *GROWN_KEYS, SWITCH_KEY, "positions")  # every key a config's JSON may have, in its order
ONE_BLOCK_VERSION = "1"  # checkpoint format version of a model of one block and one head: the sizes are all shapes
GROWN_VERSION = "2"  # ... of a grown model, whose JSON has blocks and heads


# ----------------------------------------------------------------------------------------------------------------
# The config


@dataclass(frozen=True)
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
        sizes.check_sizes(self.d, self.blocks, self.heads, self.positions)
        return self

    @property
    def grown(self):
        """Whether the model has more than one block or one head: its checkpoint is then format version 2."""
        return (self.blocks, self.heads) != (1, 1)

    # ---- what the config implies

    def param_names(self):
        """The parameter names, in the order of the parameter dict (sizes.py says how they are made).

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

    def parameter_count(self):
        """How many numbers the parameters hold, by arithmetic (a config of 10^12 blocks makes no name).

        >>> ModelConfig(96, 16, 64, 64).parameter_count()
        7440
        """
        return sizes.parameter_count(self.vocab, self.d, self.hidden, self.max_len, self.blocks)

    def init_params(self, seed):
        """Fresh parameters as nested lists, drawn as model.init_params draws them (sizes.init_params).

        >>> import model
        >>> ModelConfig(96, 4, 8, 8).init_params(3) == model.init_params(96, 4, 8, 8, 3)
        True
        """
        return sizes.init_params(self.vocab, self.d, self.hidden, self.max_len, seed, self.blocks)

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
        return f"{sizes.describe(self.blocks, self.heads)}, width {self.d}, {self.positions} positions"

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
        (format version 2), False when they must not (version 1), None for either. The sizes' fit to each other is
        `checked()`'s, after the caller has held them to what its file holds.

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


@functools.cache
def _shapes(vocab, d, hidden, max_len, blocks):
    """The (name, shape) pairs of a config's parameters, worked out once for each size (sizes.shape_table)."""
    return sizes.shape_table(vocab, d, hidden, max_len, blocks)
