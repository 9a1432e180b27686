// experiments.js: the page's two experiments, "second block" (induction.js) and "positions" (positions.js), each a
// few models trained live from fresh weights, one worker.js each: docs/explorer.md, "The experiments".

import { blues, heatmap, line_chart } from "./draw.js";
import * as induction from "./induction.js";
import { SCHEMES, model_config, rows_of } from "./model.js";
import * as positions from "./positions.js";
import * as train from "./train.js";
import { $, add_figure, read_int, read_number, read_or_say, say, soon, table_row } from "./ui.js";

// the second-block experiment's settings (what they show: docs/explorer.md, "What a second block buys")
export const DEPTH = { blocks: [1, 2], heads: 1, d: 16, hidden: 64, steps: 800, batch: 32, lr: 0.005, seed: 3,
  eval_every: 25, test_count: 100 };
const PASS = 0.9; // the copy accuracy that counts as copying
// the positions experiment's settings (docs/explorer.md, "Past the positions it trained on")
export const POSITIONS = { schemes: SCHEMES, steps: 1000, batch: 8, lr: 0.01, seed: 3, eval_every: 250 };
const SCHEME_COLORS = { learned: "#1f5fbf", none: "#444", sinusoidal: "#f57c00", rope: "#d81b60" };
const BLOCK_COLORS = { 1: "#f57c00", 2: "#1f5fbf" };

// the live (or last) run of each experiment, for the page and the tests
export const runs = { depth: null, positions: null };
let page = null; // {tok, split, data, manifest}: what page.js loaded
const pending = new Map(); // soon's frames
const DRAW = { depth: draw_depth, positions: draw_positions }; // each panel's drawing

/** Draw the two panels' fields and buttons from index.html's template, and a column of the second-block panel for
 * each of its models (page.js calls this first). */
export function draw_panels() {
  for (const name of ["depth", "positions"]) {
    const fields = $("experiment-fields").content.cloneNode(true);
    for (const el of fields.querySelectorAll("[data-id]")) el.id = `${name}-${el.dataset.id}`;
    $(`${name}-fields`).replaceWith(fields);
  }
  $("depth-model").replaceWith(...DEPTH.blocks.map((blocks) => {
    const column = $("depth-model").cloneNode(true);
    column.id = `depth-model-${blocks}`;
    column.querySelector("h3").textContent = `${blocks} block${blocks > 1 ? "s" : ""}`;
    return column;
  }));
}

/** Wire the two panels to the page's data (page.js calls this once it has loaded). */
export function setup(loaded) {
  page = loaded;
  for (const [name, defaults, start] of [["depth", DEPTH, start_depth], ["positions", POSITIONS, start_positions]]) {
    for (const key of ["steps", "batch", "lr", "seed"]) $(`${name}-${key}`).value = defaults[key];
    $(`${name}-start`).addEventListener("click", start);
    $(`${name}-stop`).addEventListener("click", () => stop(name));
  }
  redraw();
}

/** Draw both panels again (after a resize). */
export function redraw() {
  for (const draw of Object.values(DRAW)) draw();
}

// ----------------------------------------------------------------------------------------------------------------
// Runs: a worker per model

/** A worker of worker.js, the `what` of the page's messages: on_message gets its messages, on_fail a sentence when
 * it breaks (a "failed" message, or a worker that could not start). */
export function new_worker(what, on_message, on_fail) {
  const worker = new Worker(new URL("worker.js", import.meta.url), { type: "module" });
  worker.onmessage = (e) => (e.data.type === "failed" ? on_fail(e.data.message) : on_message(e.data));
  worker.onerror = (e) => {
    e.preventDefault();
    on_fail(`the ${what} failed (${e.message || "it could not start"})`);
  };
  worker.onmessageerror = () => on_fail(`a message from the ${what} could not be read`);
  return worker;
}

/** A worker that trains one model (each experiment's models, the lessons' and the Train panel's run): on_message
 * gets its messages, on_fail a sentence when it breaks. */
export function start_worker(start, on_message, on_fail) {
  const worker = new_worker("training worker", on_message, on_fail);
  worker.postMessage({ type: "start", run: 1, follow: false, ...start });
  return worker;
}

/** The settings of a run of the model of config: train.py's schedule (manifest.json's "training") with these steps,
 * batch and peak rate (ending at a tenth of it), a validation loss every eval_every steps (at most steps; train.js's
 * DEFAULTS unless given), windows no longer than the model's positions, and the scheme, blocks and heads the run
 * records. */
export function settings_of({ steps, batch, lr, eval_every = train.DEFAULTS.eval_every }, config) {
  const { positions, blocks, heads } = config, defaults = page.manifest.training;
  const warmup = Math.min(defaults.warmup, steps);
  const seq_len = Math.min(train.DEFAULTS.seq_len, config.max_len); // fewer positions: shorter windows
  return { ...defaults, ...train.DEFAULTS, steps, batch, lr, min_lr: lr / 10, warmup, seq_len,
    eval_every: Math.min(eval_every, steps), positions, blocks, heads };
}

/** A panel's Start: its fields read (or the message of the first that is wrong, and nothing started), its last run
 * stopped, its Stop button the one enabled, and a run of its models, one worker each: models(fields) gives each
 * model's [m, its worker's start], m.what naming it in a message; the run holds more too. Each evaluation
 * goes to on_eval(run, m, msg). */
function start_run(name, more, models, on_eval) {
  const fields = read_or_say(`${name}-message`, () => ({
    steps: read_int(`${name}-steps`, "Steps", 1, 100000),
    batch: read_int(`${name}-batch`, "Batch", 1, 256),
    lr: read_number(`${name}-lr`, "Learning rate", (v) => v > 0 && v < 1, "a number between 0 and 1"),
    seed: read_int(`${name}-seed`, "Seed", 0, 2 ** 32 - 1),
  }));
  if (!fields) return;
  stop(name);
  $(`${name}-start`).disabled = true;
  $(`${name}-stop`).disabled = false;
  const run = { fields, started: performance.now(), ended: false, models: [], ...more };
  runs[name] = run;
  for (const [m, start] of models(fields)) {
    m.worker = start_worker({ params: null, seed: fields.seed, ...start }, (msg) => on_message(name, run, m, msg,
      on_eval), (why) => {
      say(`${name}-message`, `the ${m.what} model: ${why}. The experiment stops; the rest of the page still works.`);
      stop(name);
    });
    run.models.push(m);
  }
  DRAW[name]();
}

/** A message of model m's worker: its step, its evaluations (on_eval), its end; the run ends when every model is
 * done. */
function on_message(name, run, m, msg, on_eval) {
  if (run !== runs[name]) return; // a message of a run that was stopped or restarted
  m.step = msg.step;
  if (msg.type === "progress") m.tokens_per_s = msg.tokens_per_s;
  else if (msg.type === "eval") on_eval(run, m, msg);
  else if (msg.type === "done") m.done = true;
  if (run.models.every((x) => x.done)) stop(name);
  soon(pending, name, DRAW[name]);
}

function stop(name) {
  const run = runs[name];
  if (!run) return;
  for (const m of run.models) {
    m.worker.terminate();
    if (!m.done) m.stopped = true;
  }
  run.ended = true;
  $(`${name}-start`).disabled = false;
  $(`${name}-stop`).disabled = true;
  redraw();
}

// ----------------------------------------------------------------------------------------------------------------
// The second block: one block and two on periodic sequences

function start_depth() {
  start_run("depth", { passed: null }, (fields) => DEPTH.blocks.map((blocks) => {
    const config = depth_config(blocks);
    const settings = settings_of({ ...fields, eval_every: DEPTH.eval_every }, config);
    return [{ blocks, what: `${blocks}-block`, step: 0, evals: [], latest: null, done: false, tokens_per_s: null },
      { task: "induction", config, settings, data: { test_count: DEPTH.test_count } }];
  }), on_depth_eval);
}

/** The experiment's model with this many blocks (learned positions), as the second-block lesson trains it too. */
export function depth_config(blocks) {
  return model_config({ vocab: induction.VOCAB, d: DEPTH.d, hidden: DEPTH.hidden, max_len: induction.WINDOW, blocks,
    heads: DEPTH.heads });
}

/** The series model of train.py's defaults (width 16, 64 hidden, 64 positions) with these positions, as the
 * positions experiment and the trained lessons train it. */
export function series_config(vocab, positions = "learned") {
  return model_config({ vocab, d: 16, hidden: 64, max_len: 64, positions });
}

function on_depth_eval(run, m, msg) {
  m.latest = msg;
  m.evals.push([msg.step, msg.measures.copy_accuracy, msg.measures.copy_loss, msg.seconds]);
  if (m.blocks === 2 && run.passed === null && msg.measures.copy_accuracy >= PASS) {
    run.passed = { step: msg.step, seconds: (performance.now() - run.started) / 1000, one_block: null };
  }
  // one block's accuracy at the step two blocks passed (null until it is measured there), not at its latest: the
  // two workers run at their own pace
  if (run.passed && run.passed.one_block === null) {
    const one = run.models.find((x) => x.blocks === 1);
    run.passed.one_block = one.evals.find((e) => e[0] === run.passed.step)?.[1] ?? null;
  }
}

function draw_depth() {
  const run = runs.depth;
  const steps = run ? run.fields.steps : DEPTH.steps;
  const models = run ? run.models : [];
  const series = (column) => models.map((m) => ({ points: m.evals.map((e) => [e[0], e[column]]),
    color: BLOCK_COLORS[m.blocks], width: 2, label: `${m.blocks} block${m.blocks > 1 ? "s" : ""}` }));
  const hlines = [{ y: PASS, color: "#2e7d32", label: "90%" }, { y: 0.4, color: "#999", label: "40%" }];
  line_chart($("depth-chart"), { series: series(1), hlines, x_max: steps, y_max: 1, x_label: "step", height: 200 });
  const top = Math.max(Math.log(induction.VOCAB), ...models.flatMap((m) => m.evals.map((e) => e[2])));
  line_chart($("depth-loss-chart"), { series: series(2), x_max: steps, y_max: top * 1.05, x_label: "step",
    height: 160 });
  $("depth-summary").textContent = depth_summary(run);
  for (const blocks of DEPTH.blocks) draw_depth_model(models.find((m) => m.blocks === blocks), blocks);
}

/** The line above the charts: the step at which two blocks passed PASS, and one block's accuracy at that same step.
 *
 *     depth_summary(null)   // "Not run yet." */
function depth_summary(run) {
  if (!run) return "Not run yet.";
  if (!run.passed) return run.ended ? `Stopped before two blocks passed ${PASS * 100}%.` : "Training…";
  const { step, seconds, one_block } = run.passed;
  const passed = `Two blocks passed ${PASS * 100}% copy accuracy at step ${step}, ${seconds.toFixed(1)} s after Start`;
  if (one_block !== null) return `${passed}, while one block was at ${(100 * one_block).toFixed(1)}% at that step.`;
  return `${passed}; one block ${run.ended ? "stopped before" : "has not yet reached"} step ${step}.`;
}

/** One model's column: its status, every head's attention on the first test sequence, and the heads' scores. */
function draw_depth_model(m, blocks) {
  const box = $(`depth-model-${blocks}`);
  const status = box.querySelector(".status");
  const maps = box.querySelector(".maps");
  const table = box.querySelector("tbody");
  if (!m || !m.latest) {
    status.textContent = m ? "starting…" : "";
    maps.textContent = "";
    table.textContent = "";
    return;
  }
  const { measures, weights, period } = m.latest;
  status.textContent = [
    `step ${m.step}`,
    `copy accuracy ${(100 * measures.copy_accuracy).toFixed(1)}%`,
    `copy loss ${measures.copy_loss.toFixed(3)} nats`,
    `first period ${measures.first_period_loss.toFixed(3)} nats`,
    m.tokens_per_s ? `${Math.round(m.tokens_per_s).toLocaleString("en")} tokens/s` : null,
    m.done ? "done" : m.stopped ? "stopped" : null,
  ].filter(Boolean).join(" | ");
  maps.textContent = "";
  table.textContent = "";
  weights.forEach((block, b) => block.forEach((w, h) => {
    const canvas = add_figure(maps, `block ${b + 1}, head ${h + 1}`,
      `attention of block ${b + 1}, head ${h + 1} on a test sequence of period ${period}`);
    heatmap(canvas, rows_of(w), { color: (v) => blues(Math.sqrt(v)), mask: (i, j) => j > i, max_cell: 3 });
    const { induction: ind, previous_token: prev } = measures.scores[b][h];
    table.append(table_row([[`${b + 1}`, ""], [`${h + 1}`, ""], [ind.toFixed(2), ind > 0.5 ? "num strong" : "num"],
      [prev.toFixed(2), prev > 0.5 ? "num strong" : "num"]]));
  }));
}

// ----------------------------------------------------------------------------------------------------------------
// Positions: the four schemes on the stories, and the loss past position 64

function start_positions() {
  const long = positions.windows(positions.validation_stream(page.tok, page.split), positions.WINDOW);
  start_run("positions", { windows: long.inputs.length }, (fields) => POSITIONS.schemes.map((scheme) => {
    const config = series_config(page.tok.vocab.length, scheme);
    const settings = settings_of({ ...fields, eval_every: POSITIONS.eval_every }, config);
    return [{ scheme, what: scheme, step: 0, vals: [], by_position: null, done: false },
      { task: "stories", config, settings, data: { ...page.data, long } }];
  }), (run, m, msg) => {
    m.vals.push([msg.step, msg.val]);
    m.by_position = msg.by_position;
  });
}

function draw_positions() {
  const run = runs.positions;
  const models = run ? run.models : [];
  const by_position = models.filter((m) => m.by_position).map((m) => ({
    points: m.by_position.losses.map((l, t) => [t, l]), color: SCHEME_COLORS[m.scheme], width: 2, label: m.scheme }));
  const top = Math.max(2, ...models.flatMap((m) => m.by_position?.losses ?? []));
  line_chart($("positions-chart"), { series: by_position,
    vlines: [{ x: 64, color: "#2e7d32", label: "64: the positions trained on" }], x_max: positions.WINDOW - 1,
    y_max: Math.min(6, top * 1.05), x_label: "position in a 128-token window of held-out text", height: 220 });
  const vals = models.map((m) => ({ points: m.vals, color: SCHEME_COLORS[m.scheme], dots: true, width: 2,
    label: m.scheme }));
  line_chart($("positions-val-chart"), { series: vals, x_max: run ? run.fields.steps : POSITIONS.steps,
    y_max: Math.log(page?.tok.vocab.length ?? 96) + 0.3, x_label: "step", height: 160 });
  const body = $("positions-table").querySelector("tbody");
  body.textContent = "";
  for (const m of models) {
    const losses = m.by_position?.losses ?? [];
    const inside = positions.mean_loss(losses, 32, 64), past = positions.mean_loss(losses, 64, 128);
    body.append(table_row([
      [m.scheme, ""],
      [`${m.step}${m.done ? "" : "…"}`, "num"],
      [m.vals.length ? m.vals.at(-1)[1].toFixed(3) : "", "num"],
      [inside === null ? "" : inside.toFixed(3), "num"],
      [past === null ? (m.by_position?.refusal ? "cannot read them" : "") : past.toFixed(3), "num"],
    ]));
  }
  const refusal = models.find((m) => m.by_position?.refusal)?.by_position.refusal;
  $("positions-note").textContent = !run ? "Not run yet." : [
    `${run.windows} windows of ${positions.WINDOW} tokens of held-out text.`,
    refusal ? `learned has no row past 63: the model refuses the whole window ("${refusal}"), so its line stops at 63.`
      : null,
    run.ended ? null : "Training…",
  ].filter(Boolean).join(" ");
}
