"""What the browser explorer reads: the page's data exported beside it (explore.py is the command line on this and
server.py). The page runs the model in JavaScript, so the export is all it needs: the weights (a checkpoint, or
without one the seed-3 initial weights), tokenizer.json, the split of corpus.txt into the stories train.py trains
and validates on, the entropy floors (floor.py), the order test's two sentences (the trace's, block-trace.json) and
the lessons' words with the scaling lesson's answer: a copy of page-lessons.json, which `python3 -m oneblock.export`
writes (where NumPy and SciPy are installed: it fits the scaling law to experiments/scaling.json) and `--check`
holds current, so an export needs neither. Which models it runs, a model of your own text included, which folders
it writes into and how private its data is: docs/explorer.md, "Which models it runs" and "Opening it".

    >>> manifest = export_data(tempfile.mkdtemp(), *read_weights("no-such.safetensors", explicit=False))
    >>> manifest["trained"], manifest["order"]["a"]
    (False, 'now mia gives the hat to leo.')
"""

import json
import os
import random
import re
import stat
import tempfile  # noqa: F401  (the example above)
from pathlib import Path

from atomic import folder_for, hold, holder, kind_of, private_mode, read_whole, remove_leftovers, write_together
import bpe
from oneblock import checkpoint, floor, machine, settings
from oneblock.data import CORPUS_FILE, ROOT, TOKENIZER_FILE, read_data, split_text

EXPLORER = ROOT / "explorer"  # the page: index.html, style.css and the ES modules
PAGE_SUFFIXES = (".html", ".css", ".js")  # the page's files; everything it reads besides them is in data/
DATA_FORMAT = "one-block explorer data v2"  # manifest.json "format" (explorer/page.js's FORMAT)
EARLIER_FORMATS = ("one-block explorer data v1",)  # earlier exports' formats: a folder of one is replaced too
WEIGHTS_FILE = "weights.safetensors"  # in data/: the checkpoint the page loads
UNTRAINED_SEED = 3  # train.py's default seed: the weights a fresh `python3 train.py` starts from
PAGE_COPIES = 8  # float64 copies of the weights the page holds at once while it trains
PAGE_BYTES = 1 << 30  # what the page keeps to: a browser tab's memory is a few GiB at most
ORDER = tuple(json.loads((ROOT / "block-trace.json").read_text(encoding="utf-8"))["order_test"][key]
              for key in ("a", "b"))  # the order test's two sentences, as the trace records them
SHOWN = ("trained", "step", "val_loss", "source")  # the fields of read_weights that manifest.json shows
LESSONS_FORMAT = "one-block explorer lessons v7"  # lessons.json "format"
PAGE_LESSONS = ROOT / "oneblock" / "page-lessons.json"  # lessons_data() as written, copied into every export
LESSONS_COMMAND = "python3 -m oneblock.export"  # what writes it
DATA_FILES = ("manifest.json", WEIGHTS_FILE, "tokenizer.json", "split.json", "lessons.json")  # in data/, renamed in
# this order
MOST_MANIFEST = 1 << 20  # bytes of an earlier export's manifest.json read, at most, to recognise it
PAGE_CHECKPOINT = ("FORMAT", "VERSIONS", "ONE_BLOCK_VERSION", "GROWN_VERSIONS", "GROWN_VERSION", "METADATA_KEYS",
                   "KNOWN_KEYS", "TEXT_KEYS", "HASH_KEYS", "NUMBER_KEYS", "METADATA_HASH_KEY", "MODEL_SETTINGS",
                   "MOMENT_PREFIXES", "STEP", "RNG", "RNG_STATE_LEN", "SPLITS", "DTYPE_NAMES", "BACKENDS")
PAGE_TRAINING = {**{name: getattr(settings.Settings, name) for name in ("lr", "beta1", "beta2", "eps", "clip")},
                 "warmup": settings.WARMUP}  # train.py's defaults that the page's runs keep: manifest.json's "training"
LEFTOVER = r"\.lock|\.[0-9]+\.[a-z0-9_]{8}\.tmp"  # beside a file: hold's lock, a killed write_together's file

# ----------------------------------------------------------------------------------------------------------------
# The export


def untrained_checkpoint():
    """The bytes of a checkpoint of the seed-3 initial weights (float64, zero moments, step 0): what a fresh
    train.py run starts from, for when there is no trained checkpoint yet."""
    vocab = len(bpe.Tokenizer.load(TOKENIZER_FILE).vocab)
    config = settings.model_config(settings.Settings(), vocab)  # the model of train.py's defaults
    shapes = config.param_shapes()
    params = {name: ("F64", shapes[name], checkpoint.flat(t)) for name, t in config.init_params(UNTRAINED_SEED).items()}
    zeros = {name: ("F64", shape, [0.0] * len(params[name][2])) for name, shape in shapes.items()}
    return checkpoint.checkpoint_bytes(params, (zeros, zeros), 0, random.Random(UNTRAINED_SEED), config,
                                       {"seed": UNTRAINED_SEED, "steps": 0}, checkpoint.sha256_file(TOKENIZER_FILE))


def read_weights(ckpt_path, explicit, data=None):
    """(checkpoint bytes, fields) for the page: fields is what manifest.json shows (SHOWN), the text a model of your
    own text learned (text: text_file's path and text) and the permissions of what was read (modes). A checkpoint
    missing (when asked for by name), bad, too large for the page (page_fits) or whose text is not found is a
    ValueError."""
    path = Path(ckpt_path)
    if explicit:
        checkpoint.named_checkpoint(path, ", or leave out --ckpt to explore the untrained model")
    if not path.exists():
        source = f"The seed-{UNTRAINED_SEED} initial weights"
        if data is not None:
            raise ValueError(f"--data {data}: without a checkpoint (none at {path}) the page shows {source.lower()},"
                             f" a model of the stories; --data goes with a model of your own text (--ckpt)")
        return untrained_checkpoint(), {"trained": False, "step": 0, "val_loss": None, "text": None,
                                           "modes": [], "source": f"{source} (no checkpoint {path.name} yet;"
                                                                  f" train one with python3 train.py)"}
    raw = checkpoint.read_bytes(path)  # read once: the bytes exported are the bytes checked
    modes = [os.stat(path).st_mode]
    ckpt = checkpoint.load_bytes(raw, path)
    checkpoint.tokenizer_of(ckpt, TOKENIZER_FILE, path)  # the one it carries, or the shipped one unchanged
    page_fits(ckpt["config"], path)
    text = text_file(ckpt["metadata"], path, data)
    if text is not None:
        modes.append(os.stat(text[0]).st_mode)
    val = ckpt["metadata"].get("val_loss")  # (checked: a finite number, when there)
    return raw, {"trained": ckpt["step"] > 0, "step": ckpt["step"], "val_loss": float(val) if val is not None else None,
                 "source": f"Checkpoint {path.name}", "text": text, "modes": modes}


def text_file(metadata, where, data=None):
    """(path, text) of the text that the checkpoint at where learned (None for the stories), from one read: data,
    the file the user names, or else the first file of the recorded name's last part, beside the checkpoint or in
    the current folder, whose bytes have the SHA-256 the checkpoint recorded. A ValueError says what is wrong.

    >>> text_file({"tokenizer_sha256": "0" * 64}, "ckpt.safetensors") is None  # a model of the stories
    True
    """
    if checkpoint.TOKENIZER_KEY not in metadata:
        if data is not None:
            raise ValueError(f"--data {data}: {where} is a model of the stories, not of a text of your own; leave"
                             f" out --data")
        return None
    recorded = metadata["text"]
    if data is not None:
        try:
            text, sha256 = read_data(data)
        except ValueError as e:
            raise ValueError(f"--data {e}") from None  # (the message starts with the file's path)
        if sha256 != metadata["text_sha256"]:
            raise ValueError(f"--data {data} is not the text {where} learned: its SHA-256 differs from the one the"
                             f" checkpoint recorded; expected the file train.py --data read, unchanged")
        return Path(data), text
    name = re.split(r"[/\\]", recorded)[-1]  # (a name recorded on Windows has backslashes)
    places = [] if name in ("", ".", "..") or "\0" in name else [Path(where).parent / name]
    if places and os.path.abspath(name) != os.path.abspath(places[0]):
        places.append(Path(name))  # in the current folder, when that is not the checkpoint's
    problems = []
    for place in places:
        if not place.exists():
            continue
        try:
            text, sha256 = read_data(place)
            if sha256 == metadata["text_sha256"]:
                return place, text
            problems.append(f"and that file has changed since ({place}: its SHA-256 differs from the one recorded)")
        except ValueError as e:
            problems.append(f"which cannot be read here ({e})")
    if len(places) == 2 and not problems:
        problems.append(f"which is neither beside it ({places[0]}) nor in the current folder ({places[1]})")
    elif not problems:
        problems.append(f"which is not beside it ({places[0]})" if places else "which names no file")
    raise ValueError(f"{where} learned the text of {recorded!r}, {problems[0]}; the page needs the text the model"
                     f" learned: name it with --data FILE")


def page_fits(config, where):
    """Raise a ValueError, naming the model and why, unless the page can hold a model of config (a ModelConfig): it
    keeps about PAGE_COPIES float64 copies of the weights (the weights, Adam's two moments, the gradients, and the
    copies that pass between the page and its training worker), which must fit in PAGE_BYTES.

    >>> from oneblock.config import ModelConfig
    >>> page_fits(ModelConfig(vocab=96, d=16, hidden=64, max_len=64), "x.safetensors")
    >>> page_fits(ModelConfig(vocab=96, d=4096, hidden=16384, max_len=64, blocks=2, heads=4), "x.safetensors")
    Traceback (most recent call last):
    ...
    ValueError: x.safetensors is a model of 2 blocks x 4 heads, width 4096: 403,783,776 parameters, which the ...
    """
    count = config.parameter_count()
    need = PAGE_COPIES * 8 * count
    if need > PAGE_BYTES:
        raise ValueError(f"{where} is a model of {config.blocks_and_heads()}, width {config.d}:"
                         f" {count:,} parameters, which the explorer does not run: the page holds about {PAGE_COPIES}"
                         f" float64 copies of the weights ({machine.in_bytes(need)} here) and keeps to"
                         f" {machine.in_bytes(PAGE_BYTES)} (at most {PAGE_BYTES // (8 * PAGE_COPIES):,} parameters);"
                         f" sample.py runs it")


def page_data(metadata, training, where, text=None):
    """What the page reads besides the weights, for a checkpoint's metadata and training settings: {tokenizer (the
    tokenizer.json text), split, floor, val_floor, order}: for a model of your own text, the tokenizer it carries and
    its text (text_file's (path, text), the bytes checked) split as train.py split it, with no floor."""
    carried = metadata.get(checkpoint.TOKENIZER_KEY)
    if carried is None:
        tok = bpe.Tokenizer.load(TOKENIZER_FILE)
        stories = CORPUS_FILE.read_text(encoding="utf-8").splitlines()
        n = settings.VAL_STORIES  # train.py's split: the last 300 stories validate
        split = {"val_stories": n, "train": stories[:-n], "val": stories[-n:]}
        val_nats, val_tokens = floor.story_floor(split["val"], tok)
        return {"tokenizer": TOKENIZER_FILE.read_text(encoding="utf-8"), "split": split,
                "floor": floor.load_floor(), "val_floor": val_nats / val_tokens,
                "order": dict(zip("ab", ORDER))}
    path, text = text
    cut, unit, _, _ = split_text(text, training["val_fraction"])
    return {"tokenizer": carried, "split": {"text": path.name, "unit": unit, "seq_len": training["seq_len"],
                                            "train": text[:cut], "val": text[cut:]},
            "floor": None, "val_floor": None, "order": order_sentences(bpe.Tokenizer.from_json(carried, where))}


def order_sentences(tok):
    """The word-order panel's two sentences: the trace's, if tok can read them, else two empty boxes to type in.

    >>> order_sentences(bpe.Tokenizer.train("Zoë saw 2 Zoës.", 12))
    {'a': '', 'b': ''}
    """
    return dict(zip("ab", ORDER if all(ch in tok.ids for ch in "".join(ORDER)) else ["", ""]))


def data_files(folder, weights, fields):
    """(files, manifest, modes): what export_data writes into folder, {path: contents} with manifest.json first
    (the mark of an export, once any file of it is in place), the manifest, and the files' permissions {path:
    mode}, as private as the checkpoint and your text (atomic.private_mode)."""
    metadata = checkpoint.decode(weights)[1]  # (read_weights checked it)
    page = page_data(metadata, json.loads(metadata["training"]), WEIGHTS_FILE, fields.get("text"))
    manifest = {
        "format": DATA_FORMAT,
        "weights": WEIGHTS_FILE,
        **{key: fields[key] for key in SHOWN},
        "tokenizer_sha256": checkpoint.sha256_text(page["tokenizer"]),
        "corpus_sha256": checkpoint.sha256_file(CORPUS_FILE),
        "floor": page["floor"],  # nats per token over the whole corpus (corpus-entropy.json); None for your text
        "val_floor": page["val_floor"],  # the same over the validation stories, as train.py prints it
        "text": page["split"].get("text"),  # the file name of the text a model of your own text learned, or None
        "order": page["order"],
        "most_parameters": PAGE_BYTES // (8 * PAGE_COPIES),  # page_fits' bound, which the page holds a file to
        "checkpoint": {name.lower(): getattr(checkpoint, name) for name in PAGE_CHECKPOINT},
        "training": PAGE_TRAINING,
    }
    contents = {"manifest.json": json.dumps(manifest, indent=2) + "\n", WEIGHTS_FILE: page_weights(weights, metadata),
                "tokenizer.json": page["tokenizer"], "split.json": json.dumps(page["split"]) + "\n",
                "lessons.json": page_lessons()}
    files = {folder / name: contents[name] for name in DATA_FILES}
    return files, manifest, dict.fromkeys(files, private_mode(fields.get("modes", [])))


def page_lessons():
    """The bytes of page-lessons.json, which every export copies, or a ValueError that says how to write it.

    >>> json.loads(page_lessons())["format"]
    'one-block explorer lessons v7'
    """
    try:
        return PAGE_LESSONS.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {PAGE_LESSONS.name} ({e.strerror}); run {LESSONS_COMMAND} to write it") from None


def lessons_data():
    """page-lessons.json: every lesson's words as the page gets them (oneblock/lessons.py's page_words), in the order
    of python3 -m experiments.lessons, the reasons a lesson cannot answer (lessons.SKIPS) with the page's names for
    their slots (lessons.PAGE_NAMES), and the scaling lesson's answer (experiments/lessons_scaling.py's, of its
    record, read as the experiments read theirs). The page computes every other answer live. A ValueError says what is
    missing to make it: NumPy or SciPy, or the record (missing or damaged).

    >>> data = lessons_data()
    >>> [lesson["key"] for lesson in data["lessons"]][-2:], data["scaling"]["value"] < 0.4912
    (['second-block', 'scaling'], True)
    """
    from oneblock import lessons

    more, left_out = lessons.numpy_lessons()  # (the lessons after the ten, where NumPy and SciPy are installed)
    if left_out:
        raise ValueError(f"{PAGE_LESSONS.name} holds every lesson, but {left_out}")
    every = lessons.LESSONS + more
    scaling = every[-1].answer(None)  # (lab None: the scaling lesson reads no model)
    return {"format": LESSONS_FORMAT, "lessons": [lessons.page_words(lesson) for lesson in every],
            "skips": lessons.SKIPS, "names": lessons.PAGE_NAMES,
            "scaling": {key: scaling[key] for key in ("value", "shown", "bounds")}}


def lessons_text(data):
    """page-lessons.json's text for lessons_data()'s data: keys in order, one line a lesson."""
    inner = ",\n".join("  " + json.dumps(words) for words in data["lessons"])
    return (f'{{"format": {json.dumps(data["format"])},\n"lessons": [\n{inner}\n],\n'
            f'"skips": {json.dumps(data["skips"], indent=1)},\n"names": {json.dumps(data["names"], indent=1)},\n'
            f'"scaling": {json.dumps(data["scaling"], indent=1)}}}\n')


def stale(committed, fresh):
    """None if the committed page-lessons.json (its parsed data) is fresh's, else the first difference in a line.
    Every word and line must be the same; the scaling fit's value may differ past the six digits the record keeps
    (its bounds), which another machine's BLAS kernels can move.

    >>> data = {"format": "f", "lessons": [], "skips": {}, "names": {},
    ...         "scaling": {"value": 0.4302098, "shown": [], "bounds": ""}}
    >>> stale(data, {**data, "scaling": {**data["scaling"], "value": 0.43020980000001}}) is None
    True
    >>> stale(data, {**data, "format": "g"})
    'its format differs'
    """
    for key in ("format", "lessons", "skips", "names"):
        if committed.get(key) != fresh[key]:
            return f"its {key} differs"
    got, want = committed.get("scaling"), fresh["scaling"]
    if not isinstance(got, dict) or {k: got.get(k) for k in ("shown", "bounds")} != {k: want[k] for k in
                                                                                          ("shown", "bounds")}:
        return "its scaling answer's lines differ"
    value = got.get("value")
    if not isinstance(value, float) or abs(value - want["value"]) > 1e-6 * abs(want["value"]):
        return f"its scaling value {value!r} is not {want['value']!r} to six digits"
    return None


def page_weights(weights, metadata):
    """The checkpoint's bytes as the page gets them: as they are, unless its metadata names its text with folders
    (a path of this machine, as train.py --data was given it), which the copy names by its file name alone, its
    metadata's hash made anew for a grown model's file. The tensors are the same bytes either way."""
    name = re.split(r"[/\\]", metadata.get("text", ""))[-1]
    if metadata.get("text", name) == name:
        return weights
    renamed = {**metadata, "text": name}  # (encode makes its data hash anew)
    if checkpoint.METADATA_HASH_KEY in renamed:
        renamed[checkpoint.METADATA_HASH_KEY] = checkpoint.metadata_digest(renamed)
    return checkpoint.encode(checkpoint.decode(weights)[0], renamed)


def export_data(folder, weights, fields):
    """Write the page's data into folder (written: all or none); return the manifest."""
    folder = Path(folder)
    files, manifest, modes = data_files(folder, weights, fields)
    written(files, folder, folder / "manifest.json", modes)
    return manifest


def page_files():
    """The page's own files, in explorer/.

    >>> [p.name for p in page_files()][:2]
    ['bpe.js', 'checkpoint.js']
    """
    return sorted(p for p in EXPLORER.iterdir() if p.suffix in PAGE_SUFFIXES)


def export_site(dest, weights, fields):
    """A self-contained copy of the explorer in dest, the page's files and data/ (written: all or none, while no
    other export writes there); return the manifest."""
    dest = Path(dest)
    files, manifest, modes = data_files(dest / "data", weights, fields)
    files.update({dest / path.name: path.read_bytes() for path in page_files()})
    written(files, dest, dest / "data" / "manifest.json", modes, lock=True)
    return manifest


# ----------------------------------------------------------------------------------------------------------------
# Writing an export: into a folder of its own, never through a link


def written(files, place, mark, modes, lock=False):
    """Write files {path: data}, each inside the folder place, all or none (atomic.write_together), with the
    permissions modes {path: mode} (0o644 for the rest), less the umask. place must be missing, empty or hold an
    earlier export (recognised by mark, its manifest.json: foreign), and nothing on the way to a file may be a link
    or other than a folder, nor the file other than a regular file (through_link), checked once before anything is
    made and again just before the writing. lock: hold mark while writing, so that two exports into place never mix
    (the serve path's explorer/data is every explore.py's of the checkout, and not held). What a killed export left
    there is cleared first. A ValueError names what is in the way, or what could not be made or written, and why."""
    through_link(place, files)
    with hold(mark, holder("explore.py exporting", [])) if lock else folder_for(mark):
        through_link(place, files)
        strangers = foreign(place, mark, [path.relative_to(place).as_posix() for path in files])
        if strangers:
            shown = ", ".join(strangers[:3]) + (", ..." if len(strangers) > 3 else "")
            raise ValueError(f"{place} holds files that are not an explorer export ({shown}); expected a folder that"
                             f" is missing, empty, or written by an earlier export (its {mark.relative_to(place)}"
                             f" says so): choose another folder, or empty this one")
        for path in files:
            remove_leftovers(path)
        try:
            write_together(files, modes)
        except OSError as e:
            raise ValueError(f"cannot write {e.filename or place} ({e.strerror or e})") from None


def through_link(place, files):
    """Raise a ValueError naming the first of place, the folders on the way to each of files inside it, and the
    files themselves, that is a symbolic link (which would write elsewhere, or replace what it leads to), or that is
    there but not a folder (on the way) or not a regular file (at the end). What is missing is made by the export."""
    for path in files:
        chain = [path, *path.parents[:len(path.relative_to(place).parts)]]  # the file, its folders up to place
        for here in reversed(chain):
            try:
                mode = os.lstat(here).st_mode
            except (FileNotFoundError, NotADirectoryError):
                break
            if stat.S_ISLNK(mode):
                raise ValueError(f"{here} is a symbolic link; an export writes only into folders and files of its"
                                 f" own, never through a link: remove it, or choose another folder")
            want, kind = (stat.S_ISREG, "a file") if here == path else (stat.S_ISDIR, "a folder")
            if not want(mode):
                raise ValueError(f"{here} is {'a file' if stat.S_ISREG(mode) else kind_of(mode)}, where the export"
                                 f" writes {kind}: choose another folder")


def foreign(place, mark, names):
    """What in the folder place is not an export's, as paths relative to it (none when place holds an earlier
    export: mark, its manifest.json, a regular file whose format is DATA_FORMAT or one of EARLIER_FORMATS). names:
    the paths the export writes, relative to place; what writing them leaves (LEFTOVER: a lock, a killed writer's
    temporary file) is an export's too, as is a folder on the way to them that holds nothing else.

    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "index.html.999999999.abcd1234.tmp").write_bytes(b"half a page")
    ...     _ = (Path(d) / "notes.md").write_text("mine")
    ...     foreign(Path(d), Path(d) / "data" / "manifest.json", ["index.html", "data/manifest.json"])
    ...     (Path(d) / "data").mkdir()
    ...     _ = (Path(d) / "data" / "manifest.json").write_text('{"format": "one-block explorer data v1"}')
    ...     foreign(Path(d), Path(d) / "data" / "manifest.json", ["index.html", "data/manifest.json"])
    ['notes.md']
    []
    """
    if not os.path.isdir(place):
        return []
    try:
        found = json.loads(read_whole(mark, "an explorer export's manifest.json", MOST_MANIFEST))["format"]
        if found in (DATA_FORMAT, *EARLIER_FORMATS):
            return []
    except (ValueError, TypeError, KeyError, RecursionError):  # missing, unreadable, not JSON, or not an export's
        pass

    def strangers(folder, prefix):
        found = []
        for entry in sorted(os.listdir(folder)):
            name = prefix + entry
            if any(re.fullmatch(re.escape(ours) + f"(?:{LEFTOVER})", name) for ours in names):
                continue
            inner = folder / entry
            if any(ours.startswith(name + "/") for ours in names) and inner.is_dir() and not inner.is_symlink():
                found += strangers(inner, name + "/")
            else:
                found.append(name)
        return found

    return strangers(Path(place), "")


# ----------------------------------------------------------------------------------------------------------------
# command line: write page-lessons.json, or check it

if __name__ == "__main__":
    import argparse
    import sys

    from atomic import write_atomic

    parser = argparse.ArgumentParser(description=f"Write {PAGE_LESSONS.name}: the lessons' words and the scaling"
                                                 " lesson's answer, which every export copies.", allow_abbrev=False)
    parser.add_argument("--check", action="store_true", help=f"exit 1 if {PAGE_LESSONS.name} differs from a fresh"
                                                             " one")
    args = parser.parse_args()
    try:
        fresh = lessons_data()
    except ValueError as e:
        sys.exit(f"error: {e}")
    if args.check:
        try:
            reason = stale(json.loads(page_lessons()), fresh)
        except ValueError as e:
            reason = str(e)
        if reason:
            print(f"NOT OK: {PAGE_LESSONS.name} is stale: {reason}; run {LESSONS_COMMAND} to rewrite it")
            sys.exit(1)
        print(f"OK: {PAGE_LESSONS.name} matches the lessons and experiments/scaling.json")
    else:
        write_atomic(PAGE_LESSONS, lessons_text(fresh))
        print(f"wrote {PAGE_LESSONS.name}: {len(fresh['lessons'])} lessons and the scaling answer")
