// page.js: the explorer page. It loads what explore.py exported into data/, runs model.js on the text you type
// (every view with exact sums, so the order facts hold bit for bit), draws the panels, samples, trains in
// worker.js and runs the gradient check. Every failure ends as a message in the page; the other panels keep working.
//
// Shape legend as in model.js: T positions, d width, V vocabulary, L learned positions.

import * as bpe from "./bpe.js";
import * as checkpoint from "./checkpoint.js";
import { blues, diverging, heatmap, line_chart, surprise } from "./draw.js";
import * as model from "./model.js";
import { EXACT, forward } from "./model.js";
import * as random from "./random.js";
import * as sample from "./sample.js";
import * as train from "./train.js";
import * as trace_block from "./trace_block.js";

const $ = (id) => document.getElementById(id);

const state = {
  manifest: null, // data/manifest.json: where the weights came from, the floors, the trace's sentences
  tok: null, // the bpe.js Tokenizer
  split: null, // {train, val}: the stories train.py trains and validates on
  data: null, // train.load_data's token IDs of the split
  model: null, // {params, config, use_positions, source, trained, step, val_loss}
  text: null, // the analysis of the text box: see analyse_text
  selected: null, // the position (in the model's window) the next-token and attention panels show
  hover: null, // the attention row under the mouse
  training: null, // the live run: see the Train section
  worker: null,
  run_id: 0,
  sampling: null, // {stop: bool} while the sample panel generates
};

// ----------------------------------------------------------------------------------------------------------------
// Messages: every failure ends here, as text in the page

/** Show text in the message element id (kind "error" or "note"); empty text hides it. */
function say(id, text, kind = "error") {
  const el = $(id);
  el.textContent = text;
  el.className = `message ${kind === "error" ? "error" : ""}`;
  el.hidden = !text;
}

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

/** A token as a chip shows it: a space as ␣, a newline as ⏎.
 *
 *     show_token(" mia")   // "␣mia" */
function show_token(t) {
  return t.replaceAll(" ", "␣").replaceAll("\n", "⏎");
}

function format_number(x) {
  return x === 0 ? "0" : Math.abs(x) >= 1e-3 && Math.abs(x) < 1e4 ? x.toPrecision(4) : x.toExponential(3);
}

// ----------------------------------------------------------------------------------------------------------------
// Loading: the data explore.py exported, then the first drawing

async function fetch_data(name, as) {
  let response;
  try {
    response = await fetch(`data/${name}`, { cache: "no-store" });
  } catch (e) {
    throw new Error(`could not fetch data/${name} (${e.message})`);
  }
  if (!response.ok) throw new Error(`could not fetch data/${name} (HTTP ${response.status})`);
  return as === "json" ? response.json() : new Uint8Array(await response.arrayBuffer());
}

async function load() {
  $("no-script").hidden = true;
  try {
    state.manifest = await fetch_data("manifest.json", "json");
    state.tok = bpe.Tokenizer.from_json(await fetch_data("tokenizer.json", "json"));
    state.split = await fetch_data("split.json", "json");
    state.data = train.load_data(state.tok, state.split);
    const ckpt = checkpoint.load_checkpoint(await fetch_data(state.manifest.weights, "bytes"), state.manifest.tokenizer_sha256);
    set_model(ckpt, { source: state.manifest.source, trained: state.manifest.trained });
  } catch (e) {
    say("page-message", `The explorer could not load its data: ${e.message}. Run python3 explore.py, which exports the data and serves this page.`);
    $("model-status").textContent = "No model loaded.";
    window.ready = true;
    return;
  }
  $("order-a").value = state.manifest.order.a;
  $("order-b").value = state.manifest.order.b;
  describe_text();
  $("train-batch").value = train.DEFAULTS.batch;
  $("train-steps").value = train.DEFAULTS.steps;
  $("train-lr").value = train.DEFAULTS.lr;
  wire_controls();
  render_all();
  window.ready = true;
}

/** The words of the page that depend on the text: its vocabulary, and for a text of your own (no floor, no
 * stories) a first text from its held-out part. */
function describe_text() {
  $("vocab-size").textContent = state.tok.vocab.length;
  const { d, hidden, max_len, seed } = trace_block.TINY;
  $("check-count").textContent = model.count_params(model.init_params(state.tok.vocab.length, d, hidden, max_len, seed)).toLocaleString("en");
  if (state.manifest.text === null || state.manifest.text === undefined) return;
  $("text-label").textContent = `Text (the start of the held-out part of ${state.manifest.text})`;
  const start = state.split.val.slice(0, 400);
  $("text").value = start.includes("\n") ? start.slice(0, start.lastIndexOf("\n")) : start;
  $("floor-note").textContent = `Nobody knows the entropy of ${state.manifest.text}, so there is no floor to draw.`;
}

// ----------------------------------------------------------------------------------------------------------------
// The model: which weights the panels show, and the weights file

/** Make a loaded checkpoint ({params, config, positions, step, metadata}) the model every panel shows. */
function set_model(ckpt, { source, trained }) {
  const config = model.config_of(ckpt.params);
  const val = ckpt.metadata?.val_loss;
  state.model = { params: ckpt.params, config, use_positions: ckpt.positions === "learned", source, trained, step: ckpt.step, val_loss: val === undefined ? null : Number(val) };
  $("train-positions").checked = state.model.use_positions;
  show_model_status();
}

function show_model_status(extra = "") {
  const m = state.model;
  const sizes = `${model.count_params(m.params).toLocaleString("en")} parameters, d ${m.config.d}, ${m.use_positions ? "learned positions" : "no positions"}`;
  const status = $("model-status");
  status.textContent = "";
  if (!m.trained) {
    const warn = document.createElement("span");
    warn.className = "untrained";
    warn.textContent = "Untrained model: ";
    status.append(warn);
  }
  const val = m.val_loss === null ? "" : `, validation loss ${m.val_loss.toFixed(4)} (${floor_words(4)})`;
  status.append(`${m.source}; step ${m.step}${val}. ${sizes}.${extra}`);
}

async function load_weights_file(file) {
  say("load-message", "");
  let ckpt;
  try {
    const bytes = new Uint8Array(await file.arrayBuffer());
    ckpt = checkpoint.load_checkpoint(bytes, state.manifest.tokenizer_sha256);
  } catch (e) {
    say("load-message", `${file.name}: ${e.message}. The model is unchanged.`);
    return;
  }
  stop_training();
  state.training = null; // the worker's run belongs to the weights before these
  set_model(ckpt, { source: `Weights from the file ${file.name}`, trained: ckpt.step > 0 });
  say("load-message", `Loaded ${file.name}: step ${ckpt.step}.`, "note");
  render_all();
}

/** The current weights as a checkpoint file that sample.py, explore.py and checkpoint.load_checkpoint read. */
async function download_weights() {
  const m = state.model;
  let snap = null;
  if (state.worker && state.training) snap = await request_snapshot();
  const moments = snap ? [snap.m, snap.v].map(checkpoint.unflat_tensors) : [train.zeros_like(m.params), train.zeros_like(m.params)];
  const settings = snap ? snap.settings : {};
  const bytes = checkpoint.checkpoint_bytes({
    params: snap ? checkpoint.unflat_tensors(snap.params) : m.params,
    moments,
    step: snap ? snap.step : m.step,
    rng_words: snap ? snap.rng_words : new random.Random(Number($("train-seed").value) || 0).getstate(),
    config: { vocab: m.config.vocab, d: m.config.d, hidden: m.config.hidden, max_len: m.config.max_len, use_positions: m.use_positions, positions: m.use_positions ? "learned" : "none" },
    training: { backend: "explorer", dtype: "float64", seed: snap ? snap.seed : null, ...settings },
    tokenizer_sha256: state.manifest.tokenizer_sha256,
    extra: { explorer_source: m.source, ...(m.val_loss === null ? {} : { val_loss: String(m.val_loss) }) },
  });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
  link.download = "explorer.safetensors";
  document.body.append(link);
  link.click();
  link.remove();
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
  const ids_all = [...start_ids(), ...state.tok.encode(text)];
  const first = Math.max(0, ids_all.length - state.model.config.max_len); // tokens before it are not read
  const ids = ids_all.slice(first); // (T,)
  const [logits, cache] = forward(state.model.params, ids, state.model.use_positions, EXACT); // (T, V)
  const losses = ids.map((id, t) => (t === 0 ? null : -log_softmax(logits[t - 1])[id])); // (T,) nats
  return { ids_all, first, ids, tokens: ids_all.map((i) => state.tok.vocab[i]), logits, cache, losses };
}

/** log softmax of one row of logits, with an exact sum. */
function log_softmax(row) {
  const top = Math.max(...row);
  const log_total = Math.log(model.fsum(row.map((z) => Math.exp(z - top))));
  return Array.from(row, (z) => z - top - log_total); // (V,)
}

function render_tokens() {
  const text = $("text").value;
  const a = analyse_text(text);
  const where = $("token-where");
  if (a.error) {
    say("token-message", `${a.error.message}. The panels below still show the last text the model could read.`);
    where.textContent = "";
    const mark = document.createElement("mark");
    mark.textContent = a.error.ch;
    where.append(text.slice(0, a.error.index), mark, text.slice(a.error.index + a.error.ch.length));
    where.hidden = false;
    return state.text !== null; // keep the last readable text in the other panels
  }
  where.hidden = true;
  const L = state.model.config.max_len;
  if (!text) {
    say("token-message", "The box is empty: the model reads only the newline that starts every story. The panels show what it expects a story to start with.", "note");
  } else if (a.first > 0) {
    say("token-message", `The text is ${a.ids_all.length - 1} tokens, ${a.ids_all.length} with the newline the model reads first; the model has ${L} positions, so it reads the last ${L}, as sample.py does. The greyed chips are not read.`, "note");
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
    const chip = document.createElement("button");
    chip.type = "button";
    chip.className = `chip${t < 0 ? " unread" : ""}${t === state.selected ? " selected" : ""}`;
    chip.setAttribute("role", "listitem");
    const loss = t > 0 ? a.losses[t] : null;
    chip.title = t < 0 ? "not read: before the model's window" : loss === null ? "read first: nothing before it to predict it from" : `loss ${loss.toFixed(3)} nats (p = ${Math.exp(-loss).toFixed(3)})`;
    chip.setAttribute("aria-label", `token ${i}, ${JSON.stringify(a.tokens[i])}, ID ${id}${loss === null ? "" : `, loss ${loss.toFixed(2)} nats`}`);
    chip.dataset.position = t;
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = show_token(a.tokens[i]);
    const idl = document.createElement("span");
    idl.className = "id";
    idl.textContent = id;
    const bar = document.createElement("span");
    bar.className = "loss";
    if (loss !== null) bar.style.background = surprise(loss);
    chip.append(text, idl, bar);
    if (t >= 0) {
      chip.addEventListener("click", () => select_position(t, true)); // the chips are redrawn: keep the focus
      chip.addEventListener("keydown", (e) => {
        const step = { ArrowLeft: -1, ArrowRight: 1, Home: -Infinity, End: Infinity }[e.key];
        if (step === undefined) return;
        e.preventDefault();
        select_position(Math.min(a.ids.length - 1, Math.max(0, t + step)), true);
      });
    }
    chips.append(chip);
  });
}

function select_position(t, focus = false) {
  state.selected = t;
  draw_chips();
  render_next();
  render_attention();
  if (focus) document.querySelector(`#chips .chip[data-position="${t}"]`)?.focus();
}

function render_next() {
  const a = state.text;
  const t = state.selected;
  const logp = log_softmax(a.logits[t]);
  const ranked = logp.map((lp, id) => [lp, id]).sort((x, y) => y[0] - x[0] || x[1] - y[1]);
  const next = t + 1 < a.ids.length ? a.ids[t + 1] : null;
  $("next-caption").textContent = `After position ${t} (${JSON.stringify(show_token(state.tok.vocab[a.ids[t]]))}), the 10 most likely next tokens:`;
  const list = $("next-list");
  list.textContent = "";
  for (const [lp, id] of ranked.slice(0, 10)) {
    const li = document.createElement("li");
    if (id === next) li.className = "actual";
    const bar = document.createElement("span");
    bar.className = "bar";
    bar.style.width = `${Math.max(1, Math.round(Math.exp(lp) * 160))}px`;
    li.append(`${JSON.stringify(show_token(state.tok.vocab[id])).padEnd(10)}`, bar, `${(Math.exp(lp) * 100).toFixed(1)}%`);
    list.append(li);
  }
  if (next !== null && !ranked.slice(0, 10).some(([, id]) => id === next)) {
    const rank = ranked.findIndex(([, id]) => id === next) + 1;
    const li = document.createElement("li");
    li.className = "actual";
    li.value = rank;
    li.append(`${JSON.stringify(show_token(state.tok.vocab[next]))} ${(Math.exp(logp[next]) * 100).toFixed(2)}%`);
    list.append(li);
  }
}

// ----------------------------------------------------------------------------------------------------------------
// Attention: every head of every block, and what the row under the mouse reads

function render_attention() {
  const a = state.text;
  const maps = $("attention-maps");
  maps.textContent = "";
  const labels = a.ids.map((id) => show_token(state.tok.vocab[id]));
  a.cache.blocks.forEach((block, b) => {
    const heads = [block.att.weights]; // (T, T) per head; one head today
    heads.forEach((weights, h) => {
      const figure = document.createElement("figure");
      const caption = document.createElement("figcaption");
      caption.textContent = `block ${b + 1} of ${a.cache.blocks.length}, head ${h + 1} of ${heads.length}: rows read, columns are read`;
      const canvas = document.createElement("canvas");
      canvas.tabIndex = 0;
      canvas.setAttribute("role", "img");
      canvas.setAttribute("aria-label", `attention weights of block ${b + 1}, head ${h + 1}, ${weights.length} by ${weights.length}; arrow keys move the row`);
      canvas.dataset.rows = weights.length;
      figure.append(caption, canvas);
      maps.append(figure);
      const grid = heatmap(canvas, weights, { labels, color: blues, mask: (i, j) => j > i, highlight: state.hover ?? state.selected });
      canvas.addEventListener("mousemove", (e) => {
        const cell = grid.cell_at(e);
        if (cell && cell.row !== state.hover) {
          state.hover = cell.row;
          show_reads(weights, cell.row);
        }
      });
      canvas.addEventListener("mouseleave", () => {
        state.hover = null;
        show_reads(weights, state.selected);
      });
      canvas.addEventListener("keydown", (e) => {
        const step = { ArrowUp: -1, ArrowDown: 1 }[e.key];
        if (step === undefined) return;
        e.preventDefault();
        select_position(Math.min(a.ids.length - 1, Math.max(0, state.selected + step)));
        maps.querySelector("canvas")?.focus();
      });
    });
  });
  show_reads(a.cache.blocks[0].att.weights, state.hover ?? state.selected);
}

/** The readout under the heatmap: what position i reads, largest weights first. */
function show_reads(weights, i) {
  const a = state.text;
  if (i === null || i >= weights.length) return;
  const reads = Array.from(weights[i].subarray(0, i + 1), (w, j) => [w, j]).sort((x, y) => y[0] - x[0]).slice(0, 8);
  const name = (j) => `${j} ${JSON.stringify(show_token(state.tok.vocab[a.ids[j]]))}`;
  $("attention-readout").textContent = `Position ${name(i)} reads: ${reads.map(([w, j]) => `${name(j)} ${w.toFixed(3)}`).join(" · ")}`;
}

// ----------------------------------------------------------------------------------------------------------------
// Word order: the trace's two sentences, with and without positions

function render_order() {
  const texts = [$("order-a").value, $("order-b").value];
  const use_positions = $("order-positions").checked;
  const L = state.model.config.max_len;
  const ids = [];
  for (const [n, text] of texts.entries()) {
    const bad = state.tok.unknown(text);
    const problem = bad ? bad.message : !text ? "it is empty" : null;
    if (problem) return order_problem(`Sentence ${"AB"[n]}: ${problem}.`);
    ids.push(state.tok.encode(text));
    if (ids[n].length > L) return order_problem(`Sentence ${"AB"[n]} is ${ids[n].length} tokens, longer than the ${L} positions the model has.`);
  }
  const gaps = trace_block.position_gaps(state.model.params, ids[0], ids[1], use_positions);
  const same_tokens = [...ids[0]].sort().join() === [...ids[1]].sort().join();
  if (ids[0].length !== ids[1].length) {
    say("order-message", `The sentences are ${ids[0].length} and ${ids[1].length} tokens: their last positions do not line up, so there is no last-position gap. The chart compares the positions they share.`, "note");
    $("order-gap").textContent = "–";
  } else {
    say("order-message", same_tokens ? "" : "These are not the same tokens in another order, so the last positions can differ even without positions.", "note");
    const gap = gaps.at(-1);
    $("order-gap").textContent = format_number(gap);
    $("order-gap").dataset.value = String(gap);
    $("order-gap-note").textContent = gap === 0
      ? "bit-identical logits: without positions the last token sees the same set of tokens either way"
      : use_positions ? "the positions tell the two orders apart" : "";
  }
  const labels = ids[0].map((id) => show_token(state.tok.vocab[id]));
  line_chart($("order-chart"), {
    series: [{ points: gaps.map((g, t) => [t, g]), color: "#1f5fbf", dots: true, label: `gap, positions ${use_positions ? "on" : "off"}` }],
    x_max: Math.max(1, gaps.length - 1),
    y_max: Math.max(1e-12, ...gaps) * 1.1,
    x_label: "position",
    height: 170,
  });
  $("order-gaps").textContent = gaps.map((g, t) => `${t} ${JSON.stringify(labels[t] ?? "")} ${format_number(g)}`).join(" · ");
}

function order_problem(text) {
  say("order-message", text);
  $("order-gap").textContent = "–";
  $("order-gap-note").textContent = "";
}

// ----------------------------------------------------------------------------------------------------------------
// Inside the block: how much each layer adds to the stream, and how alike the position rows are

function norm(row) {
  return Math.sqrt(EXACT.dot(row, row));
}

function render_inside() {
  const a = state.text;
  const { x0, blocks } = a.cache;
  const diff_norm = (x, y) => x.map((row, t) => norm(row.map((v, j) => v - y[t][j])));
  const series = [{ points: x0.map((row, t) => [t, norm(row)]), color: "#444", label: "|x0|" }];
  const colors = ["#1f5fbf", "#d81b60", "#2e7d32", "#f57c00"];
  blocks.forEach((block, b) => {
    const suffix = blocks.length > 1 ? ` (block ${b + 1})` : "";
    series.push({ points: block.x1.map((row, t) => [t, norm(row)]), color: colors[(2 * b) % 4], label: `|x1|${suffix}` });
    series.push({ points: block.x2.map((row, t) => [t, norm(row)]), color: colors[(2 * b + 1) % 4], label: `|x2|${suffix}` });
    series.push({ points: diff_norm(block.x1, block.x).map((v, t) => [t, v]), color: colors[(2 * b) % 4], dash: [4, 3], label: `attention adds${suffix}` });
    series.push({ points: diff_norm(block.x2, block.x1).map((v, t) => [t, v]), color: colors[(2 * b + 1) % 4], dash: [4, 3], label: `MLP adds${suffix}` });
  });
  const y_max = Math.max(...series.flatMap((s) => s.points.map(([, y]) => y))) * 1.15;
  line_chart($("inside-chart"), { series, x_max: Math.max(1, x0.length - 1), y_max, x_label: "position", height: 230 });

  const pos = state.model.params.pos_emb; // (L, d)
  const norms = pos.map(norm); // (L,)
  const cos = pos.map((r, i) => pos.map((s, j) => EXACT.dot(r, s) / (norms[i] * norms[j]))); // (L, L)
  heatmap($("position-similarity"), cos, { color: diverging, max_cell: 5 });
}

// ----------------------------------------------------------------------------------------------------------------
// Sample: the next-token panel in a loop, token by token

/** An integer field's value, or an Error naming the field, the bad value and what is allowed. */
function read_int(id, label, low, high) {
  const raw = $(id).value.trim();
  const v = Number(raw);
  if (raw === "" || !Number.isInteger(v) || v < low || v > high) throw new Error(`${label} is ${JSON.stringify(raw)}; expected a whole number from ${low} to ${high}`);
  return v;
}

function read_number(id, label, ok, expected) {
  const raw = $(id).value.trim();
  const v = Number(raw);
  if (raw === "" || !Number.isFinite(v) || !ok(v)) throw new Error(`${label} is ${JSON.stringify(raw)}; expected ${expected}`);
  return v;
}

async function run_sample() {
  say("sample-message", "");
  let settings;
  try {
    settings = {
      temperature: read_number("sample-temperature", "Temperature", (v) => v >= 0, "0 (greedy) or a positive number"),
      top_k: read_int("sample-top-k", "Top-k", 0, state.model.config.vocab),
      seed: read_int("sample-seed", "Seed", 0, 2 ** 32 - 1),
      tokens: read_int("sample-tokens", "Tokens", 1, 1000),
    };
    const prompt = $("sample-prompt").value;
    const bad = state.tok.unknown(prompt);
    if (bad) throw new Error(`Prompt: ${bad.message}`);
    settings.prompt = prompt;
  } catch (e) {
    return say("sample-message", `${e.message}.`);
  }
  const { params, use_positions, config } = state.model; // the weights of this moment, even if training goes on
  const rng = new random.Random(settings.seed);
  const context = [...start_ids(), ...state.tok.encode(settings.prompt)];
  if (!context.length) return say("sample-message", "The prompt is empty, and this text has no newline to start after: type a prompt.");
  const ids = [...context];
  const out = $("sample-out");
  out.dataset.done = "false";
  state.sampling = { stop: false };
  $("sample-go").disabled = true;
  $("sample-stop").disabled = false;
  for (let n = 0; n < settings.tokens && !state.sampling.stop; n++) {
    const window_ids = ids.slice(-config.max_len); // (<= L,) the model has max_len positions: the most recent ones
    const [logits] = forward(params, window_ids, use_positions, EXACT); // (T, V)
    ids.push(sample.choose(logits.at(-1), settings.temperature, settings.top_k, rng));
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

function get_worker() {
  if (!state.worker) {
    state.worker = new Worker(new URL("worker.js", import.meta.url), { type: "module" });
    state.worker.onmessage = (e) => on_worker_message(e.data);
    state.worker.onerror = (e) => {
      e.preventDefault();
      training_failed(`the training worker failed (${e.message || "it could not start: worker.js did not load or threw"})`);
      state.worker?.terminate();
      state.worker = null;
    };
    state.worker.onmessageerror = () => training_failed("a message from the training worker could not be read");
  }
  return state.worker;
}

/** A run that failed (the worker broke, or the loss stopped being finite): back to the weights before it. */
function training_failed(why) {
  if (state.before_run) state.model = state.before_run;
  say("train-message", `Training stopped: ${why}. The model is back to the weights it had before this run; the other panels still work.`);
  end_training();
}

function start_training() {
  say("train-message", "");
  let settings, seed;
  try {
    const lr = read_number("train-lr", "Learning rate", (v) => v > 0, "a positive number");
    const steps = read_int("train-steps", "Steps", 1, 1e6);
    settings = {
      ...train.DEFAULTS,
      batch: read_int("train-batch", "Batch", 1, 256),
      steps,
      lr,
      seq_len: Math.min(train.DEFAULTS.seq_len, state.model.config.max_len), // a model with fewer positions: shorter windows
      min_lr: lr / 10, // as train.py's defaults, 0.01 -> 0.001
      warmup: Math.min(train.DEFAULTS.warmup, steps),
      eval_every: Math.min(train.DEFAULTS.eval_every, steps),
    };
    seed = read_int("train-seed", "Seed", 0, 2 ** 32 - 1);
  } catch (e) {
    return say("train-message", `${e.message}.`);
  }
  const from_loaded = document.querySelector('input[name="train-from"]:checked').value === "loaded";
  settings.use_positions = from_loaded ? state.model.use_positions : $("train-positions").checked;
  state.run_id += 1;
  state.training = { id: state.run_id, settings, seed, from_loaded, losses: [], vals: [], step: 0, paused: false, tokens_per_s: null, last_render: 0 };
  const { config } = state.model;
  try {
    get_worker().postMessage({ type: "start", run: state.run_id, params: from_loaded ? checkpoint.flat_tensors(state.model.params) : null, config, seed, settings, data: state.data });
  } catch (e) {
    return training_failed(e.message);
  }
  state.before_run = state.model;
  state.model = { ...state.model, trained: true, use_positions: settings.use_positions, step: 0, val_loss: null, source: from_loaded ? `Training in this page from the loaded weights` : `Training in this page from fresh weights (seed ${seed})` };
  $("train-start").textContent = "Restart";
  $("train-pause").disabled = false;
  $("train-pause").textContent = "Pause";
  $("train-stop").disabled = false;
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
    follow_weights();
  } else if (msg.type === "done") {
    run.done = true;
    end_training();
  } else if (msg.type === "failed") {
    training_failed(msg.message);
  }
  draw_training();
}

/** Redraw the panels with the newest weights, at most about twice a second. */
function follow_weights() {
  const now = performance.now();
  if (now - (state.training?.last_render ?? 0) < 400) return;
  if (state.training) state.training.last_render = now;
  render_all();
}

function draw_training() {
  const run = state.training ?? { settings: { steps: Number($("train-steps").value) || train.DEFAULTS.steps }, losses: [], vals: [], step: 0, idle: true };
  const s = run.settings;
  const last = run.losses.slice(-20);
  const recent = last.length ? last.reduce((t, [, l]) => t + l, 0) / last.length : null;
  const val = run.vals.at(-1);
  $("train-status").textContent = run.idle ? `Not trained in this page yet. ${floor_words(4).replace(/^./, (c) => c.toUpperCase())}${state.manifest.val_floor === null ? "" : " nats/token"}.` : [
    `step ${run.step} of ${s.steps}`,
    recent === null ? null : `train ${recent.toFixed(4)} (mean of the last ${last.length} steps)`,
    val ? `val ${val[1].toFixed(4)} at step ${val[0]}` : null,
    floor_words(4),
    run.tokens_per_s ? `${Math.round(run.tokens_per_s).toLocaleString("en")} tokens/s` : null,
    run.done ? "done" : run.paused ? "paused" : null,
  ].filter(Boolean).join(" | ");
  const canvas = $("train-chart");
  canvas.dataset.points = line_chart(canvas, {
    series: [
      { points: run.losses.map(([step, l]) => [step, l]), color: "#9bb7e0", width: 1, label: "train (each step)" },
      { points: run.vals.map(([step, v]) => [step, v]), color: "#d81b60", dots: true, width: 2, label: "validation" },
    ],
    hlines: state.manifest.val_floor === null ? [] : [{ y: state.manifest.val_floor, color: "#2e7d32", label: floor_words(3) }],
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
// Check: the finite-difference gradient check of the tiny copy, tensor by tensor

async function run_check(backward_fn = model.backward) {
  const { d, hidden, max_len, seed } = trace_block.TINY;
  const tiny = model.init_params(state.model.config.vocab, d, hidden, max_len, seed);
  const ids = Array.from(state.data.stream.subarray(0, max_len + 1)); // the first story, as trace_block.py checks it
  const x = ids.slice(0, max_len);
  const y = ids.slice(1, max_len + 1);
  const table = $("check-table");
  const body = table.querySelector("tbody");
  body.textContent = "";
  table.hidden = false;
  $("check-go").disabled = true;
  const results = {};
  let worst = 0;
  const started = performance.now();
  for (const [name, shape, err] of trace_block.gradient_errors_by_tensor(tiny, x, y, backward_fn)) {
    results[name] = err;
    worst = Math.max(worst, err);
    const row = document.createElement("tr");
    const ok = err < 1e-7;
    for (const [text, cls] of [[name, ""], [`(${shape.join(", ")})`, ""], [err.toExponential(3), "num"], [ok ? "OK" : "NOT OK", ok ? "ok" : "bad"]]) {
      const td = document.createElement("td");
      td.textContent = text;
      td.className = cls;
      row.append(td);
    }
    body.append(row);
    $("check-status").textContent = `checked ${Object.keys(results).length} of 18 tensors…`;
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  const n = model.count_params(tiny);
  $("check-status").textContent = `${n.toLocaleString("en")} numbers checked in ${((performance.now() - started) / 1000).toFixed(1)} s: worst error ${worst.toExponential(3)}, ${worst < 1e-7 ? "below 1e-7: the backward pass agrees with the slopes" : "NOT below 1e-7: the backward pass is wrong"}.`;
  $("check-status").dataset.worst = String(worst);
  $("check-go").disabled = false;
  return results;
}

// ----------------------------------------------------------------------------------------------------------------
// Wiring and drawing everything

function render_all() {
  if (!state.model) return;
  const readable = guarded("token-message", render_tokens);
  if (readable) {
    guarded("token-message", render_next);
    guarded("token-message", render_attention);
    guarded("token-message", render_inside);
  }
  guarded("order-message", render_order);
  draw_training();
}

let pending = null;

/** Call fn at the next frame, once however many times it was asked for. */
function soon(fn) {
  if (pending) return;
  pending = requestAnimationFrame(() => {
    pending = null;
    fn();
  });
}

function wire_controls() {
  $("text").addEventListener("input", () => soon(render_all));
  for (const id of ["order-a", "order-b", "order-positions"]) $(id).addEventListener("input", () => soon(() => guarded("order-message", render_order)));
  $("weights-file").addEventListener("change", (e) => {
    const file = e.target.files[0];
    e.target.value = ""; // so that choosing the same file again is a change too
    if (file) load_weights_file(file);
  });
  $("download").addEventListener("click", () => download_weights().catch((e) => say("load-message", `Could not make the file: ${e.message}`)));
  $("sample-go").addEventListener("click", () => run_sample().catch((e) => say("sample-message", `Sampling failed: ${e.message}`)));
  $("sample-stop").addEventListener("click", () => state.sampling && (state.sampling.stop = true));
  $("train-start").addEventListener("click", start_training);
  $("train-pause").addEventListener("click", toggle_pause);
  $("train-stop").addEventListener("click", stop_training);
  $("check-go").addEventListener("click", () => run_check().catch((e) => say("check-status", `The check failed: ${e.message}`)));
  let resize = null;
  window.addEventListener("resize", () => {
    clearTimeout(resize);
    resize = setTimeout(render_all, 150);
  });
}

window.addEventListener("error", (e) => say("page-message", `Something went wrong: ${e.message}. The rest of the page still works.`));
window.addEventListener("unhandledrejection", (e) => say("page-message", `Something went wrong: ${e.reason?.message ?? e.reason}. The rest of the page still works.`));

// for the tests and for anyone curious: the modules and the state, from the browser's console
window.explorer = { modules: { bpe, checkpoint, model, random, sample, train, trace_block }, state, run_check, render_all };
load();
