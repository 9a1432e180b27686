// model.js: the one-block transformer of model.py in JavaScript, in float64, with its backward pass by hand.
//
// Read model.py first: this file follows it section by section and name by name (the snake_case is on purpose, so
// that `layernorm_backward` here is `layernorm_backward` there). What differs:
// - A matrix is an Array of Float64Array rows that share one buffer (made by `matrix`); a vector is a Float64Array.
// - Every function that adds numbers takes `sums`: EXACT rounds each sum once, like math.fsum (Shewchuk's partials,
//   ported from CPython), so no result depends on the order of the terms and the order facts hold bit for bit, as
//   in model.py; PLAIN adds left to right, about 4x faster, and is what training uses.
// - The sizes travel in a config object {vocab, d, hidden, max_len, blocks, heads}, and the block's layers take the
//   parameters of one block (`block_params`), so that a model with more blocks and heads fits the same loops. Today
//   there is one block with one head and the parameters have model.py's names.
//
//     const p = init_params(96, 16, 64, 64, 3);
//     count_params(p)                           // 7440
//     const [logits, cache] = forward(p, [5, 17, 42]);
//     shape(logits)                             // [3, 96]
//
// Shape legend, used in the comments on every line that makes a tensor:
//     T = positions in the sequence, d = model width, H = hidden width of the MLP, V = vocabulary size,
//     L = max_len, the number of learned positions.

import { Random } from "./random.js";

export const EPS = 1e-5; // layer norm's guard against dividing by zero; it keeps the normalised variance just below 1

// ----------------------------------------------------------------------------------------------------------------
// Exact sums: Shewchuk's partials, as CPython's math.fsum computes them

/** A running sum kept exactly as a list of non-overlapping partials; value() rounds it once.
 *
 *     const s = new ExactSum(); s.add(1e16); s.add(1.0); s.add(-1e16); s.value()   // 1.0 (plain adds give 0.0) */
export class ExactSum {
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

/** The exactly rounded sum of an array of numbers, as math.fsum.
 *
 *     fsum([0.1, 0.1, 0.1, -0.3])   // 5.551115123125783e-17 is what plain adds give; fsum gives 2.7755575615628914e-17 */
export function fsum(xs) {
  acc.reset();
  for (let i = 0; i < xs.length; i++) acc.add(xs[i]);
  return acc.value();
}

/** The two ways to add: EXACT (one rounding per sum, order-independent) and PLAIN (left to right, fast).
 * dot(a, b, n, extra) is sum_i<n a[i] b[i], plus extra as one more term (a bias); sum(a) is sum_i a[i]. */
export const EXACT = {
  name: "exact",
  dot(a, b, n = a.length, extra = 0.0) {
    acc.reset();
    for (let i = 0; i < n; i++) acc.add(a[i] * b[i]);
    if (extra !== 0.0) acc.add(extra);
    return acc.value();
  },
  sum: fsum,
};

export const PLAIN = {
  name: "plain",
  dot(a, b, n = a.length, extra = 0.0) {
    let s = 0.0;
    for (let i = 0; i < n; i++) s += a[i] * b[i];
    return s + extra;
  },
  sum(a) {
    let s = 0.0;
    for (let i = 0; i < a.length; i++) s += a[i];
    return s;
  },
};

// ----------------------------------------------------------------------------------------------------------------
// Small matrix helpers

/** A rows x cols matrix of 0.0: an Array of Float64Array rows over one buffer.
 *
 *     matrix(2, 3)   // [Float64Array [0, 0, 0], Float64Array [0, 0, 0]] */
export function matrix(rows, cols) {
  const buf = new Float64Array(rows * cols); // (rows * cols,)
  const m = new Array(rows);
  for (let i = 0; i < rows; i++) m[i] = buf.subarray(i * cols, (i + 1) * cols);
  return m;
}

/** The shape of a matrix or a vector.
 *
 *     shape(matrix(2, 3))  // [2, 3];   shape(new Float64Array(4))  // [4] */
export function shape(x) {
  return Array.isArray(x) ? [x.length, x.length ? x[0].length : 0] : [x.length];
}

/** Rows become columns.
 *
 *     transpose([[1, 2, 3], [4, 5, 6]])   // [[1, 4], [2, 5], [3, 6]] (as Float64Array rows) */
export function transpose(a) {
  const rows = a.length;
  const cols = a[0].length;
  const t = matrix(cols, rows); // (cols, rows)
  for (let i = 0; i < rows; i++) {
    const r = a[i];
    for (let j = 0; j < cols; j++) t[j][i] = r[j];
  }
  return t;
}

/** Matrix product of a (n, k) and b (k, m), each entry one sum.
 *
 *     matmul([[1, 2]], [[3], [4]], EXACT)   // [[11]] */
export function matmul(a, b, sums) {
  return matmul_bt(a, transpose(b), sums); // b^T: (m, k)
}

/** a times b transposed: a (n, k), b (m, k) -> (n, m). Used where b^T would only be transposed back.
 *
 *     matmul_bt([[1, 2]], [[3, 4], [5, 6]], EXACT)   // [[11, 17]] */
export function matmul_bt(a, b, sums) {
  const out = matrix(a.length, b.length); // (n, m)
  for (let i = 0; i < a.length; i++) {
    const row = out[i];
    for (let j = 0; j < b.length; j++) row[j] = sums.dot(a[i], b[j]);
  }
  return out;
}

/** x w + b, where the bias is one more term of each sum: x (n, k), w (k, m), b (m,) -> (n, m).
 *
 *     linear([[1, 2]], [[3], [4]], [0.5], EXACT)   // [[11.5]] */
export function linear(x, w, b, sums) {
  const cols = transpose(w); // (m, k)
  const out = matrix(x.length, cols.length); // (n, m)
  for (let i = 0; i < x.length; i++) {
    const row = out[i];
    for (let j = 0; j < cols.length; j++) row[j] = sums.dot(x[i], cols[j], x[i].length, b[j]);
  }
  return out;
}

/** Elementwise sum of two matrices. One addition of two floats is already exactly rounded.
 *
 *     add([[1, 2]], [[0.5, 0.25]])   // [[1.5, 2.25]] */
export function add(a, b) {
  const out = matrix(a.length, a[0].length); // (n, m)
  for (let i = 0; i < a.length; i++) {
    const o = out[i], ra = a[i], rb = b[i];
    for (let j = 0; j < o.length; j++) o[j] = ra[j] + rb[j];
  }
  return out;
}

/** The sum of each column: a (n, m) -> (m,).
 *
 *     column_sums([[1, 2], [3, 4]], EXACT)   // [4, 6] */
export function column_sums(a, sums) {
  const cols = transpose(a); // (m, n)
  return Float64Array.from(cols, (col) => sums.sum(col)); // (m,)
}

// ----------------------------------------------------------------------------------------------------------------
// Parameters

// name -> shape, in the order of the parameter dict (model.py's PARAM_SHAPES); V, d, H and L come from a config
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

// the parameters of one block, in the order above: the layers of a block read only these
export const BLOCK_PARAMS = ["ln1_g", "ln1_b", "Wq", "Wk", "Wv", "Wo", "ln2_g", "ln2_b", "W1", "b1", "W2", "b2"];

/** Every parameter's shape for a config.
 *
 *     param_shapes({vocab: 96, d: 4, hidden: 8, max_len: 8}).W1   // [4, 8] */
export function param_shapes(config) {
  const sizes = { V: config.vocab, d: config.d, H: config.hidden, L: config.max_len };
  return Object.fromEntries(Object.entries(PARAM_SHAPES).map(([name, dims]) => [name, dims.map((s) => sizes[s])]));
}

/** Fresh parameters, the same numbers as model.init_params: matrices gauss(0, 0.02) drawn in dict order row by
 * row from one Random(seed), gains 1.0, biases 0.0.
 *
 *     init_params(96, 4, 8, 8, 3).ln1_g   // Float64Array [1, 1, 1, 1] */
export function init_params(vocab, d, hidden, max_len, seed) {
  const rng = new Random(seed);
  const params = {};
  for (const [name, dims] of Object.entries(param_shapes({ vocab, d, hidden, max_len }))) {
    if (dims.length === 2) {
      const m = matrix(dims[0], dims[1]); // (rows, cols)
      for (const row of m) for (let j = 0; j < row.length; j++) row[j] = rng.gauss(0.0, 0.02);
      params[name] = m;
    } else {
      params[name] = new Float64Array(dims[0]).fill(name.endsWith("_g") ? 1.0 : 0.0); // (n,)
    }
  }
  return params;
}

/** The number of floats in a parameter dict.
 *
 *     count_params(init_params(96, 16, 64, 64, 3))   // 7440 */
export function count_params(params) {
  return Object.values(params).reduce((n, t) => n + shape(t).reduce((a, b) => a * b, 1), 0);
}

/** Read the config (vocab, d, hidden, max_len, blocks, heads) off a parameter dict, and check that every tensor has
 * the shape it implies; a bad dict is an Error naming the tensor.
 *
 *     config_of(init_params(96, 4, 8, 8, 3))   // {vocab: 96, d: 4, hidden: 8, max_len: 8, blocks: 1, heads: 1} */
export function config_of(params) {
  const missing = Object.keys(PARAM_SHAPES).filter((name) => !(name in params));
  if (missing.length) throw new Error(`parameter dict is missing tensors: ${missing.join(", ")}`);
  const extra = Object.keys(params).filter((name) => !(name in PARAM_SHAPES));
  if (extra.length) throw new Error(`parameter dict has unknown tensors: ${extra.join(", ")}`);
  const [vocab, d] = shape(params.tok_emb);
  const config = { vocab, d, hidden: params.b1.length, max_len: params.pos_emb.length, blocks: 1, heads: 1 };
  for (const [name, want] of Object.entries(param_shapes(config))) {
    const t = params[name];
    const got = want.length === 2 && Array.isArray(t) && t.every((r) => r instanceof Float64Array)
      ? [t.length, t[0].length]
      : want.length === 1 && t instanceof Float64Array ? [t.length] : null;
    if (got === null || got.join() !== want.join() || (want.length === 2 && t.some((r) => r.length !== want[1]))) {
      throw new Error(`parameter ${name} has shape (${got ? got.join(", ") : "not a matrix of Float64Array rows or a Float64Array"}), expected (${want.join(", ")})`);
    }
  }
  return config;
}

/** The parameters of block i (layer norms, attention and MLP), under the names the block's layers read. Today there
 * is one block, whose parameters are model.py's top-level names.
 *
 *     block_params(p, 0).Wq === p.Wq   // true */
export function block_params(params, i) {
  if (i !== 0) throw new Error(`block ${i}: this model has one block (block 0)`);
  return Object.fromEntries(BLOCK_PARAMS.map((name) => [name, params[name]]));
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

// ----------------------------------------------------------------------------------------------------------------
// Layer norm: each row to mean 0 and variance 1, then a gain g and a bias b per column

/** Normalise each row of x (T, n); return [out, cache].
 *
 *     layernorm_forward([[1, 3]], [1, 1], [0, 0], EXACT)[0]   // [[-0.99999..., 0.99999...]] */
export function layernorm_forward(x, g, b, sums) {
  const n = g.length;
  const out = matrix(x.length, n); // (T, n)
  const xhat = matrix(x.length, n); // (T, n)
  const std = new Float64Array(x.length); // (T,)
  const centred = new Float64Array(n); // (n,)
  for (let t = 0; t < x.length; t++) {
    const row = x[t];
    const mu = sums.sum(row) / n;
    for (let j = 0; j < n; j++) centred[j] = row[j] - mu;
    const s = Math.sqrt(sums.dot(centred, centred) / n + EPS);
    const xh = xhat[t], o = out[t];
    for (let j = 0; j < n; j++) {
      xh[j] = centred[j] / s;
      o[j] = g[j] * xh[j] + b[j];
    }
    std[t] = s;
  }
  return [out, { xhat, std }];
}

/** Gradients [dx, dg, db] of layer norm, given dy (T, n) = d loss / d out.
 *
 * With u = dy * g, each row's dx = (u - mean(u) - xhat * mean(u * xhat)) / sqrt(var + EPS). */
export function layernorm_backward(dy, g, cache, sums) {
  const n = g.length;
  const dx = matrix(dy.length, n); // (T, n)
  const u = new Float64Array(n); // (n,)
  for (let t = 0; t < dy.length; t++) {
    const dyr = dy[t], xh = cache.xhat[t], s = cache.std[t], dxr = dx[t];
    for (let j = 0; j < n; j++) u[j] = dyr[j] * g[j];
    const mean_u = sums.sum(u) / n;
    const mean_ux = sums.dot(u, xh) / n;
    for (let j = 0; j < n; j++) dxr[j] = (u[j] - mean_u - xh[j] * mean_ux) / s;
  }
  const dy_xhat = matrix(dy.length, n); // (T, n)
  for (let t = 0; t < dy.length; t++) for (let j = 0; j < n; j++) dy_xhat[t][j] = dy[t][j] * cache.xhat[t][j];
  return [dx, column_sums(dy_xhat, sums), column_sums(dy, sums)]; // (T, n), (n,), (n,)
}

// ----------------------------------------------------------------------------------------------------------------
// Causal self-attention, one head of width d: position i reads positions 0..i only

/** Causal single-head attention of x (T, d) with a block's Wq, Wk, Wv, Wo; return [(attn v) Wo, cache].
 * cache.weights is (T, T), zero above the diagonal. */
export function attention_forward(block, x, sums) {
  const T = x.length;
  const d = x[0].length;
  const scale = 1.0 / Math.sqrt(d);
  const q = matmul(x, block.Wq, sums); // (T, d)
  const k = matmul(x, block.Wk, sums); // (T, d)
  const v = matmul(x, block.Wv, sums); // (T, d)
  const v_cols = transpose(v); // (d, T)
  const weights = matrix(T, T); // (T, T)
  const ctx = matrix(T, d); // (T, d)
  for (let i = 0; i < T; i++) {
    const scores = new Float64Array(i + 1); // (i+1,) the mask: j > i is never read
    for (let j = 0; j <= i; j++) scores[j] = sums.dot(q[i], k[j]) * scale;
    let top = -Infinity;
    for (const s of scores) top = Math.max(top, s);
    const e = scores.map((s) => Math.exp(s - top)); // (i+1,)
    const z = sums.sum(e);
    const w = weights[i]; // (T,) zeros past i
    for (let j = 0; j <= i; j++) w[j] = e[j] / z;
    for (let c = 0; c < d; c++) ctx[i][c] = sums.dot(w, v_cols[c], i + 1);
  }
  const out = matmul(ctx, block.Wo, sums); // (T, d)
  return [out, { x, q, k, v, weights, ctx }];
}

/** Gradients of attention: dout (T, d) -> [{Wq, Wk, Wv, Wo}, dx (T, d)]. */
export function attention_backward(block, cache, dout, sums) {
  const { x, q, k, v, weights, ctx } = cache;
  const T = x.length;
  const d = x[0].length;
  const scale = 1.0 / Math.sqrt(d);
  const dWo = matmul(transpose(ctx), dout, sums); // (d, d)
  const dctx = matmul_bt(dout, block.Wo, sums); // (T, d)

  // through the weighted sum ctx[i] = sum_j w[i][j] v[j], then through each row's softmax
  const dscores = matrix(T, T); // (T, T) zero above the diagonal
  const dw = new Float64Array(T); // (T,) of which i+1 are used
  for (let i = 0; i < T; i++) {
    const w = weights[i];
    for (let j = 0; j <= i; j++) dw[j] = sums.dot(dctx[i], v[j]);
    const mean_dw = sums.dot(w, dw, i + 1);
    for (let j = 0; j <= i; j++) dscores[i][j] = w[j] * (dw[j] - mean_dw) * scale; // the 1/sqrt(d) included
  }
  const dctx_cols = transpose(dctx); // (d, T)
  const q_cols = transpose(q); // (d, T)
  const k_cols = transpose(k); // (d, T)
  const w_cols = transpose(weights); // (T, T) row j: who read position j
  const ds_cols = transpose(dscores); // (T, T)
  const dq = matrix(T, d); // (T, d)
  const dk = matrix(T, d); // (T, d)
  const dv = matrix(T, d); // (T, d)
  for (let j = 0; j < T; j++) {
    const w_col = w_cols[j].subarray(j); // (T-j,) the positions i >= j that read position j
    const ds_col = ds_cols[j].subarray(j); // (T-j,)
    for (let c = 0; c < d; c++) {
      dv[j][c] = sums.dot(w_col, dctx_cols[c].subarray(j));
      dk[j][c] = sums.dot(ds_col, q_cols[c].subarray(j));
      dq[j][c] = sums.dot(dscores[j], k_cols[c], j + 1);
    }
  }

  const x_cols = transpose(x); // (d, T)
  const grads = {
    Wq: matmul(x_cols, dq, sums), // (d, d)
    Wk: matmul(x_cols, dk, sums), // (d, d)
    Wv: matmul(x_cols, dv, sums), // (d, d)
    Wo: dWo, // (d, d)
  };
  // x feeds q, k and v: its gradient is one sum over all three paths
  const dqkv = matrix(T, 3 * d); // (T, 3d) rows joined
  for (let t = 0; t < T; t++) {
    dqkv[t].set(dq[t], 0);
    dqkv[t].set(dk[t], d);
    dqkv[t].set(dv[t], 2 * d);
  }
  const w_qkv = matrix(d, 3 * d); // (d, 3d)
  for (let r = 0; r < d; r++) {
    w_qkv[r].set(block.Wq[r], 0);
    w_qkv[r].set(block.Wk[r], d);
    w_qkv[r].set(block.Wv[r], 2 * d);
  }
  const dx = matmul_bt(dqkv, w_qkv, sums); // (T, d)
  return [grads, dx];
}

// ----------------------------------------------------------------------------------------------------------------
// The model: embeddings, the block (attention and MLP, each with a skip path), final layer norm, logits

/** One pre-norm block on the stream x (T, d) with the block's parameters; return [x2, cache]. */
export function block_forward(block, x, sums) {
  const [h1, ln1] = layernorm_forward(x, block.ln1_g, block.ln1_b, sums); // (T, d)
  const [a, att] = attention_forward(block, h1, sums); // (T, d)
  const x1 = add(x, a); // (T, d) skip path 1
  const [h2, ln2] = layernorm_forward(x1, block.ln2_g, block.ln2_b, sums); // (T, d)
  const pre = linear(h2, block.W1, block.b1, sums); // (T, H)
  const act = pre.map((row) => row.map((z) => (z > 0.0 ? z : 0.0))); // (T, H) ReLU
  const m = linear(act, block.W2, block.b2, sums); // (T, d)
  const x2 = add(x1, m); // (T, d) skip path 2
  return [x2, { x, h1, ln1, att, x1, h2, ln2, pre, act, x2 }];
}

/** Logits (T, V) for a list of T token IDs, and the cache the backward pass needs.
 *
 *     const [logits, cache] = forward(init_params(96, 4, 8, 8, 3), [1, 2, 3]);
 *     shape(logits), shape(cache.blocks[0].att.weights)   // [3, 96], [3, 3] */
export function forward(params, ids, use_positions = true, sums = EXACT) {
  const config = config_of(params);
  check_ids(ids, config.vocab);
  const T = ids.length;
  if (T === 0) throw new Error("empty sequence: forward needs at least one token ID");
  if (T > config.max_len) {
    throw new Error(`sequence of ${T} tokens is longer than the ${config.max_len} positions the model has`);
  }

  let x0 = matrix(T, config.d); // (T, d)
  for (let t = 0; t < T; t++) x0[t].set(params.tok_emb[ids[t]]);
  if (use_positions) x0 = add(x0, params.pos_emb.slice(0, T)); // (T, d)
  let x = x0;
  const blocks = [];
  for (let i = 0; i < config.blocks; i++) {
    const [out, c] = block_forward(block_params(params, i), x, sums); // (T, d)
    blocks.push(c);
    x = out;
  }
  const [hf, lnf] = layernorm_forward(x, params.lnf_g, params.lnf_b, sums); // (T, d)
  const logits = linear(hf, params.W_out, params.b_out, sums); // (T, V)
  return [logits, { ids: Array.from(ids), use_positions, config, x0, blocks, hf, lnf }];
}

// ----------------------------------------------------------------------------------------------------------------
// The loss: mean cross-entropy of the next token

/** Mean over positions of -log softmax(logits[t])[targets[t]], and its gradient (softmax - onehot) / T.
 *
 *     loss_and_dlogits([[0, 0]], [1], EXACT)   // [0.6931471805599453, [[0.5, -0.5]]] */
export function loss_and_dlogits(logits, targets, sums = EXACT) {
  const T = logits.length;
  const vocab = T ? logits[0].length : 0;
  check_ids(targets, vocab, "target IDs");
  if (targets.length !== T) throw new Error(`${T} positions but ${targets.length} targets`);
  const losses = new Float64Array(T); // (T,)
  const dlogits = matrix(T, vocab); // (T, V)
  for (let t = 0; t < T; t++) {
    const row = logits[t], y = targets[t], p = dlogits[t];
    let top = -Infinity;
    for (const z of row) top = Math.max(top, z);
    for (let j = 0; j < vocab; j++) p[j] = Math.exp(row[j] - top); // (V,) softmax numerators
    const total = sums.sum(p);
    losses[t] = top + Math.log(total) - row[y];
    for (let j = 0; j < vocab; j++) p[j] /= total; // (V,) softmax
    p[y] -= 1.0;
    for (let j = 0; j < vocab; j++) p[j] /= T;
  }
  return [sums.sum(losses) / T, dlogits];
}

/** The loss of predicting targets from ids, as one number. */
export function sequence_loss(params, ids, targets, use_positions = true, sums = EXACT) {
  const [logits] = forward(params, ids, use_positions, sums);
  return loss_and_dlogits(logits, targets, sums)[0];
}

// ----------------------------------------------------------------------------------------------------------------
// The backward pass of the whole model, last layer first

/** The gradients of one block's parameters and of its input stream, given dx2 (T, d) = d loss / d (block output). */
export function block_backward(block, cache, dx2, sums) {
  const g = {};
  // x2 = x1 + m: the gradient goes to the MLP branch and to the skip path unchanged
  const dm = dx2; // (T, d)
  g.b2 = column_sums(dm, sums); // (d,)
  g.W2 = matmul(transpose(cache.act), dm, sums); // (H, d)
  const dact = matmul_bt(dm, block.W2, sums); // (T, H)
  const dpre = dact.map((ra, t) => ra.map((da, j) => (cache.pre[t][j] > 0.0 ? da : 0.0))); // (T, H) ReLU
  g.b1 = column_sums(dpre, sums); // (H,)
  g.W1 = matmul(transpose(cache.h2), dpre, sums); // (d, H)
  const dh2 = matmul_bt(dpre, block.W1, sums); // (T, d)
  const [dx1_mlp, ln2_g, ln2_b] = layernorm_backward(dh2, block.ln2_g, cache.ln2, sums); // (T, d)
  Object.assign(g, { ln2_g, ln2_b });
  const dx1 = add(dx2, dx1_mlp); // (T, d) skip path 2: both contributions added

  // x1 = x + attention(LayerNorm(x)): again two paths
  const [att_grads, dh1] = attention_backward(block, cache.att, dx1, sums); // (T, d)
  const [dx_att, ln1_g, ln1_b] = layernorm_backward(dh1, block.ln1_g, cache.ln1, sums); // (T, d)
  Object.assign(g, att_grads, { ln1_g, ln1_b });
  const dx = add(dx1, dx_att); // (T, d) skip path 1: both contributions added
  return [Object.fromEntries(BLOCK_PARAMS.map((name) => [name, g[name]])), dx];
}

/** One gradient per parameter (same names, shapes and order), given dlogits (T, V) = d loss / d logits. */
export function backward(params, cache, dlogits, sums = EXACT) {
  const { ids, config } = cache;
  const T = ids.length;
  const g = {};

  // logits = LayerNorm(x2) W_out + b_out
  g.b_out = column_sums(dlogits, sums); // (V,)
  g.W_out = matmul(transpose(cache.hf), dlogits, sums); // (d, V)
  const dhf = matmul_bt(dlogits, params.W_out, sums); // (T, d)
  let [dx, lnf_g, lnf_b] = layernorm_backward(dhf, params.lnf_g, cache.lnf, sums); // (T, d)
  Object.assign(g, { lnf_g, lnf_b });

  for (let i = config.blocks - 1; i >= 0; i--) {
    const [block_grads, dx_in] = block_backward(block_params(params, i), cache.blocks[i], dx, sums); // (T, d)
    Object.assign(g, block_grads);
    dx = dx_in;
  }

  // x0 = tok_emb[ids] + pos_emb[0:T]: a token's row collects every position that used it
  g.tok_emb = matrix(config.vocab, config.d); // (V, d)
  for (const token of new Set(ids)) {
    const rows = [];
    for (let t = 0; t < T; t++) if (ids[t] === token) rows.push(dx[t]);
    g.tok_emb[token].set(column_sums(rows, sums)); // (d,)
  }
  g.pos_emb = matrix(config.max_len, config.d); // (L, d) rows past T stay exactly zero
  if (cache.use_positions) for (let t = 0; t < T; t++) g.pos_emb[t].set(dx[t]);
  return Object.fromEntries(Object.keys(PARAM_SHAPES).map((name) => [name, g[name]])); // the parameters' order
}
