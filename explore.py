"""Export a checkpoint and the data for the browser explorer, and serve it on this machine.

    python3 explore.py                   # export into explorer/data/, serve explorer/ on 127.0.0.1, open the browser
    python3 explore.py --no-open --port 8000
    python3 explore.py --ckpt other.safetensors
    python3 explore.py --export site/    # write a self-contained folder for any static host, and stop

Standard library only. The page (explorer/index.html and its ES modules) runs the model in JavaScript, so the
export is all it needs: the weights (the checkpoint at --ckpt, by default train.py's out/ckpt.safetensors; without
one, the seed-3 initial weights, and the page says plainly that the model is untrained), tokenizer.json, the split
of corpus.txt into the stories train.py trains and validates on, the entropy floors (floor.py) and the trace's two
sentences. Files go to explorer/data/ (or DIR/data/), each written atomically.

A model of your own text (train.py --data FILE) brings its own tokenizer in its checkpoint; the split is FILE's, read
again from where train.py read it (run explore.py in the same folder) and checked against the hash the checkpoint
recorded, and there is no floor.

The server binds 127.0.0.1 only, on a free port unless --port, serves .js as JavaScript on every OS, tells the
browser not to cache (a new export shows on reload), and stops cleanly on Ctrl-C. A missing or bad checkpoint, a
port that is taken or a bad option exits with status 2 before anything is written. An export that cannot be written
(a full disk, a folder that cannot be made or written) exits with status 2 and one line, and writes nothing: its
files are written all together or not at all, so an old export stays as it was.
"""

import argparse
import functools
import http.server
import json
import os
import random
import re
import shutil
import socket
import sys
import tempfile
import time
import urllib.parse
import webbrowser
from contextlib import contextmanager, suppress
from http import HTTPStatus
from pathlib import Path

import bpe
import checkpoint
from oneblock import floor
import model
from oneblock import sizes
import trace_block
from oneblock import settings
from oneblock.data import CORPUS_FILE, TOKENIZER_FILE, split_text

# ----------------------------------------------------------------------------------------------------------------
# Settings

HERE = Path(__file__).resolve().parent
EXPLORER = HERE / "explorer"  # the page: index.html, style.css and the ES modules
PAGE_SUFFIXES = (".html", ".css", ".js")  # the page's files; everything it reads besides them is in data/
DATA_FORMAT = "one-block explorer data v1"  # manifest.json "format"
WEIGHTS_FILE = "weights.safetensors"  # in data/: the checkpoint the page loads
UNTRAINED_SEED = 3  # train.py's default seed: the weights a fresh `python3 train.py` starts from
VAL_STORIES = settings.VAL_STORIES  # train.py's split: the last 300 stories validate
DEFAULT_CKPT = "out/ckpt.safetensors"  # where train.py writes by default
# served types that some systems' MIME registries get wrong (a module script served as text/plain does not run)
MIME_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css", ".html": "text/html",
              ".json": "application/json", ".safetensors": "application/octet-stream"}


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
    """(checkpoint bytes, manifest fields) for the page. A checkpoint that is missing (when asked for by name), bad,
    of a position scheme the page does not run (it mirrors model.py: learned and none) or of a grown model (it
    mirrors model.py's one block and one head) is a ValueError with checkpoint.py's message or one that says so."""
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
    positions = checkpoint.positions_of(ckpt["config"])
    if positions not in ("learned", "none"):
        raise ValueError(f"{path} has positions {positions!r}, which the explorer does not run: it mirrors model.py,"
                         f" which has learned and none")
    grown = checkpoint.sizes_of(ckpt["config"])
    if grown != (1, 1):
        raise ValueError(f"{path} is a model of {sizes.describe(*grown)}, which the explorer does not run: it mirrors"
                         f" model.py, which has one block and one head (sample.py and compare.py run grown models)")
    page_data(ckpt["metadata"], ckpt["training"], path)  # a model of your own text: its text is still there
    val = ckpt["metadata"].get("val_loss")  # (checked: a finite number, when there)
    return raw, {"trained": ckpt["step"] > 0, "step": ckpt["step"],
                 "val_loss": float(val) if val is not None else None, "source": f"Checkpoint {path}"}


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
                "floor": floor.load_floor(HERE), "val_floor": val_nats / val_tokens,
                "order": {"a": trace_block.ORDER_A, "b": trace_block.ORDER_B}}
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
    sentences = [trace_block.ORDER_A, trace_block.ORDER_B]
    return dict(zip("ab", sentences if all(ch in tok.ids for ch in "".join(sentences)) else ["", ""]))


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
    with folders_made(folder):
        write_together(files)
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
    with folders_made(dest / "data"):
        write_together(files)
    return manifest


# ----------------------------------------------------------------------------------------------------------------
# Writing an export: every file or none


@contextmanager
def folders_made(folder):
    """Make folder and the folders missing above it for the with-block, and remove the ones it made again (when
    empty) if the block fails; a folder that cannot be made, or a file in the way, is a ValueError naming it."""
    folder = Path(folder)
    missing = [f for f in (folder, *folder.parents) if not os.path.lexists(f)]  # deepest first
    try:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"cannot make the folder {folder} ({e.strerror or e})") from None
        yield
    except BaseException:
        for made in missing:
            with suppress(OSError):
                made.rmdir()
        raise


def write_together(files):
    """Write files {path: str (as UTF-8) or bytes} all or none: each to a temporary file beside it first, flushed
    to disk as atomic.write_atomic does, and only once every one is written, each renamed over its path. A failure
    to write (a full disk, a file too large, a folder that cannot be written) removes the temporary files, leaves
    every path as it was, and is a ValueError naming the file and why. (Only a rename that fails, after all the
    data is written, could leave the files before it new.)

    >>> with tempfile.TemporaryDirectory() as d:
    ...     write_together({Path(d) / "a.txt": "one\\n", Path(d) / "b.bin": b"two"})
    ...     sorted(p.name for p in Path(d).iterdir())
    ['a.txt', 'b.bin']
    """
    staged = []
    try:
        for path, data in files.items():
            staged.append((staged_copy(Path(path), data), Path(path)))
        for tmp, path in staged:
            try:
                os.replace(tmp, path)
            except OSError as e:
                raise ValueError(f"cannot write {path} ({e.strerror or e})") from None
    except BaseException:
        for tmp, _ in staged:
            with suppress(OSError):
                os.unlink(tmp)
        raise


def staged_copy(path, data):
    """The name of a temporary file beside path that holds data, flushed to disk and readable by all; a ValueError
    naming path when it cannot be written (nothing is left behind)."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    except OSError as e:
        raise ValueError(f"cannot write {path} ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # an ordinary readable file, as open() would make
    except BaseException as e:
        with suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise ValueError(f"cannot write {path} ({e.strerror or e})") from None
        raise
    return tmp


# ----------------------------------------------------------------------------------------------------------------
# The server

IDLE_TIMEOUT = 15  # seconds a connection may send nothing (or stop mid-request) before the server hangs up
LINGER_SECONDS = 2  # the most a closing connection waits for the client to stop sending (see Server)
LOG_CHARS = 120  # the most of a request that a log line shows


def served_file(directory, target):
    """The real path of the regular file in directory that a request target (the path of a request line) names, or
    the status that answers it instead: 301 for a folder named without its slash whose index.html would be served
    (add the slash), 400 for a path that no file of the folder can have (not from the root, not UTF-8, or with a NUL
    or other control character, a backslash, an encoded slash or a . or .. segment; browsers send none of these), 404
    for anything missing, not a regular file (a folder without index.html, a pipe) or outside the folder once links
    are resolved. A folder named with its slash stands for its index.html; no folder is listed.

    >>> served_file(".", "/%00"), served_file(".", "/..%2fetc%2fpasswd"), served_file(".", "/no-such-file")
    (400, 400, 404)
    """
    path = target.split("?", 1)[0].split("#", 1)[0]
    if not path.startswith("/"):
        return 400
    names = []
    for part in path.split("/")[1:]:
        try:
            name = urllib.parse.unquote(part, errors="strict")
        except UnicodeDecodeError:
            return 400
        if name in (".", "..") or re.search(r"[\x00-\x1f\x7f-\x9f/\\]", name):
            return 400
        names.append(name)
    root = os.path.realpath(directory)

    def inside(name):  # the real path of name if that is a regular file in the folder, else None
        real = os.path.realpath(name)
        return real if Path(real).is_relative_to(root) and os.path.isfile(real) else None

    found = os.path.realpath(os.path.join(root, *names))
    if Path(found).is_relative_to(root) and os.path.isdir(found):
        index = inside(os.path.join(found, "index.html"))
        if index is None:
            return 404
        return index if path.endswith("/") else 301
    return inside(found) or 404


def printable(text, limit=LOG_CHARS):
    r"""text for a log line: control characters, backslashes and non-ASCII escaped (a request cannot write to the
    terminal it is logged on), and cut to limit characters, with "..." where it was cut.

    >>> print(printable("GET /\x1b[2J\x00"), printable("GET /" + "a" * 200, 12))
    GET /\x1b[2J\x00 GET /aaaaaaa...
    """
    shown = text.encode("unicode_escape").decode("ascii")
    return shown if len(shown) <= limit else shown[:limit] + "..."


class Handler(http.server.SimpleHTTPRequestHandler):
    """Regular files of the folder with the right types on every OS, never cached, and only failed requests logged,
    each in one short line; a connection idle for timeout seconds is closed, quietly (browsers open some ahead that
    they never use). Every request that cannot be served gets its status: 400 for a bad request line or a bad path
    (and for a TLS hello: this server speaks plain HTTP), 404 for what is not a file of the folder, 414 for a request
    line over 64 KiB, 431 for a header line over 64 KiB, 501 for a method other than GET and HEAD, 505 for
    HTTP/2 and later."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES}
    default_request_version = "HTTP/1.0"  # a reply to a request line without a version still has a status line

    def __init__(self, *args, timeout=IDLE_TIMEOUT, **kwargs):
        self.timeout = timeout  # read by setup(), which the base class's __init__ runs
        super().__init__(*args, **kwargs)

    def handle_one_request(self):
        self.command = self.path = None  # until the request line is read: the log line shows what was
        self.raw_requestline = b""
        self.request_version = self.default_request_version
        try:
            first = self.rfile.peek(1)  # what has arrived, once anything has: an idle client times out here
        except TimeoutError:
            self.close_connection = True
            return
        if first and not (0x21 <= first[0] <= 0x7e or first[:1] in b"\r\n"):  # a request starts with its method
            self.raw_requestline = first[:LOG_CHARS]  # a TLS hello starts \x16\x03: don't wait for a line's end
            self.send_error(HTTPStatus.BAD_REQUEST, "Bad request: not an HTTP request")
            return
        super().handle_one_request()

    def send_head(self):
        found = served_file(self.directory, self.path)
        if found == HTTPStatus.MOVED_PERMANENTLY:
            parts = urllib.parse.urlsplit(self.path)
            self.send_response(found)
            self.send_header("Location", urllib.parse.urlunsplit(parts._replace(path=parts.path + "/")))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if isinstance(found, int):
            self.send_error(found, "Bad request path" if found == HTTPStatus.BAD_REQUEST else "File not found")
            return None
        try:
            f = open(found, "rb")
        except OSError:  # removed or unreadable since it was checked
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", self.guess_type(found))
            self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
            self.end_headers()
        except BaseException:
            f.close()
            raise
        return f

    def list_directory(self, path):
        self.send_error(HTTPStatus.NOT_FOUND, "File not found")  # never a listing, should anything ask for one
        return None

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format, *args):
        pass  # quiet: the page shows its own problems

    def log_request(self, code="-", size="-"):
        code = getattr(code, "value", code)
        if str(code)[:1] in ("4", "5"):
            what = (f"{self.command} {self.path}" if self.command and self.path
                    else str(self.raw_requestline, "iso-8859-1").rstrip("\r\n"))  # a request line that failed
            print(f"{printable(what)}: HTTP {code}", file=sys.stderr, flush=True)


class Server(http.server.ThreadingHTTPServer):
    """One thread per request; a client that hangs up in the middle of a reply is not an error worth a traceback. A
    connection ends in a lingering close, so that a reply sent before the request was read whole (a 414 for a long
    URL) reaches the client instead of being lost to the reset that closing unread input sends."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipeError, ConnectionResetError, ...
            super().handle_error(request, client_address)

    def shutdown_request(self, request):
        try:
            request.shutdown(socket.SHUT_WR)  # the reply is whole: the client reads it to its end
            deadline = time.monotonic() + LINGER_SECONDS
            while (left := deadline - time.monotonic()) > 0:  # and what it still sends is read and dropped
                request.settimeout(left)
                if not request.recv(65536):
                    break
        except OSError:  # hung up, reset or still sending at the deadline: closed all the same
            pass
        self.close_request(request)


def find_chromium():
    """The system's Chromium or Chrome (what the tests and bench_explorer.py drive), or None."""
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


def make_server(directory, port=0, timeout=IDLE_TIMEOUT):
    """A server for directory on 127.0.0.1 (port 0: a free one) that closes connections idle for timeout seconds;
    it is bound, not yet serving."""
    return Server(("127.0.0.1", port), functools.partial(Handler, directory=str(directory), timeout=timeout))


# ----------------------------------------------------------------------------------------------------------------
# Command line


def build_parser():
    p = argparse.ArgumentParser(description="Export a checkpoint for the browser explorer and serve it on 127.0.0.1.")
    p.add_argument("--ckpt", default=None, metavar="PATH",
                   help="the checkpoint to explore (default: out/ckpt.safetensors, as train.py writes it; without"
                        " one, the untrained seed-3 weights)")
    p.add_argument("--port", type=int, default=0, metavar="N",
                   help="the port to serve on (default: a free one)")
    p.add_argument("--no-open", action="store_true", help="do not open a browser; just print the URL")
    p.add_argument("--export", default=None, metavar="DIR",
                   help="write a self-contained folder (the page and its data) for any static host, and stop")
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port {args.port} is not a port; expected 0 (a free one) to 65535")
    if args.export is not None and Path(args.export).exists() and not Path(args.export).is_dir():
        parser.error(f"--export {args.export} is a file; expected a folder (it is made if missing)")
    try:
        weights, fields = read_weights(args.ckpt or DEFAULT_CKPT, explicit=args.ckpt is not None)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not fields["trained"]:
        print(f"note: {fields['source']}; the page says that the model is untrained", file=sys.stderr)

    if args.export is not None:
        try:
            export_site(args.export, weights, fields)
        except ValueError as e:  # a folder that cannot be made or written, a full disk: nothing was written
            print(f"error: --export {args.export}: {e}", file=sys.stderr)
            return 2
        print(f"wrote the explorer to {args.export}: serve that folder over HTTP (for example python3 -m"
              f" http.server -d {args.export} -b 127.0.0.1) and open index.html")
        return 0

    try:
        server = make_server(EXPLORER, args.port)
    except OSError as e:
        print(f"error: cannot serve on 127.0.0.1 port {args.port} ({e.strerror}); pass another --port, or leave it"
              f" out for a free one", file=sys.stderr)
        return 2
    with server:
        export_data(EXPLORER / "data", weights, fields)
        url = f"http://127.0.0.1:{server.server_port}/index.html"
        print(f"serving the explorer at {url} (Ctrl-C stops)", flush=True)
        if not args.no_open:
            webbrowser.open(url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
