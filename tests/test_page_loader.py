"""The explorer page's "Load weights" decides as checkpoint.py does, in a real headless Chromium (Playwright): every
damaged file of checkpoint_edits.mutations goes through the page's own reading of a file (read_weights_file, what the
button calls) and through Python's (python_reading: what explore.py holds a checkpoint to before it exports it).
(Python's messages for these files: tests/test_checkpoint.py; every tool's one-line refusal:
tests/test_fuzz_checkpoints.py.)"""

import json
import time

import pytest

from oneblock import checkpoint, export
from checkpoint_edits import (HOSTILE_HEADERS, edited, meta_json_edit, mutations, pitfalls, tensor_value,
                              version_2)
from run_helpers import run, served as serving

SITES = {"one-block": "stories", "grown": "stories", "own-text": "own-text"}  # base -> the page whose tokenizer it has
# Bounds that tell a refusal by arithmetic from the freezes before (7 to 140 s, or a crashed tab) and a read off the
# main thread from one on it (a 13.5 s freeze), with room for a busy shared machine: the figures themselves, well
# under a second and tens of ms, are what the tests print (pytest -s)
REFUSE_S = 5.0  # the longest the page may take to refuse a hostile file, from choosing it to the message
STALL_MS = 1000  # the longest the page's main thread may go without running a timer while a large file is read


# ----------------------------------------------------------------------------------------------------------------
# The page served with each tokenizer, beside the checkpoints (conftest's base_checkpoints)


@pytest.fixture(scope="module")
def served(base_checkpoints):
    """The page twice, under one server on 127.0.0.1: stories/ (the untrained export, the stories' tokenizer) and
    own-text/ (the export of the own-text checkpoint, its tokenizer), and files/ for the files the tests give it.
    Yields (the served folder, its URL)."""
    folder, _ = base_checkpoints
    root = folder / "served"
    export.export_site(root / "stories", *export.read_weights(folder / "no-such.safetensors", explicit=False))
    export.export_site(root / "own-text", *export.read_weights(folder / "own-text.safetensors", explicit=True))
    (root / "files").mkdir(exist_ok=True)  # (set up again when worksteal interleaves modules on a worker)
    with serving(root) as url:
        yield root, url


@pytest.fixture(scope="module")
def page_url(served):
    """The page conftest's reader shares among the tests that read files without loading them: stories/."""
    return f"{served[1]}/stories/index.html"


def python_reading(raw, where, site_dir):
    """None if the page's file raw is one that explore.py would export for the page served from site_dir (with its
    tokenizer), else checkpoint.py's message: the rules the page must follow."""
    manifest = json.loads((site_dir / "data" / "manifest.json").read_text(encoding="utf-8"))
    try:
        ckpt = checkpoint.load_bytes(raw, where)
        if ckpt["metadata"]["tokenizer_sha256"] != manifest["tokenizer_sha256"]:  # (the page's tokenizer)
            raise ValueError(checkpoint.tokenizer_mismatch(ckpt["metadata"]["tokenizer_sha256"],
                                                           manifest["tokenizer_sha256"]))
        checkpoint.tokenizer_of(ckpt, export.TOKENIZER_FILE, where)
        export.page_fits(ckpt["config"], where)
    except ValueError as e:
        return str(e)
    return None


# each file's reading: {said: the page's message} when refused, else {model: what the page shows of it (its config,
# step and val_loss, and the SHA-256 of its weights in order)}
READ_ALL = """async (names) => {
  const { flat_tensors, sha256 } = explorer.modules.checkpoint;
  const out = [];
  for (const name of names) {
    const file = new File([await (await fetch(`../files/${name}`)).blob()], name);
    try {
      const { config, step, val_loss, params } = await explorer.read_weights_file(file);
      const weights = Object.values(flat_tensors(params)).map((t) => new Uint8Array(t.values.buffer));
      const bytes = new Uint8Array(await new Blob(weights).arrayBuffer());
      out.push({model: JSON.stringify({config, step, val_loss, weights: sha256(bytes)})});
    } catch (e) {
      out.push({said: e.message});
    }
  }
  return out;
}"""


# ----------------------------------------------------------------------------------------------------------------
# One set of decisions: the page refuses what Python refuses, in one line of its own

# The cases where the page and Python decide differently, by JSON grammar alone: JSON.parse keeps the last of two
# equal keys, which Python refuses. Each of these files repeats a key with the same value, so that the page shows
# what the file without the repeat shows (checked below against the undamaged file).
OLD_GROWN = "grown: as version 2 wrote it"  # the page reads it as the same model as the file of version 3
GRAMMAR = ("config with a key twice", "training with a key twice", "header with __metadata__ twice",
           "header twice the key W1")


def edits(bases):
    """Edits that Python reads (the page must too) and ones it refuses for what they mean, not for their bytes:
    (label, bytes). Read: the grown model as version 2 wrote it (its training repeating the model), a clip of
    Infinity (JSON that JSON.parse refuses), a step and a run of 2^53 + 1 (past what a Number holds). Refused: a model
    of 95 tokens for the page's 96 (every tensor cut to fit, the hashes made right: only the vocabulary check refuses
    it), a config that says rope while the training settings say learned positions, and a model without its W1."""
    grown, past = bases["grown"], 2 ** 53 + 1
    out = [(OLD_GROWN, edited(grown, version_2())()),
           ("grown: training clip = Infinity", edited(grown, meta_json_edit(
               "training", lambda t: t.update(clip=float("inf"))))()),
           ("grown: adam_step and training steps 2^53 + 1", edited(grown, meta_json_edit(
               "training", lambda t: t.update(steps=past)), tensor_value(checkpoint.STEP, [past]))())]

    def vocab_95(tensors, metadata):
        for name, (dtype, shape, values) in list(tensors.items()):
            kind = name.rpartition(".")[2]
            if kind in ("tok_emb", "W_out", "b_out"):
                rows = [values[i:i + shape[-1]] for i in range(0, len(values), shape[-1])]
                cut = rows[:-1] if kind == "tok_emb" else [row[:-1] for row in rows]
                tensors[name] = (dtype, (shape[0] - 1, shape[1]) if kind == "tok_emb" else
                                 (*shape[:-1], shape[-1] - 1), [x for row in cut for x in row])
        metadata["config"] = json.dumps({**json.loads(metadata["config"]), "vocab": 95})

    for label, edit in (("a vocabulary of 95 tokens, its tensors cut to fit", vocab_95),
                        ("config rope, training learned", lambda t, m: m.update(config=json.dumps(
                            {**json.loads(m["config"]), "positions": "rope", "use_positions": False}))),
                        ("no W1", lambda t, m: t.pop("W1"))):
        tensors, metadata = checkpoint.decode(bases["one-block"])
        metadata.pop(checkpoint.DATA_HASH_KEY)
        edit(tensors, metadata)
        out.append((f"one-block: {label}", checkpoint.encode(tensors, metadata)))
    return out


def one_line(said, name):
    """Whether the page's message said for the file name is one line of its own that starts with the name and names
    the command that gives Python's full reason."""
    return "\n" not in said and said.startswith(f"{name}: ") and f"python3 explore.py --ckpt {name} " in said


def test_the_page_refuses_what_python_refuses_in_one_line(pages, base_checkpoints, served):
    """Every damaged file of the fuzz corpus and the edits above: the page loads a file exactly when Python does, but
    for the GRAMMAR cases, which it loads as the undamaged file; each refusal is one line with the hint."""
    _, bases = base_checkpoints
    root, url = served
    more = edits(bases)
    refused = [bool(python_reading(raw, "edit.safetensors", root / "stories")) for _, raw in more]
    assert refused == [False] * 3 + [True] * 3  # (as each edit means)
    cases = mutations(bases) + more + [(f"{name}: undamaged", raw) for name, raw in bases.items()]
    by_site = {site: [] for site in SITES.values()}
    for k, (label, raw) in enumerate(cases):
        name = f"case-{k}.safetensors"
        (root / "files" / name).write_bytes(raw)
        site = SITES[label.split(":")[0]]
        by_site[site].append((name, label, python_reading(raw, name, root / site)))
    disagree, grammar, not_one_line, read, refused = [], {}, [], {}, 0
    for site, files in by_site.items():
        started = time.monotonic()
        got = pages(f"{url}/{site}/index.html").evaluate(READ_ALL, [name for name, _, _ in files])
        seconds = time.monotonic() - started
        print(f"\n{site}: {len(files)} files through the page's read_weights_file in {seconds:.1f} s")
        for (name, label, want), reading in zip(files, got):
            refused += want is not None
            said, read[label] = reading.get("said"), reading.get("model")
            if said is not None and not one_line(said, name):
                not_one_line.append(f"{label}: {said[:300]!r}")
            if (said is None) == (want is None):
                continue
            if want is not None and label.endswith(GRAMMAR):
                grammar[label] = read[label]
            else:
                disagree.append(f"{label}: the page {'loads it' if said is None else 'says ' + said[:300]!r}; Python"
                                f" {'loads it' if want is None else 'says ' + want[:300]!r}")
    print(f"{len(cases)} files: {refused} refused by Python, {len(cases) - refused} read; the page disagrees on"
          f" {len(disagree)}, and reads {len(grammar)} that differ from the undamaged file by a repeated key only")
    assert disagree == [], f"{len(disagree)} of {len(cases)} files:\n" + "\n".join(disagree[:20])
    assert not_one_line == [], "\n".join(not_one_line[:10])
    for label, model in grammar.items():
        assert model == read[f"{label.split(':')[0]}: undamaged"], label
    assert all(read[f"{name}: undamaged"] is not None for name in bases)  # (what the page reads: a model)
    assert read[OLD_GROWN] == read["grown: undamaged"]


# ----------------------------------------------------------------------------------------------------------------
# Hostile files: refused at once, by arithmetic, and a file too large by its size


WATCH = """() => {
  window.watch = {ticks: [], said: null};
  const tick = () => { window.watch.ticks.push(performance.now()); window.watch.timer = setTimeout(tick, 5); };
  tick();
  const input = document.querySelector('#weights-file');
  input.addEventListener('change', () => { window.watch.chosen = performance.now(); });
  new MutationObserver(() => {
    const text = document.querySelector('#load-message').textContent;
    if (text.includes('The model is unchanged') || text.startsWith('Loaded')) {
      window.watch.said ??= performance.now();
    }
  }).observe(document.querySelector('#load-message'), {childList: true, characterData: true, subtree: true});
}"""

WATCHED = """() => {
  clearTimeout(window.watch.timer);
  const {ticks, chosen, said} = window.watch;
  const gaps = ticks.slice(1).map((t, k) => t - ticks[k]).filter((_, k) => ticks[k + 1] > chosen);
  return {seconds: (said - chosen) / 1000, stall_ms: Math.max(0, ...gaps)};
}"""


def chosen(page, path):
    """Choose the file at path with Load weights; (its message, seconds from the choice to the message, the longest
    the page went without running a timer meanwhile, in ms)."""
    page.evaluate(WATCH)
    page.set_input_files("#weights-file", str(path))
    page.wait_for_function("window.watch.said !== null", timeout=30_000)
    watched = page.evaluate(WATCHED)
    return page.inner_text("#load-message"), watched["seconds"], watched["stall_ms"]


def test_hostile_headers_are_refused_at_once(pages, base_checkpoints, served, tmp_path):
    """The defect report's files (7 to 140 s before, or a crashed tab) are the HOSTILE_HEADERS of the grown model,
    with the blocks in the training settings too, so that only the arithmetic can refuse them."""
    _, bases = base_checkpoints
    _, url = served
    page = pages(f"{url}/stories/index.html")
    status = page.inner_text("#model-status")
    worst = {}
    cases = [make() for label, make in pitfalls("grown", bases["grown"]) if label.endswith(HOSTILE_HEADERS)]
    assert len(cases) == 5
    for k, raw in enumerate(cases):
        name = f"hostile-{k}.safetensors"
        path = tmp_path / name
        path.write_bytes(raw)
        message, seconds, stall = chosen(page, path)
        assert one_line(message, name), message[:600]
        assert message.endswith(f"; python3 explore.py --ckpt {name} gives the full reason. The model is"
                                " unchanged."), message[:600]
        worst[name] = round(seconds, 3)
        assert seconds < REFUSE_S, (name, seconds)
        assert page.inner_text("#model-status") == status
    print(f"\nseconds from choosing each file to its refusal: {worst}")
    page.fill("#text", "zoe has a ball.")
    page.wait_for_function("document.querySelectorAll('#chips .chip').length > 1")


def test_a_file_larger_than_any_the_page_runs_is_refused_by_its_size_before_it_is_read(reader, tmp_path):
    """A 2 GiB file (sparse: no disk is spent on it) is refused by its size, named, before a byte is read: not as a
    file the browser could not read ("permission problems")."""
    page = reader
    path = tmp_path / "huge.safetensors"
    with open(path, "wb") as f:
        f.truncate(2 << 30)
    message, seconds, _ = chosen(page, path)
    most = page.evaluate("explorer.modules.checkpoint.most_file_bytes(explorer.state.manifest)")
    assert message.startswith("huge.safetensors is 2.0 GiB, more than the 484.0 MiB of the largest checkpoint the"
                              " explorer runs"), message
    assert "The model is unchanged" in message and "permission" not in message, message
    assert most == 8 + checkpoint.MAX_HEADER + 3 * 8 * export.PAGE_BYTES // (8 * export.PAGE_COPIES) + 8 * 626
    assert seconds < REFUSE_S, seconds
    print(f"\n2 GiB file refused in {max(seconds, 0.0):.3f} s: {message}")


# ----------------------------------------------------------------------------------------------------------------
# A large valid file: read off the main thread


@pytest.fixture(scope="module")
def large_ckpt(tmp_path_factory):
    """A real checkpoint of about 115 MB: train.py at width 512, 3 blocks x 8 heads, float32, one step."""
    folder = tmp_path_factory.mktemp("page-loader-large")
    proc = run("train.py", "--width", "512", "--blocks", "3", "--heads", "8", "--steps", "1", "--batch", "1",
               "--seq-len", "8", "--val-stories", "5", "--eval-every", "1", "--out", "large.safetensors", "--quiet",
               cwd=folder, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return folder / "large.safetensors"


READ_ONE = """async (name) => {
  const file = new File([await (await fetch(`../files/${name}`)).blob()], name);
  const ticks = [performance.now()];
  let timer;
  const tick = () => { ticks.push(performance.now()); timer = setTimeout(tick, 5); };
  tick();
  const started = performance.now();
  const ckpt = await explorer.read_weights_file(file);
  const seconds = (performance.now() - started) / 1000;
  clearTimeout(timer);
  const gaps = ticks.slice(1).map((t, k) => t - ticks[k]);
  return {seconds, stall_ms: Math.max(...gaps), ticks: ticks.length, step: ckpt.step, blocks: ckpt.config.blocks,
          heads: ckpt.config.heads, params: Object.values(ckpt.params).reduce((n, t) => n + (t.data ?? t).length, 0)};
}"""


def test_a_large_valid_file_is_read_while_the_page_keeps_running(reader, served, large_ckpt):
    """The 115 MB checkpoint is read and checked in the page's worker: read_weights_file gives its model while a
    timer on the page's main thread keeps running, never held up for more than STALL_MS."""
    (served[0] / "files" / "large.safetensors").write_bytes(large_ckpt.read_bytes())
    got = reader.evaluate(READ_ONE, "large.safetensors")
    params = sum(len(values) for _, _, values in checkpoint.load_checkpoint(large_ckpt)["params"].values())
    print(f"\n{large_ckpt.stat().st_size / 1e6:.0f} MB read in {got['seconds']:.2f} s; the longest the main thread"
          f" was held up: {got['stall_ms']:.0f} ms ({got['ticks']} timer ticks)")
    assert (got["step"], got["blocks"], got["heads"], got["params"]) == (1, 3, 8, params)
    assert got["stall_ms"] < STALL_MS, got
