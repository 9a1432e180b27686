// model.js: the transformer of model.py and oneblock/numpy_model.py in JavaScript, in float64, with its backward pass
// by hand, section by section and name by name (docs/explorer.md, "Which models it runs"). What differs:
// - A matrix is {rows, cols, data}: its numbers row after row in one Float64Array (made by `matrix`); a vector is a
//   Float64Array. IDs are one sequence of T, as in model.py (train.js averages the windows of a batch).
// - Every function that adds numbers takes `sums`: EXACT rounds each sum once, like math.fsum (Shewchuk's partials,
//   ported from CPython), so no result depends on the order of the terms and the order facts hold bit for bit, as
//   in model.py; PLAIN adds in plain float64, left to right (dot and sum: in four running sums), many times faster,
//   not bit for bit NumPy's, and is what training uses (its hot loops are fast.js's).
//
//     const config = model_config({ vocab: 96, d: 16, hidden: 64, max_len: 64, blocks: 2, heads: 4,
//       positions: "rope" });                                    // two blocks of four heads, rotary positions
//     const p = init_params(config, 3);
//     parameter_count(config)                                    // 10656
//     const [logits, cache] = forward(p, [5, 17, 42], config);
//     shape(logits), cache.blocks[1].att.weights.length          // [3, 96], 4
//
// Shape legend (T, d, H, V, L, nh, dh), in the comments on every line that makes a tensor: oneblock/numpy_model.py's.

import { pooled, products_plain, rows_dots_plain, weighted_rows_plain } from "./fast.js";
import { Random } from "./random.js";

export const EPS = 1e-5; // layer norm's guard against dividing by zero; it keeps the normalised variance just below 1
export const SCHEMES = Object.freeze(["learned", "none", "sinusoidal", "rope"]); // config.SCHEMES, where a token is
const SEED_SCHEMES = ["learned", "none"]; // the schemes model.py has (config.SEED_SCHEMES)
export const LONGEST = 1024; // the most positions "none", "sinusoidal" and "rope" read (they have no learned rows)
export const ROPE_BASE = 10000.0; // pair i turns by pos / ROPE_BASE^(2i/dh) radians; also the sinusoids' wavelengths

// ----------------------------------------------------------------------------------------------------------------
// Exact sums: Shewchuk's partials, as CPython's math.fsum computes them

/** A running sum kept exactly as a list of non-overlapping partials; value() rounds it once.
 *
 *     const s = new ExactSum(); s.add(1e16); s.add(1.0); s.add(-1e16); s.value()   // 1.0 (plain adds give 0.0) */
class ExactSum {
  constructor() {
    this.p = new Float64Array(32); // the partials, smallest first; grown when needed
    this.reset();
  }

  reset() {
    this.n = 0;
    this.special = 0.0; // the sum of the non-finite terms, which make the result non-finite
  }

  add(x) {
    const p = this.p;
    let i = 0;
    for (let j = 0; j < this.n; j++) {
      let y = p[j];
      if (Math.abs(x) < Math.abs(y)) [x, y] = [y, x];
      const hi = x + y;
      const lo = y - (hi - x);
      if (lo !== 0.0) p[i++] = lo;
      x = hi;
    }
    this.n = i;
    if (x !== 0.0) {
      if (!Number.isFinite(x)) {
        this.special += x; // (where math.fsum raises, on -inf + inf or an overflow, the result is NaN or infinite)
        this.n = 0;
      } else {
        if (this.n === p.length) {
          this.p = new Float64Array(2 * p.length);
          this.p.set(p);
        }
        this.p[this.n++] = x;
      }
    }
  }

  value() {
    if (this.special !== 0.0 || Number.isNaN(this.special)) return this.special;
    const p = this.p;
    let n = this.n;
    let hi = 0.0;
    let lo = 0.0;
    if (n > 0) {
      hi = p[--n];
      while (n > 0) { // add from the top down, and stop when a sum is inexact
        const x = hi;
        const y = p[--n];
        hi = x + y;
        lo = y - (hi - x);
        if (lo !== 0.0) break;
      }
      // round half to even across partials: sum([1e-16, 1, 1e16]) must round up, as math.fsum does
      if (n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0))) {
        const y = lo * 2.0;
        const x = hi + y;
        if (y === x - hi) hi = x;
      }
    }
    return hi;
  }
}

const acc = new ExactSum(); // one accumulator, reused by every exact sum (JavaScript runs one function at a time)

/** The exactly rounded sum of the first n numbers of an array (all of them unless n), as math.fsum.
 *
 *     fsum([0.1, 0.1, 0.1, -0.3])   // 2.7755575615628914e-17 (plain adds give 5.551115123125783e-17) */
export function fsum(xs, n = xs.length) {
  return exact_dot_at(xs, 0, ones_of(n), 0, n); // (each term times 1, exactly)
}

/** The two ways to add, as `sums` (the top of this file says how each adds); they meet in dot and sum below. */
export const EXACT = { name: "exact" };
export const PLAIN = { name: "plain" };

/** sum_i<n a[i] b[i], the way sums says; PLAIN in four running sums over every fourth term, added at the end (no
 * sum waits for the one before it, which is what makes it fast).
 *
 *     dot(EXACT, [1, 2], [3, 4], 2)   // 11 */
export function dot(sums, a, b, n = a.length) {
  if (sums === EXACT) return exact_dot_at(a, 0, b, 0, n);
  let s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  let i = 0;
  for (; i + 3 < n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; i++) s0 += a[i] * b[i];
  return s0 + s1 + (s2 + s3);
}

let ones = new Float64Array(0); // (n,) for sum and column_sums, grown when needed (never a pool's)

/** n ones: a sum is a dot product with ones, bit for bit (x * 1 is x), so sum and column_sums add as dot and
 * products do. */
function ones_of(n) {
  if (ones.length < n) ones = new Float64Array(n).fill(1.0);
  return ones;
}

/** sum_i<n a[i], the way sums says: dot with ones (PLAIN in four running sums).
 *
 *     sum(PLAIN, [1, 2, 3])   // 6 */
export function sum(sums, a, n = a.length) {
  return dot(sums, a, ones_of(n), n);
}

// ----------------------------------------------------------------------------------------------------------------
// Small matrix helpers (a matrix: see the top of this file)

/** A rows x cols matrix of 0.0 (inside fast.js's `reusing`, in a buffer of its pool).
 *
 *     matrix(2, 3)   // {rows: 2, cols: 3, data: Float64Array [0, 0, 0, 0, 0, 0]} */
export function matrix(rows, cols) {
  return { rows, cols, data: pooled(rows * cols) ?? new Float64Array(rows * cols) }; // (rows, cols)
}

/** A matrix from a list of equally long rows (arrays of numbers).
 *
 *     from_rows([[1, 2], [3, 4]]).data   // Float64Array [1, 2, 3, 4] */
function from_rows(rows) {
  return { rows: rows.length, cols: rows[0].length, data: Float64Array.from(rows.flat()) }; // (n, k)
}

/** Row i of a matrix, as a view of its numbers (writing into it writes into the matrix).
 *
 *     row(from_rows([[1, 2], [3, 4]]), 1)   // Float64Array [3, 4] */
export function row(m, i) {
  return m.data.subarray(i * m.cols, (i + 1) * m.cols);
}

/** Every row of a matrix, as views (see row): what the page's pictures draw.
 *
 *     rows_of(from_rows([[1, 2], [3, 4]]))   // [Float64Array [1, 2], Float64Array [3, 4]] */
export function rows_of(m) {
  return Array.from({ length: m.rows }, (_, i) => row(m, i));
}

/** The shape of a matrix or a vector.
 *
 *     shape(matrix(2, 3))  // [2, 3];   shape(new Float64Array(4))  // [4] */
export function shape(x) {
  return x instanceof Float64Array ? [x.length] : [x.rows, x.cols];
}

/** A dict of tensors as plain nested arrays of numbers (JSON), as numpy_model.to_lists.
 *
 *     to_lists({b: new Float64Array([1, 2])})   // {b: [1, 2]} */
export function to_lists(tensors) {
  const as_list = (t) => (t instanceof Float64Array ? Array.from(t) : rows_of(t).map((r) => Array.from(r)));
  return Object.fromEntries(Object.entries(tensors).map(([name, t]) => [name, as_list(t)]));
}

/** The inverse of to_lists: nested arrays (rows of numbers, or numbers) as matrices and vectors, as
 * numpy_model.from_lists.
 *
 *     from_lists({w: [[1, 2]], b: [3]}).w   // {rows: 1, cols: 2, data: Float64Array [1, 2]} */
export function from_lists(lists) {
  const as_tensor = (t) => (Array.isArray(t[0]) ? from_rows(t) : Float64Array.from(t));
  return Object.fromEntries(Object.entries(lists).map(([name, t]) => [name, as_tensor(t)]));
}

/** sum_{i<n} A[a + i] B[b + i], rounded once: a dot product of two stretches of flat arrays.
 *
 *     exact_dot_at([1e16, 1, -1e16], 0, [1, 1, 1], 0, 3)   // 1 (plain adds give 0) */
function exact_dot_at(A, a, B, b, n) {
  acc.reset();
  for (let i = 0; i < n; i++) acc.add(A[a + i] * B[b + i]);
  return acc.value();
}

/** The one loop behind matmul, matmul_bt and matmul_at, which differ only in how they walk their operands:
 * out (n, m) with out[i][j] = sum_{t<k} a(i, t) b(j, t) + bias[j], where a(i, t) = A[i ai + t at] and
 * b(j, t) = B[j bj + t bt]. EXACT rounds each entry once; PLAIN adds each left to right, the bias last. */
function products(A, ai, at, B, bj, bt, n, m, k, bias, sums) {
  const out = matrix(n, m); // (n, m)
  const O = out.data;
  if (sums === EXACT) {
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < m; j++) {
        acc.reset();
        for (let t = 0; t < k; t++) acc.add(A[i * ai + t * at] * B[j * bj + t * bt]);
        if (bias !== null && bias[j] !== 0.0) acc.add(bias[j]);
        O[i * m + j] = acc.value();
      }
    }
  } else {
    products_plain(A, ai, at, B, bj, bt, O, n, m, k); // fast.js: each entry summed left to right, the bias last
    if (bias !== null) for (let i = 0; i < n; i++) for (let j = 0; j < m; j++) O[i * m + j] += bias[j];
  }
  return out;
}

/** a times b transposed, plus a bias as one more term of each sum: a (n, k), b (m, k), bias (m,) or null -> (n, m).
 *
 *     matmul_bt(from_rows([[1, 2]]), from_rows([[3, 4], [5, 6]]), EXACT).data   // [11, 17] */
export function matmul_bt(a, b, sums, bias = null) {
  return products(a.data, a.cols, 1, b.data, b.cols, 1, a.rows, b.rows, a.cols, bias, sums);
}

/** Matrix product of a (n, k) and b (k, m), plus a bias (m,) as one more term of each sum (x w + b, a layer), each
 * entry one sum.
 *
 *     matmul(from_rows([[1, 2]]), from_rows([[3], [4]]), EXACT, [0.5]).data   // [11.5] */
export function matmul(a, b, sums, bias = null) {
  return products(a.data, a.cols, 1, b.data, 1, b.cols, a.rows, b.cols, a.cols, bias, sums);
}

/** a transposed times b: a (n, k), b (n, m) -> (k, m), each entry one sum over the n rows (a weight's gradient).
 *
 *     matmul_at(from_rows([[1], [2]]), from_rows([[3], [4]]), EXACT).data   // [11] */
function matmul_at(a, b, sums) {
  return products(a.data, 1, a.cols, b.data, 1, b.cols, a.cols, b.cols, a.rows, null, sums);
}

/** Elementwise sum of two matrices (of a's rows and b's first rows, when b has more). One addition is already
 * exactly rounded.
 *
 *     add(from_rows([[1, 2]]), from_rows([[0.5, 0.25]])).data   // [1.5, 2.25] */
export function add(a, b) {
  const out = matrix(a.rows, a.cols); // (n, m)
  const A = a.data, B = b.data, O = out.data;
  for (let i = 0; i < O.length; i++) O[i] = A[i] + B[i];
  return out;
}

/** The sum of each column: a (n, m) -> (m,).
 *
 *     column_sums(from_rows([[1, 2], [3, 4]]), EXACT)   // [4, 6] */
export function column_sums(a, sums) {
  const { rows: n, cols: m } = a;
  return products(ones_of(n), 0, 1, a.data, 1, m, 1, m, n, null, sums).data; // (m,) ones (1, n) times a
}

// ----------------------------------------------------------------------------------------------------------------
// The model's description: model_config, oneblock/config.py's ModelConfig under the same names. The page checks only
// a file's config (config_from_json) and the Train panel's (checked); every other rule of a config is config.py's.

export const SIZE_KEYS = Object.freeze(["vocab", "d", "hidden", "max_len"]); // the sizes every model has, in order
export const GROWN_KEYS = Object.freeze(["blocks", "heads"]); // a grown model's, in its JSON only when not both 1
export const SWITCH_KEY = "use_positions"; // model.py's switch, in the JSON beside the scheme (true: "learned")
export const JSON_KEYS = Object.freeze([...SIZE_KEYS, ...GROWN_KEYS, SWITCH_KEY, "positions"]); // a config's JSON

/** A model's description, as ModelConfig(vocab, d, hidden, max_len, blocks=1, heads=1, positions="learned"),
 * frozen (it travels beside its weights) and not checked (see checked).
 *
 *     model_config({ vocab: 96, d: 16, hidden: 64, max_len: 64 }).positions   // "learned" */
export function model_config({ vocab, d, hidden, max_len, blocks = 1, heads = 1, positions = "learned" }) {
  return Object.freeze({ vocab, d, hidden, max_len, blocks, heads, positions });
}

/** config, or an Error naming the bad value when its blocks and heads do not fit its width and scheme, as
 * ModelConfig.checked.
 *
 *     checked(model_config({ vocab: 96, d: 15, hidden: 60, max_len: 64, positions: "rope" }))
 *     // Error: rope rotates pairs of channels: the width d must be even, got d = 15 */
export function checked(config) {
  const { d, blocks, heads, positions } = config;
  for (const [name, value] of [["blocks", blocks], ["heads", heads]]) {
    if (!Number.isInteger(value) || value < 1) {
      throw new Error(`${name} = ${value}: expected a whole number of at least 1`);
    }
  }
  if (d % heads) {
    throw new Error(`heads = ${heads} does not divide the width d = ${d}; expected one of ${divisors(d).join(", ")}`);
  }
  if (positions === "rope" && (d / heads) % 2) {
    if (heads === 1) throw new Error(`rope rotates pairs of channels: the width d must be even, got d = ${d}`);
    const even = divisors(d).filter((n) => (d / n) % 2 === 0);
    throw new Error(`heads = ${heads} gives heads of width d / heads = ${d / heads}, but rope turns pairs of`
      + ` channels in each head: the head width must be even; expected one of ${even.join(", ")} heads for d = ${d}`);
  }
  return config;
}

/** Whether the model has more than one block or one head (ModelConfig.grown): its checkpoint is then version 3.
 *
 *     is_grown(model_config({ vocab: 96, d: 16, hidden: 64, max_len: 64, heads: 2 }))   // true */
export function is_grown(config) {
  return config.blocks !== 1 || config.heads !== 1;
}

/** Why model.py (one block, one head, learned positions or none) cannot run this model, or null when it can, as
 * ModelConfig.seed_problem.
 *
 *     seed_problem(model_config({ vocab: 96, d: 16, hidden: 64, max_len: 64, heads: 4 }))
 *     // "has 1 block x 4 heads, but model.py has one block and one head" */
export function seed_problem(config) {
  if (is_grown(config)) return `has ${blocks_words(config)}, but model.py has one block and one head`;
  if (!SEED_SCHEMES.includes(config.positions)) {
    return `has positions '${config.positions}', but model.py has learned positions and none only`;
  }
  return null;
}

/** "1 block x 1 head", "2 blocks x 4 heads": a config's blocks and heads in words, as ModelConfig.blocks_and_heads. */
export function blocks_words({ blocks, heads }) {
  return `${blocks} block${blocks === 1 ? "" : "s"} x ${heads} head${heads === 1 ? "" : "s"}`;
}

// ---- the checkpoint's JSON

/** The JSON object a checkpoint records, as ModelConfig.to_json (blocks and heads only for a grown model).
 *
 *     config_to_json(model_config({ vocab: 96, d: 16, hidden: 64, max_len: 64, positions: "rope" }))
 *     // {vocab: 96, d: 16, hidden: 64, max_len: 64, use_positions: false, positions: "rope"} */
export function config_to_json(config) {
  const json = {};
  for (const key of [...SIZE_KEYS, ...(is_grown(config) ? GROWN_KEYS : [])]) json[key] = config[key];
  json[SWITCH_KEY] = config.positions === "learned";
  json.positions = config.positions;
  return json;
}

/** The config of a checkpoint's JSON object (a Map of BigInts, as checkpoint.js's read_json reads it, of the keys
 * JSON_KEYS only), or an Error saying in a few words what is wrong, deciding as ModelConfig.from_json does (grown:
 * the same). The sizes are read as Numbers: past 2^53 they are no longer exact.
 *
 *     config_from_json(read_json('{"vocab": 96, "d": 16, "hidden": 64, "max_len": 64, "use_positions": false}'))
 *     // {vocab: 96, d: 16, hidden: 64, max_len: 64, blocks: 1, heads: 1, positions: "none"}
 *     config_from_json(read_json('{"vocab": 96, "d": "16"}'))   // Error: its config's d is not a positive int */
export function config_from_json(value, grown = null) {
  const given = GROWN_KEYS.filter((key) => value.has(key)); // (read as sizes when they may be there)
  const needed = [...SIZE_KEYS, ...(grown ? GROWN_KEYS : grown === null ? given : [])];
  const bad = needed.find((key) => typeof value.get(key) !== "bigint" || value.get(key) < 1n);
  if (bad !== undefined) throw new Error(`its config's ${bad} is not a positive int`);
  if (grown === false && given.length) {
    throw new Error("its config has blocks or heads, but its format version is that of one block and one head");
  }
  const switch_on = value.get(SWITCH_KEY);
  const scheme = value.has("positions") ? value.get("positions") : switch_on ? "learned" : "none";
  if (typeof switch_on !== "boolean" || !SCHEMES.includes(scheme) || switch_on !== (scheme === "learned")) {
    throw new Error(`its config's ${SWITCH_KEY} and positions are not a scheme of ${SCHEMES.join(", ")}`);
  }
  const size = (key) => (value.has(key) ? Number(value.get(key)) : 1);
  return model_config({ ...Object.fromEntries(SIZE_KEYS.map((key) => [key, size(key)])), blocks: size("blocks"),
    heads: size("heads"), positions: scheme });
}

// ----------------------------------------------------------------------------------------------------------------
// What a config implies: the parameters' names and shapes (model.py's table for one block, the names of the other
// blocks' after oneblock/config.py), fresh weights, and the check that a dict of tensors fits it

// name -> shape of one block's model, in the order of the parameter dict (model.py's PARAM_SHAPES); V, d, H and L
// come from a config
export const PARAM_SHAPES = {
  tok_emb: ["V", "d"],
  pos_emb: ["L", "d"],
  ln1_g: ["d"],
  ln1_b: ["d"],
  Wq: ["d", "d"],
  Wk: ["d", "d"],
  Wv: ["d", "d"],
  Wo: ["d", "d"],
  ln2_g: ["d"],
  ln2_b: ["d"],
  W1: ["d", "H"],
  b1: ["H"],
  W2: ["H", "d"],
  b2: ["d"],
  lnf_g: ["d"],
  lnf_b: ["d"],
  W_out: ["d", "V"],
  b_out: ["V"],
};

export const OUTSIDE = ["tok_emb", "pos_emb", "lnf_g", "lnf_b", "W_out", "b_out"]; // the tensors that are no block's
export const BLOCK_NAMES = Object.keys(PARAM_SHAPES).filter((name) => !OUTSIDE.includes(name)); // ln1_g, ..., b2

/** What goes before a tensor's name in block `block` (counted from 0), as config.prefix.
 *
 *     prefix(0), prefix(1)   // "", "block1." */
export function prefix(block) {
  return block ? `block${block}.` : "";
}

/** [name, shape] of each parameter of a model of these sizes (Numbers, or a file's BigInts), one at a time in the
 * order of the parameter dict, as ModelConfig.param_shapes.
 *
 *     [...each_param(model_config({ vocab: 96, d: 4, hidden: 8, max_len: 8, blocks: 2 }))][14]
 *     // ["block1.ln1_g", [4]] */
export function* each_param({ vocab, d, hidden, max_len, blocks = 1 }) {
  const sizes = { V: vocab, d, H: hidden, L: max_len };
  const shape = (name) => PARAM_SHAPES[name].map((s) => sizes[s]);
  for (const name of OUTSIDE.slice(0, 2)) yield [name, shape(name)];
  for (let b = 0; b < blocks; b++) for (const name of BLOCK_NAMES) yield [prefix(b) + name, shape(name)];
  for (const name of OUTSIDE.slice(2)) yield [name, shape(name)];
}

/** How many numbers the parameters of a model of these sizes hold, by arithmetic, as ModelConfig.parameter_count:
 * Numbers for a config, BigInts for a file's config (checkpoint.js prices a file with it before reading its names).
 *
 *     parameter_count(model_config({ vocab: 96, d: 16, hidden: 64, max_len: 64 }))   // 7440 */
export function parameter_count({ vocab, d, hidden, max_len, blocks }) {
  const [zero, one] = typeof d === "bigint" ? [0n, 1n] : [0, 1];
  const sizes = { V: vocab, d, H: hidden, L: max_len };
  const numbers = (name) => PARAM_SHAPES[name].reduce((p, s) => p * sizes[s], one); // of one tensor
  const total = (names) => names.reduce((n, name) => n + numbers(name), zero);
  return total(OUTSIDE) + (blocks ?? one) * total(BLOCK_NAMES);
}

/** Fresh parameters of a config, the same numbers as ModelConfig.init_params (with one block, model.init_params):
 * matrices gauss(0, 0.02) from one Random(seed), gains 1.0, biases 0.0.
 *
 *     init_params(model_config({ vocab: 96, d: 4, hidden: 8, max_len: 8 }), 3).ln1_g   // Float64Array [1, 1, 1, 1] */
export function init_params(config, seed) {
  const rng = new Random(seed);
  const params = {};
  for (const [name, dims] of each_param(checked(config))) {
    if (dims.length === 2) {
      const m = matrix(dims[0], dims[1]); // (rows, cols)
      for (let i = 0; i < m.data.length; i++) m.data[i] = rng.gauss(0.0, 0.02);
      params[name] = m;
    } else {
      params[name] = new Float64Array(dims[0]).fill(name.endsWith("_g") ? 1.0 : 0.0); // (n,)
    }
  }
  return params;
}

/** An Error unless params (model.js tensors) have exactly the names and shapes of each_param(config), as
 * numpy_model.check_params decides, in words of the page's own; context, the words before its message.
 *
 *     check_params({ ...p, W1: matrix(4, 9) }, config)   // Error: parameter W1 is not a tensor of shape [4, 8] */
export function check_params(params, config, context = "") {
  let count = 0;
  for (const [name, want] of each_param(checked(config))) {
    const t = Object.hasOwn(params, name) ? params[name] : null;
    const fits = t instanceof Float64Array ? want.length === 1 && t.length === want[0]
      : t?.data instanceof Float64Array && want.length === 2 && t.rows === want[0] && t.cols === want[1]
        && t.data.length === t.rows * t.cols;
    if (!fits) throw new Error(`${context}parameter ${name} is not a tensor of shape [${want.join(", ")}]`);
    count += 1;
  }
  if (Object.keys(params).length !== count) {
    throw new Error(`${context}the parameters hold tensors that a model of ${blocks_words(config)} does not have`);
  }
}

/** The tensors of one block under model.py's names (without the prefix): block 0's are params itself, as in
 * config.block_params (the tensors outside the blocks ride along unread).
 *
 *     block_params(p, 1).Wq === p["block1.Wq"]   // true */
export function block_params(params, block) {
  if (block === 0) return params;
  return Object.fromEntries(BLOCK_NAMES.map((name) => [name, params[prefix(block) + name]]));
}

/** Check token IDs: whole numbers in [0, vocab); otherwise an Error naming the first few bad ones.
 *
 *     check_ids([1, 2], 96)   // [1, 2] */
export function check_ids(ids, vocab, what = "token IDs") {
  for (let i = 0; i < ids.length; i++) {
    if (!Number.isInteger(ids[i])) throw new Error(`${what} should be whole numbers, got ${ids[i]} at position ${i}`);
  }
  const bad = Array.from(ids).filter((x) => x < 0 || x >= vocab);
  if (bad.length) throw new Error(`${what} outside the vocabulary of size ${vocab}: [${bad.slice(0, 5).join(", ")}]`);
  return ids;
}

/** An Error unless T tokens fit the model of config (its scheme and, for "learned", its max_len rows), as
 * numpy_model.check_length.
 *
 *     check_length(100, model_config({ vocab: 96, d: 16, hidden: 64, max_len: 64, positions: "rope" }))
 *     // fine: rope reads up to LONGEST */
export function check_length(T, config) {
  const { positions: scheme, max_len } = config;
  if (T === 0) throw new Error("empty sequence: forward needs at least one token ID");
  if (T > max_len && scheme === "learned") {
    throw new Error(`sequence of ${T} tokens is longer than the ${max_len} positions the model has`);
  }
  if (T > LONGEST) {
    throw new Error(`sequence of ${T} tokens is longer than the ${LONGEST} positions the model has with`
      + ` positions='${scheme}'`);
  }
}

/** The divisors of n in order, found up to its square root, as config.divisors.
 *
 *     divisors(16), divisors(7)   // [1, 2, 4, 8, 16], [1, 7] */
function divisors(n) {
  const small = [];
  for (let k = 1; k * k <= n; k++) if (n % k === 0) small.push(k);
  return [...small, ...small.filter((k) => k * k !== n).reverse().map((k) => n / k)];
}

// ----------------------------------------------------------------------------------------------------------------
// Positions: the sinusoid table, and the rotary turn of channel pairs

const tables = new Map(); // "kind T d" -> the tables below, worked out once for each size (they are never written)

/** count tables (T, d) of kind, each in its own memory (never a pool's), made once for each size: fill(tables, at,
 * angle) for each position pos < T and channel pair (c, c + 1), at = pos d + c, with the angle pos / 10000^(c/d). */
function angle_tables(kind, count, T, d, fill) {
  const key = `${kind} ${T} ${d}`;
  if (!tables.has(key)) {
    const made = Array.from({ length: count }, () => ({ rows: T, cols: d, data: new Float64Array(T * d) })); // (T, d)
    for (let pos = 0; pos < T; pos++) {
      for (let c = 0; c < d; c += 2) fill(made, pos * d + c, pos * ROPE_BASE ** (-c / d));
    }
    tables.set(key, made);
  }
  return tables.get(key);
}

/** The fixed position table of the original transformer, (T, d), as numpy_model.sinusoid_table. Shared: do not
 * write into it.
 *
 *     row(sinusoid_table(2, 4), 1)   // [0.8415, 0.5403, 0.01, 1.0] (rounded) */
export function sinusoid_table(T, d) {
  return angle_tables("sin", 1, T, d, ([table], at, angle) => {
    table.data[at] = Math.sin(angle);
    if (at % d + 1 < d) table.data[at + 1] = Math.cos(angle);
  })[0];
}

/** [cos, sin], each (T, d), as numpy_model.rope_tables; d must be even. Shared: do not write into them. */
export function rope_tables(T, d) {
  return angle_tables("rope", 2, T, d, ([cos, sin], at, angle) => {
    cos.data[at] = cos.data[at + 1] = Math.cos(angle);
    sin.data[at] = sin.data[at + 1] = Math.sin(angle);
  });
}

/** x (T, d) with each channel pair (a, b) of each head turned by its angle: (a cos - b sin, a sin + b cos), the
 * tables (T, dh) of one head's width (with one head, d), as numpy_model.rope_forward on x's heads (way 1); or turned
 * back, the gradient through that turn, as numpy_model.rope_backward (way -1: a rotation's inverse is its transpose).
 *
 *     turn_pairs(from_rows([[1, 0], [1, 0]]), ...rope_tables(2, 2), 1)   // rows [1, 0], [0.5403, 0.8415]: position 1
 *                                                                        // turns by 1 radian */
function turn_pairs(x, cos, sin, way) {
  const { rows: T, cols: d } = x;
  const width = cos.cols;
  const out = matrix(T, d); // (T, d)
  const X = x.data, C = cos.data, S = sin.data, O = out.data;
  for (let t = 0; t < T; t++) {
    for (let j = 0; j < d; j += 2) {
      const at = t * d + j, angle = t * width + (j % width);
      const a = X[at], b = X[at + 1];
      O[at] = a * C[angle] - b * (way * S[angle]); // (way * S: the sine, or exactly its negation)
      O[at + 1] = b * C[angle + 1] + a * (way * S[angle + 1]);
    }
  }
  return out;
}

// ----------------------------------------------------------------------------------------------------------------
// Layer norm: each row to mean 0 and variance 1, then a gain g and a bias b per column

/** Normalise each row of x (T, n); return [out, cache].
 *
 *     layernorm_forward(from_rows([[1, 3]]), [1, 1], [0, 0], EXACT)[0].data   // [-0.99999..., 0.99999...] */
export function layernorm_forward(x, g, b, sums) {
  const { rows: T, cols: n } = x;
  const out = matrix(T, n); // (T, n)
  const xhat = matrix(T, n); // (T, n)
  const std = new Float64Array(T); // (T,)
  const centred = new Float64Array(n); // (n,)
  const X = x.data, O = out.data, XH = xhat.data;
  for (let t = 0; t < T; t++) {
    const at = t * n;
    const mu = sum(sums, X.subarray(at, at + n), n) / n;
    for (let j = 0; j < n; j++) centred[j] = X[at + j] - mu;
    const s = Math.sqrt(dot(sums, centred, centred, n) / n + EPS);
    for (let j = 0; j < n; j++) {
      XH[at + j] = centred[j] / s;
      O[at + j] = g[j] * XH[at + j] + b[j];
    }
    std[t] = s;
  }
  return [out, { xhat, std }];
}

/** Gradients [dx, dg, db] of layer norm, given dy (T, n) = d loss / d out, as model.py's layernorm_backward. */
export function layernorm_backward(dy, g, cache, sums) {
  const { rows: T, cols: n } = dy;
  const dx = matrix(T, n); // (T, n)
  const dy_xhat = matrix(T, n); // (T, n)
  const u = new Float64Array(n); // (n,)
  const DY = dy.data, XH = cache.xhat.data, DX = dx.data, DYX = dy_xhat.data;
  for (let t = 0; t < T; t++) {
    const at = t * n, s = cache.std[t];
    for (let j = 0; j < n; j++) {
      u[j] = DY[at + j] * g[j];
      DYX[at + j] = DY[at + j] * XH[at + j];
    }
    const mean_u = sum(sums, u, n) / n;
    const mean_ux = dot(sums, u, XH.subarray(at, at + n), n) / n;
    for (let j = 0; j < n; j++) DX[at + j] = (u[j] - mean_u - XH[at + j] * mean_ux) / s;
  }
  return [dx, column_sums(dy_xhat, sums), column_sums(dy, sums)]; // (T, n), (n,), (n,)
}

// ----------------------------------------------------------------------------------------------------------------
// Causal self-attention, heads of width d / heads: position i reads positions 0..i only

/** out[n] = sum_{c<width} X[x + c] Y[y + n step + c] for n < count: one row of X against count rows of Y (a row of
 * scores: q_i against the keys j <= i). PLAIN adds each sum left to right. */
function dots_with_rows(sums, X, x, Y, y, step, count, width, out) {
  if (sums === EXACT) {
    for (let n = 0; n < count; n++) out[n] = exact_dot_at(X, x, Y, y + n * step, width);
  } else {
    rows_dots_plain(X, x, Y, y, step, count, width, out); // fast.js: each sum left to right over c
  }
}

/** O[o + c] = sum_{n<count} W[w + n w_step] X[x + n x_step + c] for c < width: count rows of X mixed by count weights
 * (a row of the context: the weights of query i times the values j <= i). PLAIN adds each sum left to right over n. */
function weighted_rows(sums, W, w, w_step, count, X, x, x_step, width, O, o) {
  if (sums === EXACT) {
    for (let c = 0; c < width; c++) {
      acc.reset();
      for (let n = 0; n < count; n++) acc.add(W[w + n * w_step] * X[x + n * x_step + c]);
      O[o + c] = acc.value();
    }
  } else {
    weighted_rows_plain(W, w, w_step, count, X, x, x_step, width, O, o); // fast.js: each sum left to right over n
  }
}

/** Causal attention of x (T, d) with a block's Wq, Wk, Wv, Wo and config.heads heads; return [(attn v) Wo, cache],
 * as numpy_model.attention_forward: head h reads columns h dh .. (h + 1) dh - 1 of q, k and v (dh = d / heads); the
 * heads' outputs side by side in ctx; rope: turn_pairs. cache.weights: one (T, T) matrix per head. */
export function attention_forward(block, x, config, sums) {
  const { rows: T, cols: d } = x;
  const { heads } = config, rope = config.positions === "rope";
  const width = d / heads; // dh
  const scale = 1.0 / Math.sqrt(width);
  let q = matmul(x, block.Wq, sums); // (T, d)
  let k = matmul(x, block.Wk, sums); // (T, d)
  const v = matmul(x, block.Wv, sums); // (T, d)
  const turn = rope ? rope_tables(T, width) : null; // (T, dh) cos and (T, dh) sin
  if (turn) {
    q = turn_pairs(q, ...turn, 1); // (T, d) every head's pairs turned
    k = turn_pairs(k, ...turn, 1); // (T, d)
  }
  const ctx = matrix(T, d); // (T, d) the heads' outputs side by side
  const weights = [];
  const e = new Float64Array(T); // (T,) of which i+1 are used: the mask, j > i is never read
  for (let h = 0; h < heads; h++) {
    const w = matrix(T, T); // (T, T)
    const W = w.data, off = h * width;
    for (let i = 0; i < T; i++) {
      dots_with_rows(sums, q.data, i * d + off, k.data, off, d, i + 1, width, e); // (i+1,) q_i . k_j
      let top = -Infinity;
      for (let j = 0; j <= i; j++) {
        e[j] *= scale;
        if (e[j] > top) top = e[j];
      }
      for (let j = 0; j <= i; j++) e[j] = Math.exp(e[j] - top);
      const z = sum(sums, e, i + 1);
      for (let j = 0; j <= i; j++) W[i * T + j] = e[j] / z;
      weighted_rows(sums, W, i * T, 1, i + 1, v.data, off, d, width, ctx.data, i * d + off); // sum_j w_ij v_j
    }
    weights.push(w);
  }
  const out = matmul(ctx, block.Wo, sums); // (T, d)
  return [out, { x, q, k, v, turn, weights, ctx, heads }];
}

/** Gradients of attention: dout (T, d) -> [{Wq, Wk, Wv, Wo}, dx (T, d)]. */
export function attention_backward(block, cache, dout, sums) {
  const { x, q, k, v, turn, weights, ctx, heads } = cache;
  const { rows: T, cols: d } = x;
  const width = d / heads;
  const scale = 1.0 / Math.sqrt(width);
  const dWo = matmul_at(ctx, dout, sums); // (d, d)
  const dctx = matmul_bt(dout, block.Wo, sums); // (T, d)

  // per head: through the weighted sum ctx[i] = sum_j w[i][j] v[j], then through each row's softmax
  let dq = matrix(T, d), dk = matrix(T, d); // (T, d) each
  const dv = matrix(T, d); // (T, d)
  const dw = new Float64Array(T); // (T,) of which i+1 are used
  for (let h = 0; h < heads; h++) {
    const W = weights[h].data, off = h * width;
    const dscores = matrix(T, T); // (T, T) zero above the diagonal
    const DS = dscores.data;
    for (let i = 0; i < T; i++) {
      dots_with_rows(sums, dctx.data, i * d + off, v.data, off, d, i + 1, width, dw); // (i+1,) dctx_i . v_j
      const mean_dw = dot(sums, W.subarray(i * T, i * T + i + 1), dw, i + 1);
      for (let j = 0; j <= i; j++) DS[i * T + j] = W[i * T + j] * (dw[j] - mean_dw) * scale; // the 1/sqrt(dh) included
    }
    for (let j = 0; j < T; j++) {
      const at = j * d + off;
      // dv_j and dk_j collect the positions i >= j that read position j; dq_i the positions j <= i it read
      weighted_rows(sums, W, j * T + j, T, T - j, dctx.data, at, d, width, dv.data, at);
      weighted_rows(sums, DS, j * T + j, T, T - j, q.data, at, d, width, dk.data, at);
      weighted_rows(sums, DS, j * T, 1, j + 1, k.data, off, d, width, dq.data, at);
    }
  }
  if (turn) { // q and k were turned: turn their gradients back
    dq = turn_pairs(dq, ...turn, -1);
    dk = turn_pairs(dk, ...turn, -1);
  }

  const grads = {
    Wq: matmul_at(x, dq, sums), // (d, d)
    Wk: matmul_at(x, dk, sums), // (d, d)
    Wv: matmul_at(x, dv, sums), // (d, d)
    Wo: dWo, // (d, d)
  };
  // x feeds q, k and v: its gradient is one sum over all three paths
  const dqkv = matrix(T, 3 * d); // (T, 3d) rows joined
  const w_qkv = matrix(d, 3 * d); // (d, 3d)
  for (const [n, [grad, weight]] of [[dq, block.Wq], [dk, block.Wk], [dv, block.Wv]].entries()) {
    for (let t = 0; t < T; t++) dqkv.data.set(grad.data.subarray(t * d, (t + 1) * d), t * 3 * d + n * d);
    for (let r = 0; r < d; r++) w_qkv.data.set(weight.data.subarray(r * d, (r + 1) * d), r * 3 * d + n * d);
  }
  const dx = matmul_bt(dqkv, w_qkv, sums); // (T, d)
  return [grads, dx];
}

// ----------------------------------------------------------------------------------------------------------------
// One pre-norm block: attention and MLP, each with a skip path

/** One block on the stream x (T, d) with the block's parameters (block_params) and the model's config; return [the
 * stream after it, cache]. */
export function block_forward(block, x, config, sums) {
  const [h1, ln1] = layernorm_forward(x, block.ln1_g, block.ln1_b, sums); // (T, d)
  const [a, att] = attention_forward(block, h1, config, sums); // (T, d)
  const x1 = add(x, a); // (T, d) skip path 1
  const [h2, ln2] = layernorm_forward(x1, block.ln2_g, block.ln2_b, sums); // (T, d)
  const pre = matmul(h2, block.W1, sums, block.b1); // (T, H)
  const act = matrix(pre.rows, pre.cols); // (T, H) ReLU
  const P = pre.data, A = act.data;
  for (let i = 0; i < P.length; i++) A[i] = P[i] > 0.0 ? P[i] : 0.0;
  const m = matmul(act, block.W2, sums, block.b2); // (T, d)
  const x2 = add(x1, m); // (T, d) skip path 2
  return [x2, { x, h1, ln1, att, x1, h2, ln2, pre, act, x2 }];
}

/** Gradients of one block, given dx2 (T, d) = d loss / d (the stream after it): [its gradients by model.py's names,
 * the gradient of the stream before it]. */
export function block_backward(block, cache, dx2, sums) {
  const g = {};
  // x2 = x1 + m: the gradient goes to the MLP branch and to the skip path unchanged
  const dm = dx2; // (T, d)
  g.b2 = column_sums(dm, sums); // (d,)
  g.W2 = matmul_at(cache.act, dm, sums); // (H, d)
  const dact = matmul_bt(dm, block.W2, sums); // (T, H)
  const dpre = matrix(dact.rows, dact.cols); // (T, H) ReLU: the gradient passes where the input was positive
  const P = cache.pre.data, DA = dact.data, DP = dpre.data;
  for (let i = 0; i < DP.length; i++) DP[i] = P[i] > 0.0 ? DA[i] : 0.0;
  g.b1 = column_sums(dpre, sums); // (H,)
  g.W1 = matmul_at(cache.h2, dpre, sums); // (d, H)
  const dh2 = matmul_bt(dpre, block.W1, sums); // (T, d)
  const [dx1_mlp, ln2_g, ln2_b] = layernorm_backward(dh2, block.ln2_g, cache.ln2, sums); // (T, d)
  Object.assign(g, { ln2_g, ln2_b });
  const dx1 = add(dx2, dx1_mlp); // (T, d) skip path 2: both contributions added

  // x1 = x + attention(LayerNorm(x)): again two paths
  const [att_grads, dh1] = attention_backward(block, cache.att, dx1, sums); // (T, d)
  const [dx_att, ln1_g, ln1_b] = layernorm_backward(dh1, block.ln1_g, cache.ln1, sums); // (T, d)
  Object.assign(g, att_grads, { ln1_g, ln1_b });
  const dx = add(dx1, dx_att); // (T, d) skip path 1: both contributions added
  return [g, dx];
}

// ----------------------------------------------------------------------------------------------------------------
// The model: embeddings, the blocks, final layer norm, logits

/** Logits (T, V) for a list of T token IDs, and the cache the backward pass needs (it holds the config), as
 * numpy_model.forward (an example: the top of this file). */
export function forward(params, ids, config, sums = EXACT) {
  check_params(params, config);
  check_ids(ids, config.vocab);
  const T = ids.length;
  check_length(T, config);
  const scheme = config.positions;

  const { d } = config;
  let x0 = matrix(T, d); // (T, d)
  for (let t = 0; t < T; t++) x0.data.set(params.tok_emb.data.subarray(ids[t] * d, (ids[t] + 1) * d), t * d);
  if (scheme === "learned") x0 = add(x0, params.pos_emb); // (T, d)
  else if (scheme === "sinusoidal") x0 = add(x0, sinusoid_table(T, d)); // (T, d) a fixed table, no parameters
  let x = x0;
  const blocks = [];
  for (let b = 0; b < config.blocks; b++) {
    const [out, c] = block_forward(block_params(params, b), x, config, sums); // (T, d)
    blocks.push(c);
    x = out;
  }
  const [hf, lnf] = layernorm_forward(x, params.lnf_g, params.lnf_b, sums); // (T, d)
  const logits = matmul(hf, params.W_out, sums, params.b_out); // (T, V)
  return [logits, { ids: Array.from(ids), config, x0, blocks, hf, lnf }];
}

// ----------------------------------------------------------------------------------------------------------------
// The loss: mean cross-entropy of the next token

/** Mean over positions of -log softmax(logits[t])[targets[t]], and its gradient (softmax - onehot) / T.
 *
 *     loss_and_dlogits(from_rows([[0, 0]]), [1], EXACT)   // [0.6931471805599453, the rows [[0.5, -0.5]]] */
export function loss_and_dlogits(logits, targets, sums = EXACT) {
  const { rows: T, cols: vocab } = logits;
  check_ids(targets, vocab, "target IDs");
  if (targets.length !== T) throw new Error(`${T} positions but ${targets.length} targets`);
  const losses = new Float64Array(T); // (T,)
  const dlogits = matrix(T, vocab); // (T, V)
  const L = logits.data;
  for (let t = 0; t < T; t++) {
    const at = t * vocab, y = targets[t];
    const p = dlogits.data.subarray(at, at + vocab); // (V,)
    let top = -Infinity;
    for (let j = 0; j < vocab; j++) if (L[at + j] > top) top = L[at + j];
    for (let j = 0; j < vocab; j++) p[j] = Math.exp(L[at + j] - top); // (V,) softmax numerators
    const total = sum(sums, p, vocab);
    losses[t] = top + Math.log(total) - L[at + y];
    for (let j = 0; j < vocab; j++) p[j] /= total; // (V,) softmax
    p[y] -= 1.0;
    for (let j = 0; j < vocab; j++) p[j] /= T;
  }
  return [sum(sums, losses, T) / T, dlogits];
}

/** The loss of predicting targets from ids, as one number (config as in forward). */
export function sequence_loss(params, ids, targets, config, sums = EXACT) {
  const [logits] = forward(params, ids, config, sums);
  return loss_and_dlogits(logits, targets, sums)[0];
}

// ----------------------------------------------------------------------------------------------------------------
// The backward pass of the whole model, last layer first

/** One gradient per parameter (same names, shapes and order), given dlogits (T, V) = d loss / d logits, after a
 * forward pass whose cache holds the config. */
export function backward(params, cache, dlogits, sums = EXACT) {
  const { ids, config } = cache;
  check_params(params, config, "the parameters are not those of the cache's forward pass: ");
  const T = ids.length, { d } = config;
  const g = {};

  // logits = LayerNorm(x) W_out + b_out, x the stream after the last block
  g.b_out = column_sums(dlogits, sums); // (V,)
  g.W_out = matmul_at(cache.hf, dlogits, sums); // (d, V)
  const dhf = matmul_bt(dlogits, params.W_out, sums); // (T, d)
  let [dx, lnf_g, lnf_b] = layernorm_backward(dhf, params.lnf_g, cache.lnf, sums); // (T, d)
  Object.assign(g, { lnf_g, lnf_b });

  // the blocks, last first: each takes the gradient of the stream after it and gives the one before it
  for (let b = config.blocks - 1; b >= 0; b--) {
    const [block_grads, dx_in] = block_backward(block_params(params, b), cache.blocks[b], dx, sums); // (T, d)
    for (const name of BLOCK_NAMES) g[prefix(b) + name] = block_grads[name];
    dx = dx_in;
  }

  // x0 = tok_emb[ids] + pos_emb[0:T] (or the fixed table, or nothing): a token's row collects every position that
  // used it
  g.tok_emb = matrix(config.vocab, d); // (V, d)
  const DX = dx.data, G = g.tok_emb.data;
  if (sums === EXACT) {
    for (const token of new Set(ids)) {
      const used = ids.flatMap((id, t) => (id === token ? [t] : []));
      const rows = matrix(used.length, d); // (n, d) the positions that read this token
      used.forEach((t, n) => rows.data.set(DX.subarray(t * d, (t + 1) * d), n * d));
      G.set(column_sums(rows, sums), token * d); // (d,)
    }
  } else {
    for (let t = 0; t < T; t++) for (let j = 0; j < d; j++) G[ids[t] * d + j] += DX[t * d + j];
  }
  g.pos_emb = matrix(config.max_len, d); // (L, d) rows past T stay exactly zero
  if (config.positions === "learned") g.pos_emb.data.set(DX);
  return Object.fromEntries(Object.keys(params).map((name) => [name, g[name]])); // the parameters' order
}

/** The mean loss of one sequence and one gradient per parameter: what a training step needs (config and sums as in
 * forward). */
export function loss_and_grads(params, ids, targets, config, sums = EXACT) {
  const [logits, cache] = forward(params, ids, config, sums);
  const [loss, dlogits] = loss_and_dlogits(logits, targets, sums);
  return [loss, backward(params, cache, dlogits, sums)];
}
