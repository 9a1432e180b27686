"""What the browser explorer reads: the page's data exported beside it (explore.py is the command line on this and
server.py). The page (explorer/index.html and its ES modules) runs the model in JavaScript, any model train.py
writes (any blocks, heads and position scheme), so the export is all it needs: the weights (a checkpoint, or
without one the seed-3 initial weights, and the page says plainly that the model is untrained), tokenizer.json,
the split of corpus.txt into the stories train.py trains and validates on, the entropy floors (floor.py) and the
order test's two sentences (the trace's, block-trace.json). Its files are written all together or not at all, so a
failed export leaves an old one as it was.

A model of your own text (train.py --data FILE) brings its own tokenizer in its checkpoint; the split is FILE's, read
again from where train.py read it (run explore.py in the same folder) and checked against the hash the checkpoint
recorded, and there is no floor.

    >>> manifest = export_data(tempfile.mkdtemp(), *read_weights("no-such.safetensors", explicit=False))
    >>> manifest["trained"], manifest["order"]["a"]
    (False, 'now mia gives the hat to leo.')
"""

import json
import random
import tempfile  # noqa: F401  (the example above)
from pathlib import Path

from atomic import folder_for, write_together
import bpe
import model
from oneblock import checkpoint, floor, machine, settings, sizes
from oneblock.data import CORPUS_FILE, ROOT, TOKENIZER_FILE, split_text

EXPLORER = ROOT / "explorer"  # the page: index.html, style.css and the ES modules
PAGE_SUFFIXES = (".html", ".css", ".js")  # the page's files; everything it reads besides them is in data/
DATA_FORMAT = "one-block explorer data v1"  # manifest.json "format"
WEIGHTS_FILE = "weights.safetensors"  # in data/: the checkpoint the page loads
UNTRAINED_SEED = 3  # train.py's default seed: the weights a fresh `python3 train.py` starts from
VAL_STORIES = settings.VAL_STORIES  # train.py's split: the last 300 stories validate
PAGE_COPIES = 8  # float64 copies of the weights the page holds at once while it trains
PAGE_BYTES = 1 << 30  # what the page keeps to: a browser tab's memory is a few GiB at most
ORDER = tuple(json.loads((ROOT / "block-trace.json").read_text(encoding="utf-8"))["order_test"][key]
              for key in ("a", "b"))  # the order test's two sentences, as the trace records them

# ----------------------------------------------------------------------------------------------------------------
# The export


def untrained_checkpoint(tok):
    """The bytes of a checkpoint of the seed-3 initial weights (float64, zero moments, step 0): what a fresh
    train.py run starts from, for when there is no trained checkpoint yet."""
    vocab = len(tok.vocab)
    params = model.init_params(vocab, **settings.MODEL, seed=UNTRAINED_SEED)
    shapes = model.param_shapes(vocab, settings.MODEL["d"], settings.MODEL["hidden"], settings.MODEL["max_len"])
    tensors = {name: ("F64", shapes[name], checkpoint.flat(t)) for name, t in params.items()}
    zeros = {name: ("F64", shape, [0.0] * len(tensors[name][2])) for name, shape in shapes.items()}
    for prefix in checkpoint.MOMENT_PREFIXES:
        tensors.update({prefix + name: t for name, t in zeros.items()})
    tensors[checkpoint.STEP] = ("I64", (), [0])
    tensors[checkpoint.RNG] = checkpoint.rng_tensor(random.Random(UNTRAINED_SEED))  # the batch sampler's start
    config = {"vocab": vocab, **settings.MODEL, "use_positions": True, "positions": "learned"}
    metadata = {"format": checkpoint.FORMAT, "format_version": checkpoint.FORMAT_VERSION, "config": json.dumps(config),
                "training": json.dumps({"seed": UNTRAINED_SEED, "steps": 0}),
                "tokenizer_sha256": checkpoint.sha256_file(TOKENIZER_FILE)}
    return checkpoint.encode(tensors, metadata)


def read_weights(ckpt_path, explicit):
    """(checkpoint bytes, manifest fields) for the page, which runs every checkpoint train.py writes: any blocks,
    heads, position scheme, width and max_len, float32 or float64, from any backend, of the stories or of your own
    text. A checkpoint that is missing (when asked for by name) or bad is a ValueError with checkpoint.py's message;
    so is one too large for the page to hold (page_fits), and one of your own text whose text is gone or changed."""
    path = Path(ckpt_path)
    tok = bpe.Tokenizer.load(TOKENIZER_FILE)
    if not path.exists():
        if explicit:
            raise ValueError(f"no checkpoint at {path}; train one with python3 train.py, or leave out --ckpt to"
                             f" explore the untrained model")
        return untrained_checkpoint(tok), {"trained": False, "step": 0, "val_loss": None,
                                           "source": f"The seed-{UNTRAINED_SEED} initial weights (no checkpoint at"
                                                     f" {path}; train one with python3 train.py)"}
    raw = checkpoint.read_bytes(path)  # read once: the bytes exported are the bytes checked
    ckpt = checkpoint.load_bytes(raw, path)
    checkpoint.tokenizer_of(ckpt, TOKENIZER_FILE, path)  # the one it carries, or the shipped one unchanged
    page_fits(ckpt["config"], path)
    page_data(ckpt["metadata"], ckpt["training"], path)  # a model of your own text: its text is still there
    val = ckpt["metadata"].get("val_loss")  # (checked: a finite number, when there)
    return raw, {"trained": ckpt["step"] > 0, "step": ckpt["step"],
                 "val_loss": float(val) if val is not None else None, "source": f"Checkpoint {path}"}


def page_fits(config, where):
    """Raise a ValueError, naming the model and why, unless the page can hold a model of config: it keeps about
    PAGE_COPIES float64 copies of the weights (the weights, Adam's two moments, the gradients, and the copies that
    pass between the page and its training worker), which must fit in PAGE_BYTES.

    >>> page_fits({"vocab": 96, "d": 16, "hidden": 64, "max_len": 64}, "x.safetensors")
    >>> page_fits({"vocab": 96, "d": 4096, "hidden": 16384, "max_len": 64, "blocks": 2, "heads": 4}, "x.safetensors")
    Traceback (most recent call last):
    ...
    ValueError: x.safetensors is a model of 2 blocks x 4 heads, width 4096: 403,783,776 parameters, which the ...
    """
    blocks, heads = checkpoint.sizes_of(config)
    count = sizes.parameter_count(*(config[key] for key in checkpoint.SIZE_KEYS), blocks=blocks)
    need = PAGE_COPIES * 8 * count
    if need > PAGE_BYTES:
        raise ValueError(f"{where} is a model of {sizes.describe(blocks, heads)}, width {config['d']}: {count:,}"
                         f" parameters, which the explorer does not run: the page holds about {PAGE_COPIES} float64"
                         f" copies of the weights ({machine.in_bytes(need)} here) and keeps to"
                         f" {machine.in_bytes(PAGE_BYTES)} (at most {PAGE_BYTES // (8 * PAGE_COPIES):,} parameters);"
                         f" sample.py runs it")


def page_data(metadata, training, where):
    """What the page reads besides the weights, for a checkpoint's metadata and training settings: {tokenizer (the
    tokenizer.json text), split, floor, val_floor, order}. For the stories: the shipped tokenizer, train.py's split
    of corpus.txt and the floors. For a model of your own text: the tokenizer it carries, and its text, split as
    train.py split it (a text that is missing or changed is a ValueError), with no floor (None)."""
    carried = metadata.get(checkpoint.TOKENIZER_KEY)
    if carried is None:
        tok = bpe.Tokenizer.load(TOKENIZER_FILE)
        stories = CORPUS_FILE.read_text(encoding="utf-8").splitlines()
        split = {"val_stories": VAL_STORIES, "train": stories[:-VAL_STORIES], "val": stories[-VAL_STORIES:]}
        val_nats, val_tokens = floor.story_floor(split["val"], tok)
        return {"tokenizer": TOKENIZER_FILE.read_text(encoding="utf-8"), "split": split,
                "floor": floor.load_floor(), "val_floor": val_nats / val_tokens,
                "order": dict(zip("ab", ORDER))}
    name = metadata["text"]
    try:
        text = bpe.read_text(name)
        same = checkpoint.sha256_file(name) == metadata["text_sha256"]
    except ValueError as e:
        raise ValueError(f"{where} learned the text of {name!r}, which cannot be read here ({e}); run explore.py in"
                         f" the folder train.py ran in") from None
    if not same:
        raise ValueError(f"{where} learned the text of {name!r}, and that file has changed since (its SHA-256"
                         f" differs); the page needs the text the model learned")
    cut, unit, _, _ = split_text(text, training["val_fraction"])
    return {"tokenizer": carried, "split": {"text": name, "unit": unit, "seq_len": training["seq_len"],
                                            "train": text[:cut], "val": text[cut:]},
            "floor": None, "val_floor": None, "order": order_sentences(bpe.Tokenizer.from_json(carried, where))}


def order_sentences(tok):
    """The word-order panel's two sentences: the trace's, if tok can read them, else two empty boxes to type in.

    >>> order_sentences(bpe.Tokenizer.train("Zoë saw 2 Zoës.", 12))
    {'a': '', 'b': ''}
    """
    return dict(zip("ab", ORDER if all(ch in tok.ids for ch in "".join(ORDER)) else ["", ""]))


def data_files(folder, weights, fields):
    """(files, manifest): what export_data writes into folder, {path: contents}, and the manifest among them."""
    tensors, metadata = checkpoint.decode(weights)
    _, training = checkpoint.check_checkpoint(tensors, metadata)  # (read_weights checked them: this cannot fail)
    page = page_data(metadata, training, WEIGHTS_FILE)
    manifest = {
        "format": DATA_FORMAT,
        "weights": WEIGHTS_FILE,
        **fields,
        "tokenizer_sha256": checkpoint.sha256_text(page["tokenizer"]),
        "corpus_sha256": checkpoint.sha256_file(CORPUS_FILE),
        "floor": page["floor"],  # nats per token over the whole corpus (corpus-entropy.json); None for your text
        "val_floor": page["val_floor"],  # the same over the validation stories, as train.py prints it
        "text": page["split"].get("text"),  # the --data FILE a model of your own text learned; None for the stories
        "order": page["order"],
    }
    files = {folder / WEIGHTS_FILE: weights, folder / "tokenizer.json": page["tokenizer"],
             folder / "split.json": json.dumps(page["split"]) + "\n",
             folder / "manifest.json": json.dumps(manifest, indent=2) + "\n"}
    return files, manifest


def export_data(folder, weights, fields):
    """Write the page's data into folder (made if needed): the weights, tokenizer.json, the split, and manifest.json
    with the floors and the trace's sentences, all or none (write_together). Returns the manifest; a ValueError
    says what could not be written."""
    folder = Path(folder)
    files, manifest = data_files(folder, weights, fields)
    written(files, folder)
    return manifest


def page_files():
    """The page's own files, in explorer/.

    >>> [p.name for p in page_files()][:2]
    ['bpe.js', 'checkpoint.js']
    """
    return sorted(p for p in EXPLORER.iterdir() if p.suffix in PAGE_SUFFIXES)


def export_site(dest, weights, fields):
    """A self-contained copy of the explorer in dest: the page's files and data/, written all or none (a failure
    leaves an old export's files as they were, and removes the folders it made). Returns the manifest; a ValueError
    says what could not be written."""
    dest = Path(dest)
    files, manifest = data_files(dest / "data", weights, fields)
    files.update({dest / path.name: path.read_bytes() for path in page_files()})
    written(files, dest / "data")
    return manifest


def written(files, folder):
    """Write files {path: data} into folder (made if missing, and removed again if the writing fails), all or
    none (atomic.write_together); a ValueError names what could not be made or written, and why."""
    with folder_for(folder / WEIGHTS_FILE):
        try:
            write_together(files)
        except OSError as e:
            raise ValueError(f"cannot write {e.filename or folder} ({e.strerror or e})") from None
