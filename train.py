"""Train the one-block model (or a grown one: --blocks, --heads) on the story corpus, with checkpoints you can resume
and a loss you can read against the best any model could do.

    python3 train.py                    # NumPy, float32, the default settings (its last line says how long it took)
    python3 train.py --resume           # continue out/ckpt.safetensors after a stop, a crash or a kill
    python3 train.py --backend python --steps 20 --batch 4   # the same loop on model.py: slow, standard library only
    python3 train.py --positions rope   # rotary positions instead of learned ones (also: none, sinusoidal)
    python3 train.py --blocks 2 --heads 4 --out out/grown.safetensors   # two blocks of four heads each
    python3 train.py --data notes.txt --out out/notes.safetensors   # your own text, with a tokenizer trained on it
    python3 train.py --help             # every setting, with its default

This file is the command line: it parses the settings (oneblock/settings.py checks them), owns --out for the length
of the run (atomic.own), judges what is there, reads the data once (oneblock/data.py), and trains with
oneblock/training.py's train, saving checkpoints (oneblock/checkpoint.py) as it goes: docs/training.md, "Checkpoints,
resuming, and the lock on `--out`", and docs/own-text.md for what --data adds.
"""

import argparse
import dataclasses
import math
import os
import sys
import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import atomic
from atomic import holder, interruptible, interruption, not_its_kind, own, remove_leftovers, same_file
import bpe
from oneblock import checkpoint, data as data_files, machine, settings, training
from oneblock.config import SCHEMES
from oneblock.settings import Settings, training_settings

COMMAND_ONLY = ("out", "resume", "overwrite", "no_positions", "typed")  # the command's own, not settings
BEST = ".best"  # before --out's suffix: the checkpoint of the lowest validation loss (best_beside)
ENDINGS = (".lock", ".tokenizer.json", BEST + ".lock")  # what a run writes beside --out's name: its names' lengths

# ----------------------------------------------------------------------------------------------------------------
# The command line


class Typed(argparse.Action):
    """An option that stores its value and notes in the namespace's `typed` that it was given: for a flag whose
    default may also be typed (--positions learned), so that what was typed is told apart from what was left out."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.typed = (*namespace.typed, self.dest)


def defaults():
    """Every setting's default, as Settings declares it (None: the one that follows from the others, which
    settings.checked fills in): the parser's defaults, written nowhere else.

    >>> defaults()["steps"], defaults()["seq_len"], defaults()["positions"]
    (12000, None, 'learned')
    """
    return {field.name: field.default for field in dataclasses.fields(Settings)}


def build_parser():
    """The command line: every setting with its default (Settings') and what it does."""
    p = argparse.ArgumentParser(
        allow_abbrev=False,  # a typo such as --step is an error, never a run with a setting the user did not mean
        description="Train the one-block transformer (or a grown one, with --blocks and --heads) on corpus.txt"
                    " or your own text, write checkpoints, and report the validation loss next to the corpus's"
                    " entropy floor (floor.py).")
    default = defaults()

    def setting(flag, **options):  # a setting's flag: its default is Settings', so none is written here
        p.add_argument(flag, default=default[flag.removeprefix("--").replace("-", "_")], **options)

    setting("--backend", choices=settings.BACKENDS,
            help="numpy: numpy_fast.py, the tuned batched path. numpy-plain: numpy_model.py, the plain mirror of"
                 " model.py, the same maths written as formulas, slower. python: model.py, one sequence at a time,"
                 " standard library only, hundreds of times slower: for reading along with a few steps (one block"
                 " and one head only). torch: torch_model.py on --device, in one process or data-parallel under"
                 " torchrun (torch_train.py) (default: %(default)s)")
    setting("--device", choices=settings.DEVICES,
            help="where --backend torch computes (default: auto, CUDA when there is one, else the CPU)")
    setting("--threads", type=int, metavar="N",
            help="BLAS threads of the numpy backends, and of numpy's loss over a large vocabulary (default:"
                 " %(default)s). At this model size one thread is"
                 " as fast as two on a quiet machine and several times faster on a busy one")
    setting("--dtype", choices=settings.DTYPES,
            help="floating-point type of the weights and of Adam's moments (default: float32 for numpy;"
                 " the python backend computes in float64 only)")
    setting("--steps", type=int, metavar="N", help="optimiser steps in the whole run (default: %(default)s)")
    setting("--stop-at", type=int, metavar="STEP",
            help="stop after this step, with the learning-rate schedule of the whole run, and save: a later"
                 " --resume (with the same settings) finishes the run as if it had never stopped")
    setting("--batch", type=int, metavar="B", help="windows per step (default: %(default)s)")
    setting("--seq-len", type=int, metavar="T",
            help=f"tokens per window, at most the model's positions (default: --max-len, {default['max_len']})")
    setting("--lr", type=float, help="peak learning rate, reached at the end of the warm-up (default: %(default)s)")
    setting("--min-lr", type=float,
            help="learning rate at the last step, where the cosine decay ends (default: %(default)s)")
    setting("--warmup", type=int, metavar="N",
            help=f"steps of linear warm-up from lr/N to lr (default: {settings.WARMUP}, or the whole run if it is"
                 f" shorter)")
    setting("--beta1", type=float,
            help="Adam: decay rate of the running mean of the gradient (default: %(default)s)")
    setting("--beta2", type=float, help="Adam: decay rate of the running mean of its square (default: %(default)s)")
    setting("--eps", type=float, help="Adam: added to the root of the second moment (default: %(default)s)")
    setting("--clip", type=float,
            help="largest global gradient norm; longer gradients are scaled down to it; inf switches"
                 " clipping off (default: %(default)s)")
    setting("--seed", type=int,
            help="seeds the initial weights (as model.init_params) and the batch sampler (default: %(default)s)")
    setting("--val-stories", type=int, metavar="N",
            help=f"the last N stories of corpus.txt are the validation set (default: {settings.VAL_STORIES})")
    setting("--data", metavar="FILE",
            help="learn this UTF-8 text file instead of the stories of corpus.txt: split by lines, or by"
                 " documents if blank lines separate it; no floor is known for it, so none is printed")
    setting("--tokenizer", metavar="PATH",
            help="with --data: this tokenizer.json (its characters must cover FILE) instead of one trained on FILE")
    setting("--vocab-size", type=int, metavar="N",
            help=f"with --data: the tokens of the tokenizer trained on FILE, at least its number of different"
                 f" characters (default: {bpe.TEXT_VOCAB_SIZE})")
    setting("--val-fraction", type=float, metavar="F",
            help=f"with --data: the share of FILE's lines or documents, its last ones, that validate"
                 f" (default: {settings.VAL_FRACTION})")
    setting("--width", type=int, metavar="D",
            help=f"the model's width d; its MLP has {settings.HIDDEN_PER_WIDTH} x D hidden units (default:"
                 f" %(default)s)")
    setting("--max-len", type=int, metavar="L",
            help="the most positions the model reads, and the rows of learned positions (default: %(default)s)")
    setting("--positions", choices=SCHEMES, action=Typed,
            help="how the model knows where a token is: learned (a trained row per position), none (a bag of"
                 " tokens), sinusoidal (a fixed sine/cosine table added to the embeddings) or rope (q and k rotated"
                 " by position inside attention); the python backend has learned and none only (default:"
                 " %(default)s)")
    setting("--blocks", type=int, metavar="N",
            help="transformer blocks, each with its own layer norms, attention and MLP (default: %(default)s,"
                 " model.py's model)")
    setting("--heads", type=int, metavar="N",
            help=f"attention heads in each block, each of width D / N, so N must divide the width D (--width,"
                 f" {default['width']} by default) and leave an even head width with --positions rope (default:"
                 f" %(default)s, model.py's model)")
    p.add_argument("--no-positions", action="store_true",
                   help="the same as --positions none: switch the learned position embeddings off (the model then"
                        " sees a bag of tokens)")
    setting("--eval-every", type=int, metavar="N",
            help="steps between validation losses; also at the end (default: %(default)s)")
    setting("--ckpt-every", type=int, metavar="N",
            help="steps between checkpoints; also at the end (default: %(default)s)")
    p.add_argument("--out", default="out/ckpt.safetensors", metavar="PATH",  # (sample.py reads it by default)
                   help="checkpoint file, replaced atomically at each save; its folder is created. Beside it, with"
                        " .best before its suffix (out/ckpt.best.safetensors), the checkpoint of the lowest"
                        " validation loss so far (default: %(default)s)")
    p.add_argument("--resume", action="store_true",
                   help="continue the checkpoint at --out; pass the same settings as the run that wrote it")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh even if --out (or its best file) already holds a checkpoint")
    setting("--quiet", action="store_true", help="no progress bar (the loss lines and the summary remain)")
    p.set_defaults(typed=())  # the flags of Typed that were given
    return p


def settings_from(args):
    """The Settings of parsed command-line arguments (all but the command's own: --out, --resume, --overwrite),
    with --no-positions read as --positions none and torchrun's rank and world size from its environment; a
    contradiction between flags is a ValueError.

    >>> settings_from(build_parser().parse_args(["--no-positions", "--steps", "5"])).positions
    'none'
    >>> settings_from(build_parser().parse_args(["--positions", "none", "--no-positions"])).positions
    'none'
    """
    if args.no_positions and "positions" in args.typed and args.positions != "none":
        raise ValueError(f"--no-positions and --positions {args.positions} contradict each other; pick one")
    values = {name: value for name, value in vars(args).items() if name not in COMMAND_ONLY}
    values["positions"] = "none" if args.no_positions else args.positions
    default = defaults()  # (torchrun's, when it does not say: one process)
    values["rank"] = torchrun_number("RANK", default["rank"])
    values["world"] = torchrun_number("WORLD_SIZE", default["world"])
    return Settings(**values)


def torchrun_number(name, default):
    """The whole number in the environment variable name (torchrun's RANK or WORLD_SIZE), or default when it is not
    set; a ValueError names a value that is not a whole number.

    >>> torchrun_number("NO_SUCH_VARIABLE_HERE", 1)
    1
    """
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        return int(text.strip(), 10)
    except ValueError:
        raise ValueError(f"the environment variable {name} is {text!r}; expected a whole number (torchrun sets it)"
                         ) from None


# ----------------------------------------------------------------------------------------------------------------
# What --out holds, and what the run reads


def on_disk(args, out):
    """The reader train.py judges the file at out (the checkpoint --out names, links followed) with, while the run
    owns it (atomic.own), so that no other run can change it between this look and the run's first save: the
    checkpoint there, loaded and checked, for a run that resumes it, else None. A ValueError says what stops it: the
    rules are docs/training.md's ("Checkpoints, resuming, and the lock on `--out`"), and with --data the copy of the
    tokenizer beside it follows them too (docs/own-text.md, "The model")."""
    copy = tokenizer_beside(out)
    its_input = args.tokenizer is not None and copy.exists() and same_file(args.tokenizer, copy)  # rewritten as it is
    if args.data is not None and copy.exists() and not its_input:  # (judged as bpe.py --data judges its --out)
        judge = bpe.tokenizer_there(f"{copy}, where this run keeps the copy of its tokenizer,",
                                    args.resume or args.overwrite)
        judge(copy)
    if not out.exists():
        if args.resume:
            raise ValueError(f"cannot resume: there is no checkpoint at {args.out}; run without --resume to start one")
        return None
    try:
        ckpt = checkpoint.load_checkpoint(out)  # read once: the run resumes what was checked here
    except ValueError as e:
        if args.resume:
            raise ValueError(f"cannot resume: {e}") from None
        raise ValueError(not_its_kind(f"--out {args.out}", "a checkpoint", e)) from None
    if not args.resume and not args.overwrite:
        raise ValueError(f"--out {args.out} already holds a checkpoint (step {ckpt['step']}); pass --resume to"
                         f" continue it, --overwrite to replace it, or another --out to keep it")
    return ckpt if args.resume else None


def tokenizer_beside(out):
    """Where a run on --data keeps a copy of its tokenizer: beside the checkpoint, its whole name and a suffix (as its
    lock file is named), so that no two checkpoints share one and no input of another name is mistaken for it.

    >>> tokenizer_beside(Path("out/notes.safetensors")).as_posix()
    'out/notes.safetensors.tokenizer.json'
    """
    return out.with_name(out.name + ".tokenizer.json")


def best_beside(out):
    """Where a run keeps the checkpoint of its lowest validation loss: beside the last one, --out's name with BEST
    before its suffix (after the whole name when it has none), so that it reads as a checkpoint of its own.

    >>> best_beside(Path("out/ckpt.safetensors")).as_posix(), best_beside(Path("runs/model")).as_posix()
    ('out/ckpt.best.safetensors', 'runs/model.best')
    """
    return out.with_name(out.stem + BEST + out.suffix)


def best_there(args, resumed, best):
    """The reader train.py judges the file at best (where the run keeps its best checkpoint) with, while the run owns
    it, after on_disk: the (step, val_loss) that a resumed run keeps as its best so far, or None. What is there must
    be a checkpoint, or it is never replaced; without --resume it is replaced only with --overwrite; with --resume it
    must be the best of the run resumed (training.kept_best). A ValueError says what stops it."""
    if not os.path.lexists(best):
        return None
    try:
        ckpt = checkpoint.load_checkpoint(best)
    except ValueError as e:
        where = f"{best}, where this run keeps its best checkpoint,"
        raise ValueError(not_its_kind(where, "a checkpoint", e)) from None
    if resumed is not None:
        try:
            return training.kept_best(ckpt, resumed, best)
        except ValueError as e:
            raise ValueError(f"cannot resume: {e}") from None
    if not args.overwrite:
        raise ValueError(f"{best} already holds a checkpoint (step {ckpt['step']}, the best of an earlier run); pass"
                         f" --overwrite to replace it, or another --out to keep it")
    return None


def read_inputs(s, resumed, out):
    """What the run with settings s reads, once each: its --data FILE (if any) and data.prepare's data. resumed: the
    checkpoint at out that the run resumes (loaded), or None; it must have learned that text (the stories, or the
    bytes of that FILE by their SHA-256), and its tokenizer is then the run's (unless --tokenizer names one, which
    must be the same). A ValueError says what is wrong."""
    text = data_files.read_data(s.data) if s.data is not None else None
    carried = None
    if resumed is not None:
        metadata = resumed["metadata"]
        there = metadata.get("text")  # the --data FILE it learned, as it was given
        if there is None and s.data is not None:
            raise ValueError(f"{out} learned the stories of corpus.txt; resume it without --data")
        if there is not None and s.data is None:
            raise ValueError(f"{out} learned --data {there}; resume it with the same --data")
        if there is not None and metadata.get("text_sha256") != text[1]:
            raise ValueError(f"{out} learned another text than {s.data} ({there} as it was then); it cannot be"
                             f" resumed on this one")
        carried = checkpoint.carried_tokenizer(metadata, out) if s.tokenizer is None else None
    return data_files.prepare(s, carried, text)


# ----------------------------------------------------------------------------------------------------------------
# The run


def quietly(status):
    """The exit status of a rank other than 0 that stops on a problem rank 0 also found: after a pause, because
    torchrun stops every rank as soon as one ends, and rank 0 is the one that says what is wrong."""
    time.sleep(3)
    return status


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        s = settings.checked(settings_from(args))
        if args.resume and args.overwrite:
            raise ValueError("--resume and --overwrite contradict each other; pick one")
    except ValueError as e:
        rank, world = (os.environ.get(name, "").strip() for name in ("RANK", "WORLD_SIZE"))
        if all(n.isascii() and n.isdigit() for n in (rank, world)) and 0 < int(rank) < int(world):
            return quietly(2)  # under torchrun every rank checks, and rank 0 alone says what is wrong
        parser.error(str(e))
    if s.backend != "python":  # (train sets the run's BLAS threads when it runs: no import order can change them)
        machine.need_backend("train.py", s.backend, ("numpy", "threadpoolctl") if s.backend != "torch" else ("numpy",))
    out = Path(args.out)
    note = holder("train.py", argv)
    try:  # (SIGTERM and SIGHUP stop it as Ctrl-C does: the locks and any temporary file are removed on the way out)
        with interruptible():
            return owned_run(s, args, out, note)
    except KeyboardInterrupt as e:  # (before training began: the loop says the step it stopped at)
        name, status = interruption(e)
        if s.rank == 0:
            print(f"interrupted ({name}) before training began: this run wrote nothing", file=sys.stderr)
        return status


def owned_run(s, args, out, note):
    """main's work once the settings are checked: own --out and its best checkpoint (rank 0; atomic.own), judge what
    is on disk and the data, then run; the exit status. No input of the run (--data, --tokenizer) may be one of the
    files it writes: the checkpoint, the best one (best_beside), their locks, or (for --data) the tokenizer's copy."""
    with ExitStack() as owned:
        if s.backend == "torch":  # under torchrun: join the other ranks; rank 0 alone owns --out
            from oneblock import torch_train

            store = torch_train.start(s)  # (None in one process)
            owned.callback(torch_train.finish)
        data, problem, reads = None, None, [("--data", args.data), ("--tokenizer", args.tokenizer)]
        try:
            if args.data is not None and same_file(args.data, tokenizer_beside(out)):
                raise ValueError(f"--data {args.data} is where this run writes the copy of its tokenizer; choose"
                                 f" another --out")
            if s.rank == 0:  # owned first, so that what is on disk is judged by the run that will write there
                out, resumed = own(owned, args.out, "--out", "a checkpoint file", "ckpt.safetensors",
                                   partial(on_disk, args), note, reads, ENDINGS, "the checkpoint")
                best, best_so_far = own(owned, str(best_beside(out)), "--out", "a checkpoint file",
                                        "ckpt.safetensors", partial(best_there, args, resumed), note, reads,
                                        words="its best checkpoint")
            else:  # (rank 0 holds the files; every rank reads them)
                resumed = on_disk(args, out)
                best, best_so_far = best_beside(out), best_there(args, resumed, best_beside(out))
        except ValueError as e:
            problem = str(e)
        if problem is None:
            try:  # everything about the data is checked before anything is written
                data = read_inputs(s, resumed, out)
                # what it writes is as private as what it is made from, each as it is now
                mode = atomic.private_mode(paths=(s.data, s.tokenizer, out if resumed is not None else None))
            except ValueError as e:
                problem = f"{'cannot resume: ' if args.resume else ''}{e}"
        if s.backend == "torch":
            problem = torch_train.share(problem)  # rank 0's word: the lock on --out is rank 0's alone
        if problem is not None:
            if s.rank == 0:
                print(f"error: {problem}", file=sys.stderr)
            return 2 if s.rank == 0 else quietly(2)
        status = run(s, resumed, out, data, best, best_so_far, mode)
        if s.backend == "torch" and status == 0:
            torch_train.together(store)
        return status if s.rank == 0 or status == 0 else quietly(status)


def run(s, resumed, out, data, best, best_so_far=None, mode=0o644):
    """The run of main, while it owns out and best: clean up, train, save, summarise; the exit status. resumed: the
    loaded checkpoint the run continues, or None; best: where the checkpoint of the lowest validation loss goes;
    best_so_far: the (step, val_loss) of the one a resumed run found there, or None; mode: the permissions of every
    file written (atomic.private_mode). Under torchrun every rank runs it; rank 0 alone prints, writes and cleans up."""
    resume = resumed is not None
    recorded = training_settings(s)
    say = print if s.rank == 0 else (lambda *args, **kwargs: None)
    s = dataclasses.replace(s, quiet=s.quiet or s.rank != 0)

    # a save that a kill interrupted leaves its temporary file beside the copy of the tokenizer (never in its place);
    # only the ones whose writer is provably dead are removed (atomic.own did so for the checkpoints)
    if s.rank == 0:
        remove_leftovers(tokenizer_beside(out), out)

    config = settings.model_config(s, data.vocab)  # the model's sizes and position scheme, as its checkpoint records

    # ---- the state to start from: the checkpoint's, or (filled in by train) the seed's initial weights
    state = None
    if resume:
        try:
            state = training.resumed_state(s, resumed, out, recorded, config, data)
        except ValueError as e:
            say(f"error: cannot resume: {e}", file=sys.stderr)
            return 2
    first = state["step"] if resume else 0
    saved = first if resume else None  # the step the file at out holds, for the messages of a stopped run
    copied = s.data is None  # whether the copy of the tokenizer is beside the checkpoint (written at the first save)

    def write(path, state, val_loss):  # a checkpoint of the state, with the validation loss at its step if known
        extra = dict(data.metadata)
        if val_loss is not None:
            extra["val_loss"] = repr(val_loss)
        tensors = [training.tensors_of(state[part], s.dtype) for part in ("params", "m", "v")]
        checkpoint.save_checkpoint(path, tensors[0], tensors[1:], state["step"], state["rng"], config, recorded,
                                   data.tokenizer_sha, extra, mode=mode)

    def save(state, val_loss):
        nonlocal saved, copied
        write(out, state, val_loss)
        saved = state["step"]
        if not copied:  # the checkpoint carries its tokenizer; the copy beside it is for you
            data.tok.save(tokenizer_beside(out), mode)
            copied = True

    if data.val_floor is not None:
        say(f"floor {data.corpus_floor:.4f} nats/token (corpus-entropy.json); {data.val_floor:.4f} on the"
            f" {len(data.val_ids)} validation stories; uniform guessing {math.log(data.vocab):.4f}")
    else:
        say("\n".join(data.about))
        say(f"no floor: nobody knows the entropy of this text. For scale, uniform guessing scores"
            f" {math.log(data.vocab):.4f} nats/token and the token frequencies alone {data.unigram:.4f}")
    if s.backend == "torch":
        from oneblock import torch_train

        say(f"computing with {torch_train.describe(s)}")
    elif s.backend != "python":
        say(f"computing with {machine.blas(s.threads)}: the same run elsewhere gives other last bits"
            f" (experiments/spread.py)")
    where = f", {config.blocks_and_heads()}" if config.grown else ""
    say(f"{s.backend} {s.dtype}{where}, {len(data.stream):,} training tokens, {s.steps} steps of {s.batch} x"
        f" {s.seq_len} tokens, lr {s.lr:g} -> {s.min_lr:g}"
        + (f", positions {s.positions}" if s.positions != "learned" else "")
        + (f"; resuming {out} at step {first}" if resume else ""))

    # ---- the loop
    started = time.perf_counter()
    newline = "\n" if sys.stderr.isatty() and not s.quiet else ""  # ends a progress bar drawn in place

    def stopped(why, hint):
        kept = f"{out} keeps step {saved}" if saved is not None else f"this run wrote no checkpoint to {out}"
        say(f"{newline}{why}; {kept}. {hint}", file=sys.stderr)

    # ---- the lowest validation loss so far (a resumed run's, from its best file) and its checkpoint beside out
    recorded_val = resumed["metadata"].get("val_loss") if resume else None  # the loss the resumed checkpoint saw
    watch = training.Watch(best_so_far, None if recorded_val is None else float(recorded_val))
    unigram = getattr(data, "unigram", None)  # guessing by token frequency: known for a text of your own

    def warn(watch):
        say(training.rise_warning(watch, best, unigram), file=sys.stderr, flush=True)  # (after a loss line)

    state = {} if state is None else state  # train fills a fresh one in, so that a stop can say its step
    try:
        result = training.train(s, data, state, save=save if s.rank == 0 else None,
                                report=lambda line: say(line, flush=True), watch=watch,
                                save_best=partial(write, best) if s.rank == 0 else None, warn=warn)
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM or SIGHUP (main's interruptible)
        name, status = interruption(e)
        stopped(f"interrupted ({name}) at step {state.get('step', 0)}", "Continue with the same command plus --resume")
        return status
    except OSError as e:  # a save that could not be written: a full disk, a folder made read-only meanwhile
        stopped(f"error: cannot write {e.filename or out} at step {state.get('step', 0)} ({e.strerror or e})",
                "HINT: make room or fix the folder, then continue with the same command plus --resume")
        return 2
    if result.failure is not None:
        stopped(*result.failure)
        return 1

    # ---- summary
    val_loss, state = result.val_loss, result.state
    elapsed = time.perf_counter() - started
    done, tokens = state["step"], (state["step"] - first) * s.batch * s.seq_len
    speed = f", {training.rate(tokens / result.train_seconds)} tokens/s" if result.train_seconds else ""
    against = (training.versus_floor(val_loss, data.val_floor) if data.val_floor is not None
               else f", {val_loss * data.val_tokens / data.val_chars:.4f} per character | no floor known")
    stopped_early = f" of {s.steps} (--stop-at; --resume finishes the run)" if done < s.steps else ""
    lowest = f" | best val {result.best[1]:.4f} at step {result.best[0]}: {best}" if result.best is not None else ""
    say(f"done: {done} steps{stopped_early} ({done - first} in this run, {tokens:,} tokens, {elapsed:.1f} s{speed})"
        f" | val {val_loss:.4f} nats/token{against} | {out}{lowest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
