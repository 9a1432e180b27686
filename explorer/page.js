// page.js: the explorer page: what explore.py exported into data/, through model.js (every view with exact sums), in
// the panels of docs/explorer.md, "The panels"; experiments.js runs the two experiments, lessons.js the lessons.
//
// Shape legend as in model.js: T positions, d width, V vocabulary, L learned positions.

import * as bpe from "./bpe.js";
import * as checkpoint from "./checkpoint.js";
import { blues, diverging, heatmap, line_chart, surprise } from "./draw.js";
import * as experiments from "./experiments.js";
import * as fast from "./fast.js";
import * as induction from "./induction.js";
import * as lessons from "./lessons.js";
import * as model from "./model.js";
import { EXACT, SCHEMES, blocks_words, forward, model_config } from "./model.js";
import * as positions from "./positions.js";
import * as random from "./random.js";
import * as sample from "./sample.js";
import * as train from "./train.js";
import * as trace_block from "./trace_block.js";
import { $, add_figure, element, fetch_file, format_number, read_int, read_number, read_or_say, say, show_token,
  soon, table_row } from "./ui.js";

const FORMAT = "one-block explorer data v2"; // data/manifest.json's "format": an export this page reads (export.py)

const state = {
  manifest: null, // data/manifest.json: where the weights came from, the floors, the trace's sentences
  tok: null, // the bpe.js Tokenizer
  split: null, // {train, val}: the stories train.py trains and validates on
  data: null, // train.load_data's token IDs of the split
  model: null, // the weights every panel shows: {params, config (model.js's model_config), source, trained, step,
  // val_loss}
  loaded: null, // the model as it was loaded (the export, or a file): what "Back to the loaded weights" restores
  text: null, // the analysis of the text box: see analyse_text
  selected: null, // the position (in the model's window) the next-token and attention panels show
  hover: null, // the attention row under the mouse
  view: { block: 0, head: 0, inside: 0 }, // the attention panel's block and head, the inside panel's block
  training: null, // the live run: see the Train section
  worker: null, // the worker of the live (or last) run: experiments.start_worker
  files_chosen: 0, // Load weights: the files chosen so far (the last one chosen is the one loaded)
  run_id: 0,
  sampling: null, // {stop: bool} while the sample panel generates
};

// the pickers of the attention and inside panels: [element id, its key in state.view]
const PICKERS = [["attention-block", "block"], ["attention-head", "head"], ["inside-block", "inside"]];
const SCHEME_WORDS = { learned: "learned positions", none: "no positions", sinusoidal: "sinusoidal positions",
  rope: "rotary positions (rope)" };

// ----------------------------------------------------------------------------------------------------------------
// Messages: every failure ends as text in the page

/** Run fn; an exception becomes a message in the element id instead of a blank panel. */
function guarded(id, fn) {
  try {
    return fn();
  } catch (e) {
    say(id, `Something went wrong here: ${e.message}. The other panels still work.`);
    console.warn(e);
    return undefined;
  }
}

// ----------------------------------------------------------------------------------------------------------------
// Loading: the data explore.py exported, then the first drawing

async function load() {
  $("no-script").hidden = true;
  for (const scheme of SCHEMES) $("train-positions").append(new Option(scheme, scheme));
  experiments.draw_panels();
  try {
    state.manifest = await fetch_file("data/manifest.json", "json");
    const format = JSON.stringify(state.manifest?.format ?? null).slice(0, 80);
    if (format !== JSON.stringify(FORMAT)) {
      throw new Error(`data/manifest.json is an export of format ${format}, not "${FORMAT}"`);
    }
    state.tok = bpe.Tokenizer.from_json(await fetch_file("data/tokenizer.json", "json"));
    state.split = await fetch_file("data/split.json", "json");
    state.data = train.load_data(state.tok, state.split);
    const where = `data/${state.manifest.weights}`, bytes = await fetch_file(where, "bytes");
    const ckpt = checkpoint.read_weights(bytes, where, state.manifest, state.tok.vocab.length);
    state.loaded = loaded_model({ ...ckpt, params: checkpoint.unflat_tensors(ckpt.params) }, state.manifest.source,
      state.manifest.trained);
    state.model = state.loaded;
    describe_model();
  } catch (e) {
    say("page-message", `The explorer could not load its data: ${e.message}. Run python3 explore.py, which exports`
      + " the data and serves this page.");
    $("model-status").textContent = "No model loaded.";
    window.ready = true;
    return;
  }
  for (const key of ["a", "b"]) $(`order-${key}`).value = state.manifest.order[key];
  describe_text();
  for (const key of ["batch", "steps"]) $(`train-${key}`).value = train.DEFAULTS[key];
  $("train-lr").value = state.manifest.training.lr;
  wire_controls();
  experiments.setup({ tok: state.tok, split: state.split, data: state.data, manifest: state.manifest });
  await lessons.setup({ tok: state.tok, split: state.split, data: state.data, manifest: state.manifest,
    model: () => state.model });
  render_all();
  window.ready = true;
}

/** The words of the page that depend on the text: its vocabulary, and for a text of your own (no floor, no
 * stories) a first text from its held-out part. */
function describe_text() {
  $("vocab-size").textContent = state.tok.vocab.length;
  if (state.manifest.text === null || state.manifest.text === undefined) return;
  $("text-label").textContent = `Text (the start of the held-out part of ${state.manifest.text})`;
  const start = state.split.val.slice(0, 400);
  $("text").value = start.includes("\n") ? start.slice(0, start.lastIndexOf("\n")) : start;
  $("floor-note").textContent = `Nobody knows the entropy of ${state.manifest.text}, so there is no floor to draw.`;
}

// ----------------------------------------------------------------------------------------------------------------
// The model: which weights the panels show, and the weights file

/** A loaded checkpoint ({params, config, step, val_loss}, as checkpoint.read_weights gives, its params as model.js
 * tensors) as a model the panels show (state.model), from source (words), trained or not. */
function loaded_model(ckpt, source, trained) {
  return { ...ckpt, source, trained, val_loss: ckpt.val_loss === null ? null : Number(ckpt.val_loss) };
}

/** Show model m in every panel and words in the load message: the page's run ends, as it belongs to the weights
 * before m. */
function show_weights(m, words) {
  stop_training();
  state.training = null;
  state.model = m;
  describe_model();
  say("load-message", words, "note");
  render_all();
}

/** The words and pickers of the page that depend on the model's sizes. */
function describe_model() {
  const m = state.model;
  for (const [id, key] of PICKERS) {
    const noun = key === "head" ? "head" : "block", count = m.config[`${noun}s`];
    const select = $(id);
    select.textContent = "";
    state.view[key] = Math.min(state.view[key], count - 1); // (the weights before may have had more)
    for (let i = 0; i < count; i++) select.append(new Option(`${noun} ${i + 1} of ${count}`, String(i)));
    select.value = String(state.view[key]);
  }
  $("train-positions").value = m.config.positions;
  $("train-sizes").textContent = sizes_words(m);
  const tiny = trace_block.tiny_config(m.config); // the check's copy: see run_check
  $("check-count").textContent = model.parameter_count(tiny).toLocaleString("en");
  $("check-sizes").textContent = `(width ${tiny.d}, ${blocks_words(m.config)},`
    + ` ${SCHEME_WORDS[m.config.positions]})`;
  show_model_status();
}

function sizes_words(m) {
  const { d, max_len, positions } = m.config;
  return `d ${d}, ${blocks_words(m.config)}, ${max_len} positions, ${SCHEME_WORDS[positions]}`;
}

function show_model_status() {
  const m = state.model;
  const status = $("model-status");
  status.textContent = "";
  if (!m.trained) status.append(element("span", "untrained", "Untrained model: "));
  const val = m.val_loss === null ? "" : `, validation loss ${m.val_loss.toFixed(4)} (${floor_words(4)})`;
  const replaced = state.loaded && m !== state.loaded && m.params !== state.loaded.params
    ? ` The loaded weights (${state.loaded.source.replace(/^./, (c) => c.toLowerCase())}) are not shown: "Back to the`
      + ' loaded weights" shows them again.'
    : "";
  const count = model.parameter_count(m.config).toLocaleString("en");
  status.append(`${m.source}; step ${m.step}${val}. ${count} parameters, ${sizes_words(m)}.${replaced}`);
  $("restore").hidden = !replaced;
  show_replace_note();
}

// ----------------------------------------------------------------------------------------------------------------
// Load weights: a file read and checked in a worker of its own (checkpoint.read_weights)

/** The page's reading of a weights file (a File): what Load weights shows, {config, step, val_loss, params (model.js
 * tensors)}, or an Error that starts with the file's name and says what is wrong. A file larger than any checkpoint
 * the page runs is refused by its size, before a byte of it is read. */
async function read_weights_file(file) {
  checkpoint.check_file_size(file.size, file.name, state.manifest);
  const ckpt = await new Promise((resolve, reject) => {
    // a worker for this file alone (worker.js answers "load" once), ended when it answers
    const loader = experiments.new_worker("worker that reads weights files", (data) => {
      loader.terminate();
      if (data.type === "loaded") resolve(data.ckpt);
      else reject(new Error(data.message));
    }, (why) => {
      loader.terminate();
      reject(new Error(`${file.name}: ${why}`));
    });
    loader.postMessage({ type: "load", file, manifest: state.manifest, vocab: state.tok.vocab.length });
  });
  // (the config frozen again: from a worker, a message carries a copy)
  return { ...ckpt, config: model_config(ckpt.config), params: checkpoint.unflat_tensors(ckpt.params) };
}

/** Load weights: the file's model in every panel, or a message saying why the file is refused. */
async function load_weights_file(file) {
  say("load-message", "Reading the weights file...", "note");
  const chosen = ++state.files_chosen;
  let ckpt;
  try {
    ckpt = await read_weights_file(file);
  } catch (e) {
    if (chosen === state.files_chosen) say("load-message", `${e.message}. The model is unchanged.`);
    return;
  }
  if (chosen !== state.files_chosen) return; // another file was chosen meanwhile: that one is shown
  state.loaded = loaded_model(ckpt, `Weights from the file ${file.name}`, ckpt.step > 0);
  const words = `${blocks_words(ckpt.config)}, ${SCHEME_WORDS[ckpt.config.positions]}`;
  show_weights(state.loaded, `Loaded ${file.name}: step ${ckpt.step}, ${words}.`);
}

/** Back to the weights that were loaded, after a run from fresh weights replaced them. */
const restore_loaded = () => show_weights(state.loaded, `Back to the loaded weights: ${state.loaded.source}.`);

/** The current weights as a checkpoint file that sample.py, explore.py and checkpoint.read_weights read. */
async function download_weights() {
  const m = state.model;
  const live = state.worker && state.training && !state.training.ended ? await request_snapshot() : null;
  // a live run's whole state; else the weights shown, with zero moments and a sampler of the Seed field
  const snap = live ? { ...live, params: checkpoint.unflat_tensors(live.params),
    moments: [live.m, live.v].map(checkpoint.unflat_tensors) }
    : { params: m.params, moments: [train.zeros_like(m.params), train.zeros_like(m.params)], step: m.step,
      rng_words: new random.Random(Number($("train-seed").value) || 0).getstate(), seed: null, settings: {} };
  const bytes = checkpoint.checkpoint_bytes({
    ...snap,
    config: m.config,
    training: { backend: "explorer", dtype: "float64", seed: snap.seed, ...snap.settings },
    extra: { explorer_source: m.source, ...(m.val_loss === null ? {} : { val_loss: String(m.val_loss) }) },
  }, state.manifest);
  const href = URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
  const link = Object.assign(element("a"), { href, download: "explorer.safetensors" });
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
}

/** "floor 0.3074" for the stories; for a text of your own, whose entropy nobody knows, that there is none. */
function floor_words(digits) {
  const { val_floor, text } = state.manifest;
  return val_floor === null ? `no floor is known for ${text}` : `floor ${val_floor.toFixed(digits)}`;
}

/** The IDs the model reads before any text: the newline every story follows (every line of a text, if it has
 * newlines; else nothing). */
function start_ids() {
  return state.tok.known.has("\n") ? state.tok.encode("\n") : [];
}

// ----------------------------------------------------------------------------------------------------------------
// Tokens and next token: the text box through the model

/** Tokenize the box and run the model on it: the newline every story follows, then the text, cropped to the
 * model's positions. {error} for an unknown character; else {ids_all, first, ids, tokens, logits, cache, losses}. */
function analyse_text(text) {
  const bad = state.tok.unknown(text);
  if (bad) return { error: bad };
  const m = state.model;
  const ids_all = [...start_ids(), ...state.tok.encode(text)];
  const first = Math.max(0, ids_all.length - m.config.max_len); // tokens before it are not read, as in sample.py
  const ids = ids_all.slice(first); // (T,)
  const [logits, cache] = forward(m.params, ids, m.config, EXACT); // (T, V)
  const rows = model.rows_of(logits);
  const losses = ids.map((id, t) => (t === 0 ? null : -log_softmax(rows[t - 1])[id])); // (T,) nats
  return { ids_all, first, ids, tokens: ids_all.map((i) => state.tok.vocab[i]), logits: rows, cache, losses };
}

/** log softmax of one row of logits, with an exact sum. */
function log_softmax(row) {
  const top = Math.max(...row);
  const log_total = Math.log(model.fsum(Array.from(row, (z) => Math.exp(z - top))));
  return Array.from(row, (z) => z - top - log_total); // (V,)
}

function render_tokens() {
  const text = $("text").value;
  const a = analyse_text(text);
  const where = $("token-where");
  if (a.error) {
    say("token-message", `${a.error.message}. The panels below still show the last text the model could read.`);
    where.textContent = "";
    where.append(text.slice(0, a.error.index), element("mark", "", a.error.ch),
      text.slice(a.error.index + a.error.ch.length));
    where.hidden = false;
    return state.text !== null; // keep the last readable text in the other panels
  }
  where.hidden = true;
  const L = state.model.config.max_len;
  if (!text) {
    say("token-message", "The box is empty: the model reads only the newline that starts every story. The panels"
      + " show what it expects a story to start with.", "note");
  } else if (a.first > 0) {
    say("token-message", `The text is ${a.ids_all.length - 1} tokens, ${a.ids_all.length} with the newline the model`
      + ` reads first; the model has ${L} positions, so it reads the last ${L}, as sample.py does. The greyed chips are`
      + " not read.", "note");
  } else {
    say("token-message", "");
  }
  const changed = !state.text || state.text.ids.join() !== a.ids.join();
  state.text = a;
  if (changed || state.selected === null || state.selected >= a.ids.length) state.selected = a.ids.length - 1;
  draw_chips();
  return true;
}

function draw_chips() {
  const a = state.text;
  const chips = $("chips");
  chips.textContent = "";
  a.ids_all.forEach((id, i) => {
    const t = i - a.first; // position in the model's window
    const chip = element("button", `chip${t < 0 ? " unread" : ""}${t === state.selected ? " selected" : ""}`);
    chip.type = "button";
    chip.setAttribute("role", "listitem");
    const loss = t > 0 ? a.losses[t] : null;
    chip.title = t < 0 ? "not read: before the model's window"
      : loss === null ? "read first: nothing before it to predict it from"
        : `loss ${loss.toFixed(3)} nats (p = ${Math.exp(-loss).toFixed(3)})`;
    const said_loss = loss === null ? "" : `, loss ${loss.toFixed(2)} nats`;
    chip.setAttribute("aria-label", `token ${i}, ${JSON.stringify(a.tokens[i])}, ID ${id}${said_loss}`);
    chip.dataset.position = t;
    const bar = element("span", "loss");
    if (loss !== null) bar.style.background = surprise(loss);
    chip.append(element("span", "text", show_token(a.tokens[i])), element("span", "id", String(id)), bar);
    if (t >= 0) {
      chip.addEventListener("click", () => select_position(t, true)); // the chips are redrawn: keep the focus
      chip.addEventListener("keydown", (e) => {
        const step = { ArrowLeft: -1, ArrowRight: 1, Home: -Infinity, End: Infinity }[e.key];
        if (step === undefined) return;
        e.preventDefault();
        select_position(t + step, true);
      });
    }
    chips.append(chip);
  });
}

/** Show position t (kept within the text's) in the chips, the next-token and the attention panels. */
function select_position(t, focus = false) {
  state.selected = Math.min(state.text.ids.length - 1, Math.max(0, t));
  draw_chips();
  render_next();
  render_attention();
  if (focus) document.querySelector(`#chips .chip[data-position="${state.selected}"]`)?.focus();
}

function render_next() {
  const a = state.text;
  const t = state.selected;
  const logp = log_softmax(a.logits[t]);
  const ranked = logp.map((lp, id) => [lp, id]).sort((x, y) => y[0] - x[0] || x[1] - y[1]);
  const next = t + 1 < a.ids.length ? a.ids[t + 1] : null;
  const token = JSON.stringify(show_token(state.tok.vocab[a.ids[t]]));
  $("next-caption").textContent = `After position ${t} (${token}), the 10 most likely next tokens:`;
  const list = $("next-list");
  list.textContent = "";
  for (const [lp, id] of ranked.slice(0, 10)) {
    const li = element("li", id === next ? "actual" : "");
    const bar = element("span", "bar");
    bar.style.width = `${Math.max(1, Math.round(Math.exp(lp) * 160))}px`;
    li.append(`${JSON.stringify(show_token(state.tok.vocab[id])).padEnd(10)}`, bar,
      `${(Math.exp(lp) * 100).toFixed(1)}%`);
    list.append(li);
  }
  if (next !== null && !ranked.slice(0, 10).some(([, id]) => id === next)) {
    const li = element("li", "actual");
    li.value = ranked.findIndex(([, id]) => id === next) + 1;
    li.append(`${JSON.stringify(show_token(state.tok.vocab[next]))} ${(Math.exp(logp[next]) * 100).toFixed(2)}%`);
    list.append(li);
  }
}

// ----------------------------------------------------------------------------------------------------------------
// Attention: the head of the block the pickers choose, and what the row under the mouse reads

function render_attention() {
  const a = state.text;
  const { block, head } = state.view;
  const weights = model.rows_of(a.cache.blocks[block].att.weights[head]); // (T, T)
  const maps = $("attention-maps");
  maps.textContent = "";
  const canvas = add_figure(maps, `block ${block + 1} of ${a.cache.blocks.length}, head ${head + 1} of`
    + ` ${state.model.config.heads}: rows read, columns are read`, `attention weights of block ${block + 1}, head`
    + ` ${head + 1}, ${weights.length} by ${weights.length}; arrow keys move the row`);
  canvas.tabIndex = 0;
  Object.assign(canvas.dataset, { rows: weights.length, block, head });
  const labels = a.ids.map((id) => show_token(state.tok.vocab[id]));
  const grid = heatmap(canvas, weights, { labels, color: blues, mask: (i, j) => j > i,
    highlight: state.hover ?? state.selected });
  // the outline follows the readout: the row under the mouse, and the chosen position again once the mouse leaves
  canvas.addEventListener("mousemove", (e) => {
    const cell = grid.cell_at(e);
    if (cell && cell.row !== state.hover) {
      state.hover = cell.row;
      grid.outline(cell.row);
      show_reads(weights, cell.row);
    }
  });
  canvas.addEventListener("mouseleave", () => {
    state.hover = null;
    grid.outline(state.selected);
    show_reads(weights, state.selected);
  });
  canvas.addEventListener("keydown", (e) => {
    const step = { ArrowUp: -1, ArrowDown: 1 }[e.key];
    if (step === undefined) return;
    e.preventDefault();
    select_position(state.selected + step);
    maps.querySelector("canvas")?.focus();
  });
  show_reads(weights, state.hover ?? state.selected);
}

/** The readout under the heatmap: what position i reads, largest weights first. */
function show_reads(weights, i) {
  const a = state.text;
  if (i === null || i >= weights.length) return;
  const reads = Array.from(weights[i].subarray(0, i + 1), (w, j) => [w, j]).sort((x, y) => y[0] - x[0]).slice(0, 8);
  const name = (j) => `${j} ${JSON.stringify(show_token(state.tok.vocab[a.ids[j]]))}`;
  const read = reads.map(([w, j]) => `${name(j)} ${w.toFixed(3)}`).join(" · ");
  $("attention-readout").textContent = `Position ${name(i)} reads: ${read}`;
}

// ----------------------------------------------------------------------------------------------------------------
// Word order: the trace's two sentences, with the model's positions and without (docs/explorer.md, "The panels")

function render_order() {
  const texts = [$("order-a").value, $("order-b").value];
  const on = $("order-positions").checked;
  const m = state.model;
  // what "positions on" means: the model's own scheme (a model without positions: its learned rows, untrained)
  const own = m.config.positions === "none" ? "learned" : m.config.positions;
  const scheme = on ? own : "none";
  $("order-scheme").textContent = `(${SCHEME_WORDS[own]})`;
  const L = scheme === "learned" ? m.config.max_len : model.LONGEST;
  const ids = [];
  for (const [n, text] of texts.entries()) {
    const bad = state.tok.unknown(text);
    const problem = bad ? bad.message : !text ? "it is empty" : null;
    if (problem) return order_problem(`Sentence ${"AB"[n]}: ${problem}.`);
    ids.push(state.tok.encode(text));
    if (ids[n].length > L) {
      return order_problem(`Sentence ${"AB"[n]} is ${ids[n].length} tokens, longer than the ${L} positions the model`
        + " has.");
    }
  }
  const gaps = trace_block.position_gaps(m.params, ids[0], ids[1], model_config({ ...m.config, positions: scheme }));
  const same_tokens = [...ids[0]].sort().join() === [...ids[1]].sort().join();
  if (ids[0].length !== ids[1].length) {
    order_problem(`The sentences are ${ids[0].length} and ${ids[1].length} tokens: their last positions do not line`
      + " up, so there is no last-position gap. The chart compares the positions they share.", "note");
  } else {
    say("order-message", same_tokens ? "" : "These are not the same tokens in another order, so the last positions can"
      + " differ even without positions.", "note");
    const gap = gaps.at(-1);
    $("order-gap").textContent = format_number(gap);
    $("order-gap").dataset.value = String(gap);
    $("order-gap-note").textContent = gap === 0
      ? "bit-identical logits: without positions the last token sees the same set of tokens either way"
      : on ? "the positions tell the two orders apart"
        : m.config.blocks > 1 && same_tokens ? "even without positions: block 2 reads what block 1 wrote at the earlier"
          + " positions, and each of those has read a different prefix, so"
          + ` ${m.config.blocks} blocks can tell the orders apart where one cannot` : "";
  }
  const labels = ids[0].map((id) => show_token(state.tok.vocab[id]));
  line_chart($("order-chart"), {
    series: [{ points: gaps.map((g, t) => [t, g]), color: "#1f5fbf", dots: true,
      label: `gap, positions ${on ? "on" : "off"}` }],
    x_max: Math.max(1, gaps.length - 1),
    y_max: Math.max(1e-12, ...gaps) * 1.1,
    x_label: "position",
    height: 170,
  });
  $("order-gaps").textContent = gaps.map((g, t) => `${t} ${JSON.stringify(labels[t] ?? "")} ${format_number(g)}`)
    .join(" · ");
}

/** The order panel without a last-position gap, and why (kind as say's). */
function order_problem(text, kind = "error") {
  say("order-message", text, kind);
  $("order-gap").textContent = "–";
  $("order-gap-note").textContent = "";
}

// ----------------------------------------------------------------------------------------------------------------
// Inside the blocks: the stream through each block, what each layer of one block adds, and the position rows

/** The length of each row of a matrix, with exact sums. */
function row_norms(m) {
  return model.rows_of(m).map((r) => Math.sqrt(model.dot(EXACT, r, r)));
}

/** The length of each row of a - b. */
function diff_norms(a, b) {
  return row_norms({ rows: a.rows, cols: a.cols, data: a.data.map((v, i) => v - b.data[i]) });
}

const COLORS = ["#1f5fbf", "#d81b60", "#2e7d32", "#f57c00", "#6a3d9a", "#00838f"];

function render_inside() {
  const { x0, blocks } = state.text.cache;
  const points = (values) => values.map((v, t) => [t, v]);
  const stream = [{ points: points(row_norms(x0)), color: "#444", label: "|x0|" }];
  blocks.forEach((block, b) => stream.push({ points: points(row_norms(block.x2)), color: COLORS[b % COLORS.length],
    label: `after block ${b + 1}` }));
  const top = (series) => Math.max(...series.flatMap((s) => s.points.map(([, y]) => y))) * 1.15;
  const x_max = Math.max(1, x0.rows - 1);
  line_chart($("stream-chart"), { series: stream, x_max, y_max: top(stream), x_label: "position", height: 200 });

  const b = Math.min(state.view.inside, blocks.length - 1);
  const block = blocks[b];
  const series = [
    { points: points(row_norms(block.x)), color: "#444", label: b ? `|x| (block ${b}'s output)` : "|x0|" },
    { points: points(row_norms(block.x1)), color: "#1f5fbf", label: "|x1|" },
    { points: points(row_norms(block.x2)), color: "#d81b60", label: "|x2|" },
    { points: points(diff_norms(block.x1, block.x)), color: "#1f5fbf", dash: [4, 3], label: "attention adds" },
    { points: points(diff_norms(block.x2, block.x1)), color: "#d81b60", dash: [4, 3], label: "MLP adds" },
  ];
  line_chart($("inside-chart"), { series, x_max, y_max: top(series), x_label: "position", height: 230 });
  render_position_rows();
}

/** The cosine similarity of the position rows the model adds: the learned pos_emb, or the fixed sinusoid table;
 * rope and no positions add none, and the panel says so. */
function render_position_rows() {
  const m = state.model;
  const canvas = $("position-similarity");
  const { positions: scheme, max_len, d } = m.config;
  const rows = scheme === "learned" ? m.params.pos_emb
    : scheme === "sinusoidal" ? model.sinusoid_table(max_len, d) : null;
  $("position-note").textContent = {
    learned: `Cosine similarity of the ${m.config.max_len} learned position rows: random at first; after training,`
      + " nearby positions end up alike.",
    sinusoidal: `Cosine similarity of the first ${m.config.max_len} rows of the fixed sinusoid table: nothing to learn,`
      + " and the similarity depends on the distance alone.",
    rope: "Rotary positions add no rows to the stream: they turn each head's q and k by angles that grow with the"
      + " position, so that a score depends on the distance between the two positions.",
    none: "This model adds nothing to say where a token is: attention sees a set of tokens (see the word-order panel).",
  }[scheme];
  canvas.hidden = rows === null;
  if (rows === null) return;
  const r = model.rows_of(rows); // (L, d)
  const norms = row_norms(rows); // (L,)
  const cos = r.map((x, i) => r.map((y, j) => model.dot(EXACT, x, y) / (norms[i] * norms[j]))); // (L, L)
  heatmap(canvas, cos, { color: diverging, max_cell: 5 });
}

// ----------------------------------------------------------------------------------------------------------------
// Sample: the next-token panel in a loop, token by token

/** The sample panel's settings, or an Error naming the field that is wrong. */
function sample_settings() {
  const settings = {
    temperature: read_number("sample-temperature", "Temperature", (v) => v >= 0, "0 (greedy) or a positive number"),
    top_k: read_int("sample-top-k", "Top-k", 0, state.model.config.vocab),
    seed: read_int("sample-seed", "Seed", 0, 2 ** 32 - 1),
    tokens: read_int("sample-tokens", "Tokens", 1, 1000),
  };
  const prompt = $("sample-prompt").value;
  const bad = state.tok.unknown(prompt);
  if (bad) throw new Error(`Prompt: ${bad.message}`);
  return { ...settings, prompt };
}

async function run_sample() {
  const settings = read_or_say("sample-message", sample_settings);
  if (!settings) return;
  const { params, config } = state.model; // the weights of this moment, even if training goes on
  const rng = new random.Random(settings.seed);
  const context = [...start_ids(), ...state.tok.encode(settings.prompt)];
  if (!context.length) {
    return say("sample-message", "The prompt is empty, and this text has no newline to start after: type a prompt.");
  }
  const ids = [...context];
  const out = $("sample-out");
  out.dataset.done = "false";
  state.sampling = { stop: false };
  $("sample-go").disabled = true;
  $("sample-stop").disabled = false;
  for (let n = 0; n < settings.tokens && !state.sampling.stop; n++) {
    // the model was trained on max_len positions: the most recent ones
    const window_ids = ids.slice(-config.max_len); // (<= L,)
    const [logits] = forward(params, window_ids, config, EXACT); // (T, V)
    ids.push(sample.choose(model.row(logits, logits.rows - 1), settings.temperature, settings.top_k, rng));
    out.textContent = settings.prompt + state.tok.decode(ids.slice(context.length));
    await new Promise((resolve) => setTimeout(resolve, 0)); // let the page draw the new token
  }
  state.sampling = null;
  out.dataset.done = "true";
  $("sample-go").disabled = false;
  $("sample-stop").disabled = true;
}

// ----------------------------------------------------------------------------------------------------------------
// Train: the worker runs train.js; the page draws the curve and follows the weights

/** A run that failed (the worker broke, or the loss stopped being finite): back to the weights before it. */
function training_failed(why) {
  if (state.before_run) state.model = state.before_run;
  say("train-message", `Training stopped: ${why}. The model is back to the weights it had before this run; the other`
    + " panels still work.");
  end_training();
}

function from_fresh() {
  return document.querySelector('input[name="train-from"]:checked').value === "scratch";
}

/** Say, before Start, what a run from fresh weights replaces: trained weights vanish from every panel otherwise. */
function show_replace_note() {
  const m = state.model;
  const live_from_fresh = state.training && !state.training.ended && !state.training.from_loaded;
  const replaces = from_fresh() && m.trained && !live_from_fresh;
  const note = $("train-replace-note");
  note.hidden = !replaces;
  if (replaces) {
    const source = m.source.replace(/^./, (c) => c.toLowerCase());
    note.textContent = `Start replaces the trained weights in every panel (${source}, step ${m.step}) with fresh ones.`
      + ' Download weights first to keep them, or start from the loaded weights; "Back to the loaded weights" shows'
      + " them again afterwards.";
  }
}

function start_training() {
  const m = state.model;
  const from_loaded = !from_fresh();
  const read = read_or_say("train-message", () => {
    const positions = from_loaded ? m.config.positions : $("train-positions").value;
    const lr = read_number("train-lr", "Learning rate", (v) => v > 0, "a positive number");
    const steps = read_int("train-steps", "Steps", 1, 1e6);
    const batch = read_int("train-batch", "Batch", 1, 256);
    const seed = read_int("train-seed", "Seed", 0, 2 ** 32 - 1);
    const config = model.checked(model_config({ ...m.config, positions })); // the loaded model's sizes, this scheme
    return { settings: experiments.settings_of({ steps, batch, lr }, config), seed, config };
  });
  if (!read) return;
  const { settings, seed, config } = read;
  state.run_id += 1;
  state.training = { id: state.run_id, settings, seed, from_loaded, losses: [], vals: [], step: 0, paused: false,
    tokens_per_s: null, last_render: 0 };
  try {
    const params = from_loaded ? checkpoint.flat_tensors(m.params) : null;
    state.worker?.terminate(); // (the run before this one, if any, ends with its worker)
    state.worker = experiments.start_worker({ run: state.run_id, task: "stories", params, config, seed, settings,
      data: state.data, follow: true }, on_worker_message, training_failed);
  } catch (e) {
    return training_failed(e.message);
  }
  state.before_run = m;
  const source = from_loaded ? "Training in this page from the loaded weights"
    : `Training in this page from fresh weights (seed ${seed})`;
  state.model = { ...m, config, trained: true, step: 0, val_loss: null, source };
  $("train-start").textContent = "Restart";
  $("train-pause").disabled = false;
  $("train-pause").textContent = "Pause";
  $("train-stop").disabled = false;
  show_model_status();
  draw_training();
}

function on_worker_message(msg) {
  const run = state.training;
  if (msg.type === "snapshot") return state.snapshot_wait?.(msg);
  if (!run || msg.run !== run.id) return; // a message of a run that was stopped or restarted
  if (msg.type === "progress") {
    run.losses.push(...msg.losses);
    run.step = msg.step;
    run.tokens_per_s = msg.tokens_per_s;
  } else if (msg.type === "eval") {
    run.vals.push([msg.step, msg.val, msg.seconds]);
    state.model.val_loss = msg.val;
  } else if (msg.type === "weights") {
    state.model.params = checkpoint.unflat_tensors(msg.params);
    state.model.step = msg.step;
    if (performance.now() - run.last_render >= 400) { // the panels follow the weights, about twice a second at most
      run.last_render = performance.now();
      render_all();
    }
  } else if (msg.type === "done") {
    run.done = true;
    end_training();
  }
  draw_training();
}

function draw_training() {
  const run = state.training ?? { settings: { steps: Number($("train-steps").value) || train.DEFAULTS.steps },
    losses: [], vals: [], step: 0, idle: true };
  const s = run.settings;
  const last = run.losses.slice(-20);
  const recent = last.length ? last.reduce((t, [, l]) => t + l, 0) / last.length : null;
  const val = run.vals.at(-1);
  const floor = floor_words(4).replace(/^./, (c) => c.toUpperCase());
  const unit = state.manifest.val_floor === null ? "" : " nats/token";
  $("train-status").textContent = run.idle ? `Not trained in this page yet. ${floor}${unit}.` : [
    `step ${run.step} of ${s.steps}`,
    recent === null ? null : `train ${recent.toFixed(4)} (mean of the last ${last.length} steps)`,
    val ? `val ${val[1].toFixed(4)} at step ${val[0]}` : null,
    floor_words(4),
    run.tokens_per_s ? `${Math.round(run.tokens_per_s).toLocaleString("en")} tokens/s` : null,
    run.done ? "done" : run.paused ? "paused" : null,
  ].filter(Boolean).join(" | ");
  line_chart($("train-chart"), {
    series: [
      { points: run.losses, color: "#9bb7e0", width: 1, label: "train (each step)" },
      { points: run.vals, color: "#d81b60", dots: true, width: 2, label: "validation" },
    ],
    hlines: state.manifest.val_floor === null ? []
      : [{ y: state.manifest.val_floor, color: "#2e7d32", label: floor_words(3) }],
    x_max: s.steps,
    y_max: Math.log(state.model.config.vocab) + 0.3,
    x_label: "step",
    height: 240,
  });
}

function toggle_pause() {
  const run = state.training;
  if (!run || !state.worker) return;
  run.paused = !run.paused;
  state.worker.postMessage({ type: run.paused ? "pause" : "resume" });
  $("train-pause").textContent = run.paused ? "Resume" : "Pause";
  draw_training();
}

function stop_training() {
  if (state.worker && state.training && !state.training.done) state.worker.postMessage({ type: "stop" });
  end_training();
}

function end_training() {
  $("train-pause").disabled = true;
  $("train-stop").disabled = true;
  $("train-pause").textContent = "Pause";
  if (state.training) state.training.ended = true;
  show_model_status();
  render_all();
}

function request_snapshot() {
  return new Promise((resolve) => {
    state.snapshot_wait = (msg) => {
      state.snapshot_wait = null;
      resolve(msg.run === null ? null : msg);
    };
    state.worker.postMessage({ type: "snapshot" });
  });
}

// ----------------------------------------------------------------------------------------------------------------
// Check: the finite-difference gradient check of a tiny copy of the model's sizes, tensor by tensor

async function run_check(backward_fn = model.backward) {
  // the tiny copy of the model the check runs on: trace_block.tiny_config for its blocks, heads and scheme
  const config = trace_block.tiny_config(state.model.config);
  const tiny = model.init_params(config, trace_block.TINY.seed);
  // the first story, as trace_block.py checks it
  const ids = Array.from(state.data.stream.subarray(0, config.max_len + 1)); // (L + 1,)
  const x = ids.slice(0, config.max_len);
  const y = ids.slice(1, config.max_len + 1);
  const table = $("check-table");
  const body = table.querySelector("tbody");
  body.textContent = "";
  table.hidden = false;
  $("check-go").disabled = true;
  const results = {};
  let worst = 0;
  const started = performance.now();
  const count = Object.keys(tiny).length;
  for (const [name, shape, err] of trace_block.gradient_errors_by_tensor(tiny, x, y, config, backward_fn)) {
    results[name] = err;
    worst = Math.max(worst, err);
    const ok = err < 1e-7;
    body.append(table_row([[name, ""], [`(${shape.join(", ")})`, ""], [err.toExponential(3), "num"],
      [ok ? "OK" : "NOT OK", ok ? "ok" : "bad"]]));
    $("check-status").textContent = `checked ${Object.keys(results).length} of ${count} tensors…`;
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  const n = model.parameter_count(config);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const verdict = worst < 1e-7 ? "below 1e-7: the backward pass agrees with the slopes"
    : "NOT below 1e-7: the backward pass is wrong";
  $("check-status").textContent = `${n.toLocaleString("en")} numbers checked in ${seconds} s: worst error`
    + ` ${worst.toExponential(3)}, ${verdict}.`;
  $("check-go").disabled = false;
  return results;
}

// ----------------------------------------------------------------------------------------------------------------
// Wiring and drawing everything

function render_all() {
  if (!state.model) return;
  if (guarded("token-message", render_tokens)) {
    for (const render of [render_next, render_attention, render_inside]) guarded("token-message", render);
  }
  guarded("order-message", render_order);
  draw_training();
}

const pending = new Map(); // soon's frames

function wire_controls() {
  $("text").addEventListener("input", () => soon(pending, "all", render_all));
  const redraw_order = () => soon(pending, "order", () => guarded("order-message", render_order));
  for (const id of ["order-a", "order-b", "order-positions"]) $(id).addEventListener("input", redraw_order);
  $("order-answer").addEventListener("toggle", redraw_order); // (its chart, drawn while folded, takes its width)
  for (const [id, key] of PICKERS) {
    $(id).addEventListener("change", () => {
      state.view[key] = Number($(id).value);
      guarded("token-message", key === "inside" ? render_inside : render_attention);
    });
  }
  $("weights-file").addEventListener("change", (e) => {
    const file = e.target.files[0];
    e.target.value = ""; // so that choosing the same file again is a change too
    if (file) load_weights_file(file);
  });
  for (const id of ["sample-prompt", "sample-temperature", "sample-top-k", "sample-seed", "sample-tokens"]) {
    // as the fields change: the message of the first one that is wrong, or none once all are right
    $(id).addEventListener("input", () => state.sampling || read_or_say("sample-message", sample_settings));
  }
  for (const radio of document.querySelectorAll('input[name="train-from"]')) {
    radio.addEventListener("change", show_replace_note);
  }
  // the buttons: [id, what a click does, and for a task that may fail, where and in what words it says so]
  const buttons = [["restore", restore_loaded], ["train-start", start_training], ["train-pause", toggle_pause],
    ["train-stop", stop_training], ["sample-stop", () => state.sampling && (state.sampling.stop = true)],
    ["download", download_weights, "load-message", "Could not make the file"],
    ["sample-go", run_sample, "sample-message", "Sampling failed"],
    ["check-go", run_check, "check-status", "The check failed"]];
  for (const [id, task, where, words] of buttons) {
    $(id).addEventListener("click", () => (where ? task().catch((e) => say(where, `${words}: ${e.message}`)) : task()));
  }
  let resize = null;
  window.addEventListener("resize", () => {
    clearTimeout(resize);
    resize = setTimeout(() => {
      render_all();
      experiments.redraw();
    }, 150);
  });
}

const went_wrong = (why) => say("page-message", `Something went wrong: ${why}. The rest of the page still works.`);
window.addEventListener("error", (e) => went_wrong(e.message));
window.addEventListener("unhandledrejection", (e) => went_wrong(e.reason?.message ?? e.reason));

// for the tests and for anyone curious: the modules and the state, from the browser's console
window.explorer = {
  modules: { bpe, checkpoint, experiments, fast, induction, lessons, model, positions, random, sample, train,
    trace_block },
  state, run_check, render_all, read_weights_file,
};
load();
