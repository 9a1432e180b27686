// lessons.js: the lab's lessons, "predict, then check", in the page (docs/explorer.md, "The lessons: predict, then
// check", says what is the export's and what the page computes live). Progress is kept in localStorage (STORE).
//
//     fill("ln {vocab} = {ln_vocab:.4f}", { vocab: 96, ln_vocab: Math.log(96) })   // "ln 96 = 4.5643"
//     judge_of(["Within", 0.05, 0.5])(4.52, { value: 4.56 })                      // "right"
//
// Shape legend as in model.js: T positions, d width, V vocabulary, L learned positions.

import { py_repr } from "./bpe.js";
import { DEPTH, depth_config, series_config, settings_of, start_worker } from "./experiments.js";
import * as model from "./model.js";
import { EXACT, SCHEMES, forward, fsum, model_config } from "./model.js";
import * as positions from "./positions.js";
import * as trace_block from "./trace_block.js";
import * as train from "./train.js";
import { $, element, fetch_file, say } from "./ui.js";

export const STORE = "oneblock-lessons-v1"; // the localStorage key of the learner's progress
export const VERDICTS = ["right", "close", "off"]; // what a judge says
const DATA = "data/lessons.json"; // the export's words (oneblock/export.py's lessons_data)
const FORMAT = "one-block explorer lessons v7"; // its "format" field
const MOST_BYTES = 1 << 18; // bytes of it read, at most (it is about 15 KB): a larger file is refused unread
const MOST_TEXT = 4000; // characters of one of its words, at most
const MOST_LINES = 64; // lines of an answer (the scaling answer's, the templates of one), at most

/** Whether t is a text of at most MOST_TEXT characters: one of the export's words. */
function is_text(t) {
  return typeof t === "string" && t.length <= MOST_TEXT;
}

/** Whether list is a list of at most MOST_LINES items, each one that line says is a line (is_text unless said). */
function is_lines(list, line = is_text) {
  return Array.isArray(list) && list.length <= MOST_LINES && list.every(line);
}
// ----------------------------------------------------------------------------------------------------------------
// Numbers written as Python's format specs and repr write them (the answers' lines read as the terminal's)

/** x formatted as Python's format(x, spec) for the specs the lessons use: "g", ".Ng", ".Nf", ".Ne", "+.Ne", "+.Nf",
 * and "Nd" for an integer, each with an optional width (fixed-point for |x| below 1e21, as JavaScript's toFixed
 * writes it).
 *
 *     py_format(0.000659043, ".7g"), py_format(1.49e-7, ".2e"), py_format(0.01, ".0e")   // "0.000659043", "1.49e-07",
 *     // "1e-02" */
export function py_format(x, spec) {
  const m = /^(\+?)(\d*)(?:\.(\d+))?([gefd])$/.exec(spec);
  if (!m || (m[4] === "d" && (m[3] !== undefined || !Number.isInteger(x)))) {
    throw new Error(`format spec ${JSON.stringify(spec)}: expected g, .Ng, .Nf or .Ne, with an optional + and width,`
      + " or Nd for an integer");
  }
  const [, plus, width, digits, kind] = m;
  return plain(x, plus, digits, kind).padStart(Number(width || 0));
}

/** py_format without the width. */
function plain(x, plus, digits, kind) {
  const sign = (text) => (plus && !text.startsWith("-") ? "+" + text : text);
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return sign(x > 0 ? "inf" : "-inf");
  const exp_form = (text) => text.replace(/e([+-])(\d)$/, "e$10$2"); // Python's exponent has at least two digits
  let p = digits === undefined ? 6 : Number(digits);
  if (kind === "d") return sign(String(x));
  if (kind === "f") return sign(half_even(x, p, "toFixed"));
  if (kind === "e") return sign(exp_form(half_even(x, p, "toExponential")));
  p = Math.max(p, 1);
  if (x === 0) return sign(Object.is(x, -0) ? "-0" : "0");
  const e = Number(half_even(x, p - 1, "toExponential").split("e")[1]);
  const strip = (text) => (text.includes(".") ? text.replace(/\.?0+$/, "") : text);
  if (e >= -4 && e < p) return sign(strip(half_even(x, p - 1 - e, "toFixed")));
  const [mantissa, exponent] = half_even(x, p - 1, "toExponential").split("e");
  return sign(exp_form(`${strip(mantissa)}e${exponent}`));
}

/** x.toFixed(digits) or x.toExponential(digits) (method, by its name), but an exact tie rounded to the even digit,
 * as Python rounds it (JavaScript rounds a tie away from zero): 2.5e16 to no digits after the point is "2e+16". */
function half_even(x, digits, method) {
  if (method === "toFixed" && Math.abs(x) >= 1e21) return x.toFixed(digits);
  const [exact, exponent] = Math.abs(x)[method](100).split("e"); // (exact for any number the lessons show)
  const point = exact.indexOf(".");
  const kept = exact.slice(0, point + 1 + digits).replace(/\.$/, "");
  if (!/^50*$/.test(exact.slice(point + 1 + digits)) || Number(kept.at(-1)) % 2) return x[method](digits);
  return `${x < 0 ? "-" : ""}${kept}${exponent === undefined ? "" : `e${exponent}`}`;
}

/** x as Python's repr writes it: the shortest digits that read back as it, in e-notation below 1e-4 and from 1e16
 * on, else with a decimal point.
 *
 *     [16, 1e-5, 1e16, 0.1, NaN].map(float_repr)   // ["16.0", "1e-05", "1e+16", "0.1", "nan"] */
function float_repr(x) {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mantissa, exponent] = Math.abs(x).toExponential().split("e"); // the shortest digits: "1.5e+300"
  const sign = x < 0 ? "-" : "", digits = mantissa.replace(".", ""), e = Number(exponent);
  if (e < -4 || e >= 16) {
    const point = digits.length > 1 ? `.${digits.slice(1)}` : "";
    return `${sign}${digits[0]}${point}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  if (e < 0) return `${sign}0.${"0".repeat(-e - 1)}${digits}`;
  return `${sign}${digits.slice(0, e + 1).padEnd(e + 1, "0")}.${digits.slice(e + 1) || "0"}`;
}

/** A template of the export's words with its slots filled, as Python's str.format fills them: "{name}" or
 * "{name:spec}" (a spec py_format writes), "{{" and "}}" for a brace. A slot the page has no value for is an
 * Error that names it.
 *
 *     fill("{steps} steps of {batch} windows", { steps: 600, batch: 16 })   // "600 steps of 16 windows" */
export function fill(template, values) {
  return template.replace(/\{\{|\}\}|\{(\w+)(?::([^{}]*))?\}/g, (slot, name, spec) => {
    if (slot === "{{" || slot === "}}") return slot[0];
    if (!Object.hasOwn(values, name)) throw new Error(`the words name {${name}}, which the page has no value for`);
    return spec === undefined ? String(values[name]) : py_format(values[name], spec);
  });
}

/** The lines of an answer's templates, as lessons.fill_lines fills them ({each, cases}: lessons.each's). */
export function fill_lines(templates, slots) {
  return templates.flatMap((template) => {
    if (typeof template === "string") return [fill(template, slots)];
    const cases = template.cases, names = Object.keys(cases);
    return slots[template.each].map((item) => {
      const name = names.length > 1 ? item.case : names[0];
      if (!Object.hasOwn(cases, name)) throw new Error(`the words have no line for ${py_repr(String(name))}`);
      return fill(cases[name], { ...slots, ...item });
    });
  });
}

// ----------------------------------------------------------------------------------------------------------------
// Guesses: what the learner types, read and checked as oneblock/lessons.py reads them

const FLOAT = /^[+-]?(?:(?:\d(?:_?\d)*)?\.\d(?:_?\d)*|\d(?:_?\d)*\.?)(?:[eE][+-]?\d(?:_?\d)*)?$/; // Python's float()
const NOT_FINITE = /^[+-]?(?:inf|infinity|nan)$/i;

/** A finite number from text, or an Error that names it, as lessons.number. */
export function number(text) {
  const t = text.trim();
  if (NOT_FINITE.test(t)) throw new Error(`${py_repr(t)} is not a finite number`);
  if (!FLOAT.test(t)) throw new Error(`${py_repr(t)} is not a number`);
  return Number(t.replaceAll("_", ""));
}

/** lessons.parse_guess of a lesson's words ({guess, describe}: its kind, and what to type in words): a pair is a
 * list, and a bad input an Error of its message. */
export function parse_guess({ guess, describe }, text) {
  text = text.trim();
  const kind = guess[0];
  if (kind === "number") return number(text);
  if (kind === "range" || kind === "pair") {
    const parts = text.replaceAll(",", " ").split(/\s+/).filter(Boolean);
    if (parts.length !== 2) {
      throw new Error(`${py_repr(text)} is ${parts.length} number${parts.length !== 1 ? "s" : ""}; expected`
        + ` ${describe}`);
    }
    const [low, high] = [number(parts[0]), number(parts[1])];
    if (kind === "range" && low > high) {
      throw new Error(`${py_repr(text)}: low ${py_format(low, "g")} is above high ${py_format(high, "g")}; expected`
        + ` ${describe}`);
    }
    return [low, high];
  }
  const choices = guess[1]; // a choice (checked_lessons refuses any other kind as the page loads)
  if (/^\d+$/.test(text) && Number(text) >= 1 && Number(text) <= choices.length) return choices[Number(text) - 1];
  const found = choices.find((choice) => choice.toLowerCase() === text.toLowerCase());
  if (found !== undefined) return found;
  throw new Error(`${py_repr(text)} is not one of the choices; expected 1 to ${choices.length}, or the words of one`);
}

/** A guess or an answer as a learner reads it, as lessons.show (a number 0 as Python's float 0.0). */
export function show(value) {
  if (Array.isArray(value)) return value.map(show).join(" and ");
  if (typeof value === "number") return value === 0 ? "0.0" : py_format(value, ".7g");
  return String(value);
}

// ----------------------------------------------------------------------------------------------------------------
// Judges: how near a guess is to the answer, by the judge and the numbers the export names (the rule, in words, is
// the export's). Each is the judge of that name of oneblock/lessons.py (SchemesOff: experiments/lessons_trained.py),
// whose docstrings say the rules, as a function (guess, answer) -> "right", "close" or "off".

/** lessons.Within. */
export function Within(right, close) {
  return (guess, answer) => {
    const miss = Math.abs(guess - answer.value);
    return miss <= right ? "right" : miss <= close ? "close" : "off";
  };
}

/** lessons.Factor. */
export function Factor(right, close, zero_close = 1e-9) {
  return (guess, answer) => {
    const value = answer.value;
    if (value === 0) return guess === 0 ? "right" : Math.abs(guess) < zero_close ? "close" : "off";
    if (guess <= 0 || value < 0) return "off";
    const ratio = Math.max(guess / value, value / guess);
    return ratio <= right ? "right" : ratio <= close ? "close" : "off";
  };
}

/** lessons.InRange. */
export function InRange(width, near) {
  return ([low, high], answer) => {
    const value = answer.value;
    if (low <= value && value <= high) return high - low <= width ? "right" : "close";
    return Math.min(Math.abs(value - low), Math.abs(value - high)) <= near ? "close" : "off";
  };
}

/** lessons.Pair, of two judges. */
export function Pair(first, second) {
  return (guess, answer) => {
    const verdicts = [first, second].map((j, i) => j(guess[i], { value: answer.value[i] })).sort();
    const key = verdicts.join(" ");
    return key === "right right" ? "right" : key === "close right" ? "close" : "off";
  };
}

/** lessons.Exactly. */
export function Exactly(off_by_one = false) {
  return (guess, answer) => {
    if (guess === answer.value) return "right";
    if (off_by_one && typeof guess === "number" && Math.abs(guess - answer.value) === 1) return "close";
    return "off";
  };
}

/** lessons_trained.SchemesOff, of its spec's sets ({choice: [schemes]}). */
export function SchemesOff(sets) {
  return (guess, answer) => {
    if (guess === answer.value) return "right";
    if (!Object.hasOwn(sets, guess) || !Object.hasOwn(sets, answer.value)) return "off";
    const a = sets[guess], b = sets[answer.value];
    const differ = a.filter((s) => !b.includes(s)).length + b.filter((s) => !a.includes(s)).length;
    return differ === 1 ? "close" : "off";
  };
}

const JUDGES = { Within, Factor, InRange, Pair, Exactly, SchemesOff };

/** The judge an export names, [name, ...its numbers] (oneblock/lessons.py's judge.spec; a Pair's two are specs
 * too), or an Error that names it.
 *
 *     judge_of(["Pair", ["Factor", 3, 10, 1e-9], ["Factor", 3, 10, 1e-9]])([0, 0.001], { value: [0, 0.00066] })
 *     // "right" */
export function judge_of(spec) {
  const [name, ...args] = Array.isArray(spec) ? spec : [];
  if (!Object.hasOwn(JUDGES, name)) {
    throw new Error(`judge ${JSON.stringify(spec).slice(0, 80)}: expected one of ${Object.keys(JUDGES).join(", ")}`);
  }
  return JUDGES[name](...(name === "Pair" ? args.map(judge_of) : args));
}

// ----------------------------------------------------------------------------------------------------------------
// The lab: what every answer reads (the page's current weights, its tokenizer and its data)

/** A lesson this page cannot answer (a model model.py does not run, a text that is not the stories): the export's
 * reason of that name (lessons.SKIPS), in the page's names (lessons.PAGE_NAMES) and with the lesson's slots. */
function skip(lab, reason, slots = {}) {
  const e = new Error(fill(lab.words.skips[reason], { ...lab.words.names, ...slots }));
  e.name = "Skip";
  return e;
}

/** The page's weights in a few words, as lessons.weights says them, in the export's names. */
export function weights(lab) {
  const m = lab.model, { names } = lab.words;
  return m.trained ? fill(names.weights, { source: m.source.replace(/^./, (c) => c.toLowerCase()), step: m.step })
    : names.seed_weights;
}

/** [params, config] for model.js as model.py would run them, or a Skip, as lessons.reference. */
function reference(lab) {
  const { params, config } = lab.model;
  const problem = model.seed_problem(config);
  if (problem) throw skip(lab, "not-model-py", { problem });
  return [params, config];
}

/** Whether the page's text is the stories (not a text of one's own, whose tokenizer is its own). */
function stories(lab) {
  return lab.split.text === undefined;
}

/** The token IDs of text, or a Skip when the page's tokenizer cannot read it. */
function encode(lab, text, what) {
  try {
    return lab.tok.encode(text);
  } catch (e) {
    throw skip(lab, "unreadable", { what, error: e.message });
  }
}

/** Token IDs as the pieces of text they stand for, each quoted so that its spaces show. */
function pieces(lab, ids) {
  return ids.map((i) => py_repr(lab.tok.vocab[i])).join(" | ");
}

/** The token IDs of the corpus's first story (and its newline), cut to the model's positions plus one. */
function first_story(lab) {
  if (!stories(lab)) throw skip(lab, "not-stories", { text: lab.manifest.text });
  return encode(lab, lab.split.train[0] + "\n", "the corpus's first story").slice(0, lab.model.config.max_len + 1);
}

/** lessons.story_pass: {params, config, x, y, logits, cache, loss, dlogits}, model.py on the first story (its
 * first `tokens` predicting the next, or all of it). */
function story_pass(lab, tokens = null) {
  const [params, config] = reference(lab);
  const ids = first_story(lab).slice(0, tokens === null ? undefined : tokens + 1);
  const x = ids.slice(0, -1), y = ids.slice(1); // (T,), (T,)
  const [logits, cache] = forward(params, x, config, EXACT); // (T, V)
  const [loss, dlogits] = model.loss_and_dlogits(logits, y, EXACT); // (T, V)
  return { params, config, x, y, logits, cache, loss, dlogits };
}

/** The population variance of a row, as one exact-rounded sum (lessons.row_variance). */
export function row_variance(row) {
  const mean = fsum(row) / row.length;
  return fsum(Array.from(row, (v) => (v - mean) ** 2)) / row.length;
}

/** The mean variance of a stream's rows (T, d) after a layer norm of gain 1 and bias 0, one exact sum each. */
function normed_variance(stream) {
  const d = stream.cols;
  const [out] = model.layernorm_forward(stream, new Float64Array(d).fill(1.0), new Float64Array(d), EXACT); // (T, d)
  return fsum(model.rows_of(out).map(row_variance)) / out.rows;
}

/** Every number of a matrix times factor, in a new matrix. */
function scaled(m, factor) {
  return { rows: m.rows, cols: m.cols, data: m.data.map((v) => v * factor) };
}

// ----------------------------------------------------------------------------------------------------------------
// 1. tokens: how many pieces is " garden"?

function tokens_answer(lab, report, { numbers: { word: WORD, kite: KITE } }) {
  const tok = lab.tok;
  const ids = encode(lab, WORD, py_repr(WORD));
  const first = tok.alphabet.length; // the first merge's token
  const made = ids.map((i) => (i < first ? { case: "character", piece: py_repr(tok.vocab[i]) }
    : { case: "merge", piece: py_repr(tok.vocab[i]), rank: i - first + 1, left: py_repr(tok.merges[i - first][0]),
      right: py_repr(tok.merges[i - first][1]) }));
  const count = (text) => lab.split.train.concat(lab.split.val).reduce((n, s) => n + s.split(text).length - 1, 0);
  return {
    value: ids.length,
    slots: { word: py_repr(WORD), count: ids.length, pieces: pieces(lab, ids), ids: ids.join(", "), made,
      characters: tok.alphabet.length, merges: tok.merges.length, vocab: tok.vocab.length, kite: py_repr(KITE),
      counts: stories(lab) ? [{ word_count: count(WORD), kite_count: count(KITE) }] : [] },
  };
}

// ----------------------------------------------------------------------------------------------------------------
// 2. init-loss: the loss before training, against ln 96

function init_loss_answer(lab) {
  const { config, y, logits, loss } = story_pass(lab);
  const uniform = Math.log(config.vocab);
  const spread = Math.sqrt(row_variance(logits.data)); // over every logit
  return {
    value: loss,
    slots: { loss, tokens: y.length, weights: weights(lab), vocab: config.vocab, uniform, gap: loss - uniform,
      spread },
  };
}

// ----------------------------------------------------------------------------------------------------------------
// 3. layernorm-variance: the output's variance with tiny embeddings

function layernorm_answer(lab, report, { numbers: { smaller: SMALLER } }) {
  const { cache } = story_pass(lab);
  const out = model.rows_of(cache.blocks[0].ln1.xhat).map(row_variance); // (T,) layer norm's rows before the gain
  const before = model.rows_of(cache.x0).map(row_variance); // (T,)
  const mean_out = fsum(out) / out.length, mean_before = fsum(before) / before.length;
  const mean_tiny = normed_variance(scaled(cache.x0, SMALLER));
  return {
    value: mean_out,
    slots: { mean_out, positions: out.length, low: Math.min(...out), high: Math.max(...out), mean_before,
      eps: model.EPS, kept: mean_before / (mean_before + model.EPS), times: 1 / SMALLER, mean_tiny },
  };
}

// ----------------------------------------------------------------------------------------------------------------
// 4. order: the seed's order test, both halves

function order_answer(lab) {
  const { a: sentence_a, b: sentence_b } = lab.manifest.order; // the trace's: the same tokens, two names swapped
  const [params, config] = reference(lab);
  if (config.positions === "none") throw skip(lab, "no-positions");
  const a = encode(lab, sentence_a, py_repr(sentence_a)), b = encode(lab, sentence_b, py_repr(sentence_b));
  if ([...a].sort().join() !== [...b].sort().join()) throw skip(lab, "cut-apart");
  const slots = { a: py_repr(sentence_a), a_pieces: pieces(lab, a), b: py_repr(sentence_b), b_pieces: pieces(lab, b) };
  const gaps = [];
  for (const [use, name] of [[false, "without"], [true, "with"]]) {
    const c = use ? config : model.checked(model_config({ ...config, positions: "none" })); // use_positions=False
    const each = trace_block.position_gaps(params, a, b, c); // (T,)
    gaps.push(each.at(-1));
    slots[`gap_${name}`] = float_repr(each.at(-1));
    slots[`each_${name}`] = each.map((gap) => py_format(gap, ".3g")).join(", ");
  }
  return { value: gaps, slots };
}

// ----------------------------------------------------------------------------------------------------------------
// 5. causality: change one token, which positions' scores move?

function causality_answer(lab, report, { guess: [, choices], numbers: { T: CAUSAL_T, k: CAUSAL_K } }) {
  const [params, config] = reference(lab);
  const ids = first_story(lab).slice(0, CAUSAL_T); // (T,)
  if (ids.length <= CAUSAL_K) throw skip(lab, "short", { tokens: ids.length });
  const changed = [...ids];
  changed[CAUSAL_K] = (ids[CAUSAL_K] + 1) % config.vocab;
  const gaps = trace_block.position_gaps(params, ids, changed, config); // (T,) each position's largest logit change
  const moved = ids.flatMap((_, t) => (gaps[t] > 0 ? [t] : []));
  const range = (from, to) => Array.from({ length: to - from }, (_, i) => from + i).join();
  const value = { [range(0, ids.length)]: choices[0], [range(CAUSAL_K, ids.length)]: choices[1],
    [String(CAUSAL_K)]: choices[2], [range(0, CAUSAL_K)]: choices[3] }[moved.join()]
    ?? `positions [${moved.join(", ")}]`;
  const tok = lab.tok;
  const at = ids.map((_, t) => (moved.includes(t) ? { case: "moved", t, gap: gaps[t] } : { case: "same", t }));
  return { value,
    slots: { T: ids.length, pieces: pieces(lab, ids), k: CAUSAL_K, before: py_repr(tok.vocab[ids[CAUSAL_K]]),
      after: py_repr(tok.vocab[changed[CAUSAL_K]]), at } };
}

// ----------------------------------------------------------------------------------------------------------------
// 6. finite-difference: the error of a central difference against the step

const ROUND = 2 ** -52; // the gap between 1.0 and the next float

function finite_difference_answer(lab, report, { guess: [, choices], numbers: { T: FD_T, steps: STEPS } }) {
  const { params, config, x, y, cache, loss, dlogits } = story_pass(lab, FD_T);
  const j = y[0]; // W_out[0][j]: row 0 of W_out (d, V) is its first V numbers
  const grad = model.backward(params, cache, dlogits, EXACT).W_out.data[j];
  const errors = [], at = [];
  for (const h of STEPS) {
    const central = trace_block.central_difference(params, params.W_out.data, j, h, x, y, config);
    errors.push(Math.abs(central - grad));
    at.push({ h, central, error: errors.at(-1) });
  }
  const third = (6 * errors[0]) / STEPS[0] ** 2; // |L'''| read off the largest step, where truncation rules
  const best = third > 0 ? ((3 * ROUND * Math.abs(loss)) / third) ** (1 / 3) : NaN;
  const least = Math.min(...errors); // the errors' shape, largest step first, as lessons.error_shape reads it
  const falls = errors[0] > 10 * least, rises = errors.at(-1) > 10 * least;
  return {
    value: choices[falls && rises ? 1 : falls ? 0 : rises ? 3 : 2],
    errors,
    slots: { j, weights: weights(lab), loss, T: FD_T, grad, at, third, round: ROUND * Math.abs(loss), best,
      least: STEPS[errors.indexOf(least)] },
  };
}

// ----------------------------------------------------------------------------------------------------------------
// Shared by the lessons on the block's parts: a size, and the gradient at the end of the stream

/** The size of a matrix: the root of the sum of its entries' squares, one exact sum (lessons.size). */
function size(m) {
  return Math.sqrt(fsum(Array.from(m.data, (v) => v * v)));
}

/** dx2 (T, d): the gradient at the stream's end, below the final layer norm (lessons.stream_gradient). */
function stream_gradient(params, cache, dlogits) {
  const dhf = model.matmul_bt(dlogits, params.W_out, EXACT); // (T, d)
  return model.layernorm_backward(dhf, params.lnf_g, cache.lnf, EXACT)[0]; // (T, d)
}

/** dpre (T, H): the gradient at the MLP's pre-activations, passed where the input was positive
 * (lessons.relu_gradient). */
function relu_gradient(block, c, dx2) {
  const dact = model.matmul_bt(dx2, block.W2, EXACT); // (T, H)
  const dpre = model.matrix(dact.rows, dact.cols); // (T, H)
  dpre.data.forEach((_, i) => { dpre.data[i] = c.pre.data[i] > 0.0 ? dact.data[i] : 0.0; });
  return dpre;
}

// ----------------------------------------------------------------------------------------------------------------
// 7. pre-norm: scale the stream, what does attention see?

/** Attention's output (T, d) on the stream, through the block's first layer norm or not (lessons.attention_on). */
function attention_on(block, config, stream, norm) {
  const h = norm ? model.layernorm_forward(stream, block.ln1_g, block.ln1_b, EXACT)[0] : stream; // (T, d)
  return model.attention_forward(block, h, config, EXACT)[0]; // (T, d)
}

function pre_norm_answer(lab, report, { numbers: { scale: SCALE } }) {
  const { params, config, cache } = story_pass(lab);
  const block = model.block_params(params, 0);
  const x0 = cache.x0; // (T, d)
  const big = scaled(x0, SCALE); // (T, d)
  const a = attention_on(block, config, x0, true), a_big = attention_on(block, config, big, true); // (T, d)
  const ratio = size(a_big) / size(a);
  const raw = size(attention_on(block, config, big, false)) / size(attention_on(block, config, x0, false));
  const x1 = size(model.add(big, a_big)) / size(model.add(x0, a));
  return {
    value: ratio,
    slots: { small: size(a), large: size(a_big), scale: SCALE, ratio, var_small: normed_variance(x0),
      var_large: normed_variance(big), x1, raw },
  };
}

// ----------------------------------------------------------------------------------------------------------------
// 8. relu-mlp: how many hidden units are zero, and what is their gradient?

function relu_answer(lab) {
  const { params, cache, dlogits } = story_pass(lab);
  const block = model.block_params(params, 0), c = cache.blocks[0];
  const dpre = relu_gradient(block, c, stream_gradient(params, cache, dlogits)); // (T, H)
  const { rows: T, cols: H } = c.pre, n = T * H;
  const off = c.pre.data.filter((z) => z <= 0.0).length;
  const still = dpre.data.filter((g) => g === 0.0).length;
  const columns = Array.from({ length: H }, (_, j) => Array.from({ length: T }, (_, t) => c.pre.data[t * H + j]));
  const never = columns.filter((col) => col.every((z) => z <= 0.0)).length;
  const always = columns.filter((col) => col.every((z) => z > 0.0)).length;
  return {
    value: [off / n, still / n],
    slots: { T, H, n, weights: weights(lab), off, off_share: off / n, never, always, still, still_share: still / n },
  };
}

// ----------------------------------------------------------------------------------------------------------------
// 9. softmax-gradient: the loss's gradient at the right token's score

function softmax_gradient_answer(lab) {
  const { y, logits, dlogits } = story_pass(lab);
  const T = y.length, V = logits.cols, target = y[0];
  const row = Array.from(dlogits.data.subarray(0, V)); // (V,)
  const first = Array.from(logits.data.subarray(0, V)); // (V,)
  const top = Math.max(...first);
  const e = first.map((z) => Math.exp(z - top)); // (V,)
  const p = e[target] / fsum(e);
  const loss_at = (z) => {
    const changed = { rows: logits.rows, cols: V, data: Float64Array.from(logits.data) }; // (T, V)
    changed.data[target] = z;
    return model.loss_and_dlogits(changed, y, EXACT)[0];
  };
  const z = first[target];
  const central = (loss_at(z + trace_block.STEP) - loss_at(z - trace_block.STEP)) / (2 * trace_block.STEP);
  const others = row.flatMap((v, j) => (j === target ? [] : [T * v]));
  return {
    value: T * row[target],
    slots: { piece: py_repr(lab.tok.vocab[target]), target, p, weights: weights(lab), V, uniform: 1 / V, T,
      gradient: row[target], scaled: T * row[target], low: Math.min(...others), high: Math.max(...others),
      total: fsum(row), h: trace_block.STEP, central: T * central },
  };
}

// ----------------------------------------------------------------------------------------------------------------
// 10. skip-paths: what reaches the embeddings without them?

/** The gradient at x0 (T, d) from dx2 (T, d), back through the MLP and attention without their skip paths
 * (lessons.sublayers_backward with skips false; with them, it is model.block_backward's). */
function sublayers_backward(block, c, dx2) {
  const dpre = relu_gradient(block, c, dx2); // (T, H)
  const dh2 = model.matmul_bt(dpre, block.W1, EXACT); // (T, d)
  const dx1 = model.layernorm_backward(dh2, block.ln2_g, c.ln2, EXACT)[0]; // (T, d) through the MLP
  const dh1 = model.attention_backward(block, c.att, dx1, EXACT)[1]; // (T, d)
  return model.layernorm_backward(dh1, block.ln1_g, c.ln1, EXACT)[0]; // (T, d) through attention
}

function skip_paths_answer(lab) {
  const { params, cache, dlogits } = story_pass(lab);
  const block = model.block_params(params, 0), c = cache.blocks[0];
  const dx2 = stream_gradient(params, cache, dlogits); // (T, d)
  const both = size(model.block_backward(block, c, dx2, EXACT)[1]), neither = size(sublayers_backward(block, c, dx2));
  return {
    value: neither / both,
    slots: { end: size(dx2), weights: weights(lab), both, neither, ratio: neither / both },
  };
}

// ----------------------------------------------------------------------------------------------------------------
// Training in the page's worker (worker.js), one worker a model, as experiments.js and the Train panel do

const workers = new Map(); // worker -> its run's reject: the lessons' workers training now (stop_training ends them)

/** Train models from fresh weights side by side, a worker each (experiments.js's start_worker), with the run s (a
 * lesson's, as lab.trained_settings gives it) in train.py's settings (experiments.js's settings_of): models are
 * [name, {task, config, data}] pairs (as worker.js starts them). Resolves with [{evals, seconds}] in their order,
 * evals a model's worker.js "eval" messages and seconds from the start of all; report gets one line for them all
 * ("name steps, ... of total steps"), the share done and the message. */
function train_side_by_side(models, s, report) {
  const { steps: total, batch, lr, eval_every = total } = s;
  const steps = Object.fromEntries(models.map(([name]) => [name, 0]));
  const started = performance.now();
  return Promise.all(models.map(([name, model]) => new Promise((resolve, reject) => {
    const settings = settings_of({ steps: total, batch, lr, eval_every }, model.config);
    const start = { ...model, params: null, seed: s.seed, settings };
    const evals = [];
    const end = (settle, value) => {
      worker.terminate();
      workers.delete(worker);
      settle(value);
    };
    const worker = start_worker(start, (msg) => {
      if (msg.type === "eval") evals.push(msg);
      if (msg.type === "progress" || msg.type === "eval") {
        steps[name] = msg.step;
        const done = Object.values(steps).reduce((a, b) => a + b, 0) / (models.length * total);
        report(Object.entries(steps).map(([n, k]) => `${n} ${k}`).join(", ") + ` of ${total} steps`, done, msg);
      } else if (msg.type === "done") {
        end(resolve, { evals, seconds: (performance.now() - started) / 1000 });
      }
    }, (why) => end(reject, new Error(why)));
    workers.set(worker, reject);
  })));
}

/** End every lesson's training now: each run's answer is an Error that says so. */
export function stop_training() {
  for (const [worker, reject] of workers) {
    worker.terminate();
    reject(new Error("its training was stopped"));
  }
  workers.clear();
}

// ----------------------------------------------------------------------------------------------------------------
// 11. floor: can training go below the entropy floor?

async function floor_answer(lab, report, { guess: [, [yes, no]], trains }) {
  if (!stories(lab)) throw skip(lab, "not-stories", { text: lab.manifest.text });
  const s = lab.trained_settings(trains); // lessons_trained's FLOOR_RUN
  const config = model.checked(series_config(lab.tok.vocab.length));
  const [{ evals, seconds }] = await train_side_by_side([["the run", { task: "stories", config, data: lab.data }]], s,
    (line, done, msg) => report(msg.type === "eval" ? `validation loss ${msg.val.toFixed(4)} at step ${msg.step}`
      : line + (msg.losses?.length ? `, training loss ${msg.losses.at(-1)[1].toFixed(3)}` : ""), done));
  const val = evals.at(-1).val, floor = lab.manifest.val_floor, gap = val - floor;
  const m = lab.model;
  const fits = m.config.positions !== "learned" || m.config.max_len >= Math.max(...lab.data.val_ids.map((ids) =>
    ids.length - 1));
  const page = fits ? train.story_nats(m.params, lab.data.val_ids, m.config) / lab.data.val_tokens : null;
  return {
    value: gap > 0 ? no : yes,
    slots: { corpus_floor: lab.manifest.floor, stories: lab.data.val_ids.length, val_floor: floor, steps: s.steps,
      seconds, val_loss: val, gap: Math.abs(gap), side: gap > 0 ? "above" : "below", weights: weights(lab),
      page: [fits ? { case: "measured", loss: page, over: page - floor }
        : { case: "short", max_len: m.config.max_len }] },
    steps: s.steps, val_loss: val, val_floor: floor, gap, page_val_loss: page,
  };
}

// ----------------------------------------------------------------------------------------------------------------
// 12. positions-past-length: what each scheme does at position 100

/** {case: "refused", refused, within} or {case: "reads", before, after, at}: a loss_by_position result read as
 * lessons_trained.reads_past reads it. */
function reads_past({ losses, refusal }, { trained, past }) {
  const mean = (from, to) => positions.mean_loss(losses, from, to);
  if (refusal !== null) return { case: "refused", refused: refusal, within: mean() };
  return { case: "reads", before: mean(0, trained), after: mean(trained), at: losses[past] };
}

async function past_length_answer(lab, report, { spec: [, sets], trains, numbers,
  numbers: { trained: TRAINED_LEN, past: PAST_POSITION } }) {
  if (!stories(lab)) throw skip(lab, "not-stories", { text: lab.manifest.text });
  const s = lab.trained_settings(trains); // lessons_trained's PAST_RUN
  const long = positions.windows(positions.validation_stream(lab.tok, lab.split), PAST_POSITION + 1); // (n, 101)
  const runs = await train_side_by_side(SCHEMES.map((scheme) => [scheme, { task: "stories",
    config: model.checked(series_config(lab.tok.vocab.length, scheme)), data: { ...lab.data, long } }]), s, report);
  const seconds = Math.max(...runs.map((run) => run.seconds));
  const got = Object.fromEntries(SCHEMES.map((scheme, i) => [scheme, reads_past(runs[i].evals.at(-1).by_position,
    numbers)]));
  const m = lab.model;
  const page = reads_past(positions.loss_by_position(m.params, m.config, long.inputs, long.targets), numbers);
  // the choice of the schemes that read position past, as lessons_trained.scheme_choice finds it in the judge's sets
  const reads = SCHEMES.filter((scheme) => !("refused" in got[scheme])).sort().join();
  const choice = Object.entries(sets).find(([, schemes]) => [...schemes].sort().join() === reads);
  const named = SCHEMES.map((scheme) => ({ name: scheme, ...got[scheme] }));
  return { value: choice ? choice[0] : `these: ${reads.replaceAll(",", ", ")}`,
    slots: { windows: long.inputs.length, length: PAST_POSITION + 1, steps: s.steps, trained: TRAINED_LEN, seconds,
      last: TRAINED_LEN - 1, past: PAST_POSITION, weights: weights(lab), positions: m.config.positions, page: [page],
      runs: named, within: named.filter((run) => "refused" in run) },
    runs: got };
}

// ----------------------------------------------------------------------------------------------------------------
// 13. second-block: one block against two on the copying task

// the page's second-block experiment's settings (experiments.js DEPTH)
const COPY = { steps: DEPTH.steps, batch: DEPTH.batch, lr: DEPTH.lr, seed: DEPTH.seed };

async function second_block_answer(lab, report, { guess: [, choices], numbers: { margin: COPY_MARGIN } }) {
  const s = lab.trained_settings(COPY);
  const runs = await train_side_by_side(DEPTH.blocks.map((blocks) => [ // (DEPTH.blocks: one, then two)
    blocks === 1 ? "one block" : "two blocks",
    { task: "induction", config: model.checked(depth_config(blocks)), data: { test_count: DEPTH.test_count } },
  ]), s, report);
  const seconds = Math.max(...runs.map((run) => run.seconds));
  const [one, two] = runs.map((run) => run.evals.at(-1).measures);
  const models = [one, two].map((m, i) => ({ case: ["one", "two"][i], accuracy: 100 * m.copy_accuracy,
    copy_loss: m.copy_loss, first_period_loss: m.first_period_loss, seconds: runs[i].seconds }));
  const gain = two.copy_accuracy - one.copy_accuracy; // read as lessons_trained.copy_choice reads it
  return { value: choices[gain > COPY_MARGIN ? 0 : -gain > COPY_MARGIN ? 2 : 1],
    slots: { sequences: DEPTH.test_count, models, points: 100 * gain, seconds, steps: s.steps, far: 100 * COPY_MARGIN },
    measures: { one, two } };
}

// ----------------------------------------------------------------------------------------------------------------
// 14. scaling: the export's answer, fitted in Python (docs/explorer.md, "The lessons: predict, then check")

/** The scaling lesson's answer as the export computed it (experiments/lessons_scaling.py's scaling_answer), read
 * within bounds ({value, shown: at most MOST_LINES lines, bounds}). */
function scaling_answer(lab) {
  const got = lab.scaling;
  if (!Number.isFinite(got?.value) || !is_lines(got.shown) || !is_text(got.bounds)) {
    throw new Error(`${DATA} holds no scaling answer the page can show (expected a number, at most ${MOST_LINES}`
      + ` lines of at most ${MOST_TEXT} characters, and its bounds); run python3 explore.py again`);
  }
  return { value: got.value, shown: got.shown, bounds: got.bounds };
}

// ----------------------------------------------------------------------------------------------------------------
// The live part of each lesson, by its key (docs/explorer.md, "The lessons: predict, then check"): answer(lab,
// report, words), code ([file, function] pairs), trains ("export": its Python's) and reads.

export const LIVE = {
  tokens: { answer: tokens_answer, code: [["bpe.js", "encode_piece"]], reads: ["word", "kite"] },
  "init-loss": { answer: init_loss_answer, code: [["model.js", "init_params"], ["model.js", "loss_and_dlogits"]] },
  "layernorm-variance": { answer: layernorm_answer, code: [["model.js", "layernorm_forward"]],
    reads: ["smaller"] },
  order: { answer: order_answer, code: [["model.js", "forward"], ["model.js", "attention_forward"]] },
  causality: { answer: causality_answer, code: [["model.js", "attention_forward"]], reads: ["T", "k"] },
  "finite-difference": { answer: finite_difference_answer,
    code: [["model.js", "sequence_loss"], ["trace_block.js", "central_difference"]], reads: ["T", "steps"] },
  "pre-norm": { answer: pre_norm_answer, code: [["model.js", "block_forward"], ["model.js", "layernorm_forward"]],
    reads: ["scale"] },
  "relu-mlp": { answer: relu_answer, code: [["model.js", "block_forward"], ["model.js", "block_backward"]] },
  "softmax-gradient": { answer: softmax_gradient_answer, code: [["model.js", "loss_and_dlogits"]] },
  "skip-paths": { answer: skip_paths_answer, code: [["model.js", "block_backward"]] },
  floor: { answer: floor_answer, code: [["train.js", "train_step"], ["train.js", "story_nats"]], trains: "export" },
  "positions-past-length": { answer: past_length_answer, code: [["model.js", "check_length"],
    ["positions.js", "loss_by_position"]], trains: "export", reads: ["trained", "past"] },
  "second-block": { answer: second_block_answer, code: [["induction.js", "induction_measures"],
    ["model.js", "block_forward"]], trains: COPY, reads: ["margin"] },
  scaling: { answer: scaling_answer, code: [["lessons.js", "scaling_answer"]] },
};

/** The run of a lesson that trains as its Python does (its trains, lessons_trained's FLOOR_RUN or PAST_RUN), or an
 * Error that says it is not a run of train.py's steps, batch, lr and seed within the Train panel's bounds. */
function checked_run(run, key) {
  const count = (k, low, high) => Number.isSafeInteger(run?.[k]) && run[k] >= low && run[k] <= high;
  if (count("steps", 1, 100000) && count("batch", 1, 256) && count("seed", 0, 2 ** 32 - 1) && run.lr > 0
    && run.lr < 1 && (!("eval_every" in run) || count("eval_every", 1, run.steps))) return run;
  throw new Error(`lesson ${key} of ${DATA}: its trains is not a run of train.py's steps, batch, lr and seed (and`
    + " eval_every) within the Train panel's bounds");
}

/** The export's lessons with their live parts, the words filled with the numbers of the page's tokenizer and runs,
 * or an Error that names the first value that is not what the page reads. */
function checked_lessons(data, tok) {
  if (data?.format !== FORMAT || !Array.isArray(data.lessons)) {
    throw new Error(`${DATA} is not the export's lessons (expected JSON of the format ${py_repr(FORMAT)})`);
  }
  return data.lessons.map((words, n) => {
    const text = (name) => {
      if (!is_text(words?.[name])) {
        throw new Error(`lesson ${n + 1} of ${DATA}: its ${name} is not a text of at most ${MOST_TEXT} characters`);
      }
      return words[name];
    };
    const key = text("key");
    if (!Object.hasOwn(LIVE, key)) {
      throw new Error(`${DATA} has a lesson ${py_repr(key)}, which this page cannot answer; expected one of:`
        + ` ${Object.keys(LIVE).join(", ")}`);
    }
    ["title", "question", "explain", "source", "describe", "rule"].forEach(text);
    const [kind, choices] = Array.isArray(words.guess) ? words.guess : [];
    const named = Array.isArray(choices) && choices.every((choice) => typeof choice === "string");
    if (!["number", "range", "pair", "choice"].includes(kind) || (kind === "choice" || kind === "pair") && !named) {
      throw new Error(`lesson ${key} of ${DATA}: guess ${JSON.stringify(words.guess).slice(0, 80)}: expected`
        + " number, range, or pair or choice with its words");
    }
    const lines = (t) => is_text(t) || (is_text(t?.each) && t.cases && typeof t.cases === "object"
      && is_lines(Object.values(t.cases)));
    const { shown, bounds } = words;
    if (!is_lines(shown, lines) || !(bounds === null || is_text(bounds))) {
      throw new Error(`lesson ${key} of ${DATA}: its shown is not a list of at most ${MOST_LINES} texts of at most`
        + ` ${MOST_TEXT} characters (or {each, cases} of such texts), or its bounds is not null or such a text`);
    }
    const live = { trains: null, reads: [], ...LIVE[key] };
    const numbers = words.numbers, number = (v) => Number.isFinite(v) || is_text(v);
    if (!numbers || typeof numbers !== "object" || !Object.values(numbers).every((v) => number(v) || is_lines(v,
      number)) || !live.reads.every((name) => Object.hasOwn(numbers, name))) {
      throw new Error(`lesson ${key} of ${DATA}: its numbers are not numbers, texts or lists of them, with each of:`
        + ` ${live.reads.join(", ") || "(none)"}`);
    }
    if (live.trains === "export") live.trains = checked_run(words.trains, key);
    const vocab = tok.vocab.length; // the page's tokenizer's numbers that the words name (lessons.facts), and its runs'
    const values = { vocab, characters: tok.alphabet.length, merges: tok.merges.length, ln_vocab: Math.log(vocab),
      ...(live.trains ? lab.trained_settings(live.trains) : {}) };
    // an answer whose lines and bounds are the export's templates (lessons.shows), filled with the answer's slots
    const answer = bounds === null ? live.answer : async (...args) => {
      const { slots, ...got } = await live.answer(...args);
      return { ...got, shown: fill_lines(shown, slots), bounds: fill(bounds, slots) };
    };
    return { ...words, ...live, answer, spec: words.judge, judge: judge_of(words.judge),
      question: fill(words.question, values), explain: fill(words.explain, values) };
  });
}

/** The export's words of why a lesson cannot answer, {skips, names} (lessons.SKIPS, the reasons skip names, and
 * lessons.PAGE_NAMES, the page's names for their slots), or an Error that names the first that is not a text. */
function checked_words(data) {
  const needs = { skips: ["not-model-py", "unreadable", "no-positions", "cut-apart", "short", "not-stories"],
    names: ["model", "tokenizer", "to_seed", "weights", "seed_weights"] };
  for (const [part, keys] of Object.entries(needs)) {
    const bad = keys.find((key) => !is_text(data[part]?.[key]));
    if (bad !== undefined) {
      throw new Error(`${DATA}: its ${part} has no text ${py_repr(bad)} of at most ${MOST_TEXT} characters`);
    }
  }
  return { skips: data.skips, names: data.names };
}

/** The lesson of a key, or an Error that names it and every key there is (lessons.by_key). */
export function by_key(key) {
  const lesson = LESSONS.find((l) => l.key === key);
  if (!lesson) throw new Error(`no lesson ${py_repr(key)}; expected one of: ${LESSONS.map((l) => l.key).join(", ")}`);
  return lesson;
}

// ----------------------------------------------------------------------------------------------------------------
// Progress: the learner's guesses and answers, kept in localStorage

/** Whether a kept record is one this page writes: {text, guess, weights, when} and either {skipped} or {value,
 * shown, bounds, verdict, seconds}.
 *
 *     is_record({ text: "4", guess: 4, weights: "w", when: "2026", skipped: "why" }), is_record({ text: "4" })
 *     // true, false */
export function is_record(r) {
  const text = (v) => typeof v === "string";
  if (!r || typeof r !== "object" || !text(r.text) || !text(r.weights) || !text(r.when) || !("guess" in r)) {
    return false;
  }
  if ("skipped" in r) return text(r.skipped);
  return "value" in r && Array.isArray(r.shown) && r.shown.every(text) && text(r.bounds)
    && VERDICTS.includes(r.verdict) && Number.isFinite(r.seconds);
}

/** {key: {text, guess, value, shown, bounds, verdict, skipped, weights, seconds, when}} of the lessons done, the
 * records that are not one this page writes dropped, and the keys of those. */
export function load_progress() {
  let kept;
  try {
    kept = JSON.parse(localStorage.getItem(STORE) ?? "{}");
  } catch {
    return [{}, []]; // storage off, or not ours: start afresh
  }
  if (!kept || typeof kept !== "object" || Array.isArray(kept)) return [{}, []];
  const good = Object.entries(kept).filter(([, record]) => is_record(record));
  return [Object.fromEntries(good), Object.keys(kept).filter((key) => !is_record(kept[key]))];
}
function save_progress(progress) {
  try {
    localStorage.setItem(STORE, JSON.stringify(progress));
  } catch (e) {
    say("lessons-message", `Your progress could not be kept (${e.message}); the lessons still work.`);
  }
}

// ----------------------------------------------------------------------------------------------------------------
// The view: a card a lesson, drawn from LESSONS

export const LESSONS = []; // the export's lessons with their live parts (checked_lessons), in its order
let lab = null; // {model (the page's current model), tok, split, data, manifest, steps, trained_settings, scaling,
// words (checked_words)}
export const last_answers = {}; // key -> the whole answer of the lesson's last Check (for the tests, and the curious)
let progress = {};
let training = null; // the key of the lesson training now
const sources = new Map(); // file -> the served file's text, fetched once

/** Draw the lessons into #lesson-list (page.js awaits this once the data has loaded), with the words of the
 * export's data/lessons.json. page: {tok, split, data, manifest, model() (the model every panel shows now)}. A
 * failure is a message in the lessons' view; the rest of the page works on. */
export async function setup(page) {
  const cut = Number(new URLSearchParams(location.search).get("lesson-steps"));
  const steps = Number.isInteger(cut) && cut > 0 ? cut : null; // the tests' hook: fewer steps
  lab = {
    tok: page.tok, split: page.split, data: page.data, manifest: page.manifest, steps, scaling: null, words: null,
    trained_settings: (live) => (steps === null ? live : { ...live, steps, eval_every: steps }),
    get model() { return page.model(); },
  };
  $("lessons-clear").addEventListener("click", () => {
    stop_training();
    try {
      localStorage.removeItem(STORE);
    } catch {
      // storage off: nothing was kept
    }
    progress = {};
    LESSONS.forEach((lesson, n) => $(`lesson-${lesson.key}`).replaceWith(card(lesson, n)));
    say("lessons-message", "Your guesses and answers are cleared.", "note");
  });
  let data;
  try {
    data = await fetch_file(DATA, "json", MOST_BYTES);
    lab.words = checked_words(data);
    LESSONS.splice(0, LESSONS.length, ...checked_lessons(data, page.tok));
  } catch (e) {
    say("lessons-message", `The lessons could not load: ${e.message}. Run python3 explore.py again, which exports`
      + " them; the rest of the page still works.");
    return;
  }
  lab.scaling = data.scaling;
  let dropped;
  [progress, dropped] = load_progress();
  const list = $("lesson-list");
  list.textContent = "";
  LESSONS.forEach((lesson, n) => list.append(card(lesson, n)));
  const kept = Object.keys(progress).filter((key) => LESSONS.some((l) => l.key === key)).length;
  const notes = [...(kept ? [`Restored ${kept} of your lessons from this browser.`] : []),
    ...(dropped.length ? [`Dropped ${dropped.length} kept record${dropped.length > 1 ? "s" : ""} that this page did`
      + ` not write (${dropped.map((key) => py_repr(key.slice(0, 40))).join(", ")}).`] : [])];
  if (notes.length) say("lessons-message", notes.join(" "), "note");
}

/** One lesson's card: question, guess, Check, and its reveal (kept from before, or made by Check). */
function card(lesson, n) {
  const box = $("lesson-card").content.firstElementChild.cloneNode(true);
  const part = (selector) => box.querySelector(selector);
  box.id = `lesson-${lesson.key}`;
  box.dataset.key = lesson.key;
  part(".title").textContent = `${n + 1}. ${lesson.title}`;
  part(".key").textContent = lesson.key;
  part(".question").textContent = lesson.question; // (its line breaks read as spaces: running text)
  const [form, check, message, status, bar, reveal] = [".guess", ".check", ".message", ".status", "progress",
    ".reveal"].map(part);
  const kind = lesson.guess[0];
  if (lesson.trains) check.textContent = "Check (trains live)";
  let read;
  if (kind === "choice") {
    const group = part(".choices");
    part("label.text").remove();
    lesson.guess[1].forEach((choice, i) => {
      const label = element("label", "inline");
      const radio = element("input");
      Object.assign(radio, { type: "radio", name: `guess-${lesson.key}`, value: String(i + 1) });
      label.append(radio, choice);
      group.append(label);
    });
    read = () => group.querySelector("input:checked")?.value ?? "";
    group.addEventListener("change", () => validate());
  } else {
    const input = part(".guess-text");
    part(".choices").remove();
    part(".describe").textContent = lesson.describe;
    input.placeholder = { number: "e.g. 3", range: "low high", pair: "without with" }[kind];
    read = () => input.value;
    input.addEventListener("input", () => validate());
    input.addEventListener("keydown", (e) => e.key === "Enter" && !check.disabled && check.click());
  }
  if (lesson.trains && lab.steps !== null) {
    Object.assign(part(".steps-note"), { hidden: false, textContent: `The page's address cuts this lesson to`
      + ` ${lab.steps} steps (?lesson-steps=${lab.steps}), as the tests run it; without it the lesson trains`
      + ` ${lesson.trains.steps} steps.` });
  }

  /** Whether the guess as typed parses: Check is enabled only then, and a bad one is named beside it. */
  function validate() {
    const text = read();
    say(message, "");
    check.disabled = true;
    if (!text.trim()) return null;
    try {
      const guess = parse_guess(lesson, text);
      check.disabled = box.dataset.state === "running";
      return guess;
    } catch (e) {
      say(message, `Not a guess yet: ${e.message}${kind === "number" ? "; expected a number" : ""}.`);
      return null;
    }
  }

  /** Show a record's reveal, Check ready to compute it again. */
  function revealed(record, restored) {
    draw_reveal(lesson, box, reveal, record, restored);
    check.textContent = "Check again (the same guess)";
    check.disabled = false;
  }

  /** Lock the guess: it is kept as it was when the answer was computed. */
  function lock(text) {
    for (const input of form.querySelectorAll("input")) {
      input.disabled = true;
      if (input.type === "radio") input.checked = input.value === text.trim();
      else input.value = text;
    }
  }

  check.addEventListener("click", async () => {
    const text = read();
    const guess = validate();
    if (guess === null) return;
    if (lesson.trains && training !== null && training !== lesson.key) {
      return say(message, `The lesson ${training} is training now; Check this one when it is done.`, "note");
    }
    lock(text);
    box.dataset.state = "running";
    check.disabled = true;
    status.textContent = "The page computes the answer, live…";
    if (lesson.trains) {
      training = lesson.key;
      bar.hidden = false;
      bar.value = 0;
    }
    await new Promise((resolve) => setTimeout(resolve, 0)); // let the page say so before the work starts
    const started = performance.now();
    let record;
    try {
      const answer = await lesson.answer(lab, (line, done) => {
        status.textContent = line;
        bar.value = Math.min(1, done ?? bar.value);
      }, lesson);
      last_answers[lesson.key] = answer;
      const { value, shown, bounds } = answer;
      record = { text, guess, value, shown, bounds, verdict: lesson.judge(guess, answer), weights: weights(lab),
        seconds: (performance.now() - started) / 1000, when: new Date().toISOString() };
    } catch (e) {
      if (e.name !== "Skip") {
        status.textContent = "";
        say(message, `The lesson could not compute its answer: ${e.message}. The rest of the page still works.`);
        box.dataset.state = "idle";
        for (const input of form.querySelectorAll("input")) input.disabled = false;
        check.disabled = false;
        return;
      }
      record = { text, guess, skipped: e.message, weights: weights(lab), when: new Date().toISOString() };
    } finally {
      if (training === lesson.key) training = null;
      bar.hidden = true;
    }
    progress[lesson.key] = record;
    save_progress(progress);
    status.textContent = "";
    revealed(record, false);
  });

  const kept = progress[lesson.key];
  if (kept) { // (load_progress kept only the records this page writes)
    lock(kept.text);
    revealed(kept, true);
  }
  return box;
}

/** The reveal: the guess beside the answer, the verdict and its rule, the lines computed, why, and where. */
function draw_reveal(lesson, box, reveal, record, restored) {
  reveal.textContent = "";
  reveal.hidden = false;
  box.dataset.state = record.skipped ? "skipped" : "revealed";
  box.dataset.verdict = record.verdict ?? "";
  if (restored) {
    reveal.append(element("p", "small", `Kept from before (${record.when.slice(0, 16).replace("T", " ")} UTC,`
      + ` ${record.weights}). Check again computes it anew with the page's weights now.`));
  }
  if (record.skipped) {
    reveal.append(element("p", "message", `Your guess: ${show(record.guess)}. Skipped: ${record.skipped}.`));
    return;
  }
  const table = element("dl", "versus");
  table.append(element("dt", "", "Your guess"), element("dd", "guess-value", show(record.guess)),
    element("dt", "", "The answer"), element("dd", "answer-value", show(record.value)));
  table.querySelector(".answer-value").dataset.value = JSON.stringify(record.value);
  const verdict = element("p", `verdict ${record.verdict}`);
  verdict.append(element("strong", "", record.verdict), ` (${lesson.rule})`);
  const seconds = `, in ${record.seconds.toFixed(record.seconds < 1 ? 2 : 1)} s`;
  reveal.append(table, verdict, element("p", "small", `How exact: ${record.bounds}. Computed with`
    + ` ${record.weights}${seconds}.`), element("pre", "shown", record.shown.join("\n")),
  element("p", "explain", lesson.explain), where(lesson));
}

/** Where the lab makes it so (the Python, by file and function), and this page's own lines of it, read from the
 * served files. */
function where(lesson) {
  const box = element("div", "where-code");
  box.append(element("p", "small", `In the lab: ${lesson.source}.`));
  for (const [file, name] of lesson.code) {
    const details = element("details");
    const summary = element("summary");
    const link = Object.assign(element("a", "", file), { href: file, target: "_blank" });
    summary.append("In this page: ", element("code", "", name), " in ", link);
    const pre = element("pre", "code");
    details.append(summary, pre);
    details.addEventListener("toggle", () => {
      if (details.open && !pre.textContent) {
        function_lines(file, name).then(({ from, lines }) => {
          summary.append(`, lines ${from} to ${from + lines.length - 1}`);
          pre.textContent = lines.map((line, i) => `${String(from + i).padStart(4)}  ${line}`).join("\n");
        }).catch((e) => (pre.textContent = e.message));
      }
    });
    box.append(details);
  }
  return box;
}

/** {from (1-based), lines} of the function (or method) name in the served file: from its first line to the brace
 * that closes it at its own indentation. */
export async function function_lines(file, name) {
  if (!sources.has(file)) sources.set(file, (await fetch_file(file, "text")).split("\n"));
  const all = sources.get(file);
  const start = all.findIndex((line) => new RegExp(`^(\\s*)(export )?(async )?(function\\*? )?${name}\\(`).test(line));
  if (start < 0) throw new Error(`no function ${name} in it`);
  const indent = /^\s*/.exec(all[start])[0];
  const end = all.findIndex((line, i) => i > start && line === `${indent}}`);
  return { from: start + 1, lines: all.slice(start, end + 1) };
}
