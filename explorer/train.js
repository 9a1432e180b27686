// train.js: train.py's training step in JavaScript: the same data split, batch sampler, learning-rate schedule,
// gradient clipping and Adam, on model.js with plain sums (float64), for a model of any blocks, heads and position
// scheme (its model_config, passed beside the weights); docs/training.md, "A run", says what a step does. worker.js
// runs it off the page's thread.
//
//     const s = {...DEFAULTS, steps: 50};
//     const config = model_config({ vocab: 96, d: 16, hidden: 64, max_len: 64 });
//     const state = fresh_state(init_params(config, 3), 3);
//     const {loss} = train_step(state, draw_windows(state.rng, stream, s), config, s);

import * as fast from "./fast.js";
import * as model from "./model.js";
import { Random } from "./random.js";

// the live run's own settings (how fast: docs/developers.md, "How fast the explorer trains"); the rest are
// train.py's defaults, manifest.json's "training"
export const DEFAULTS = {
  steps: 2000, // optimiser steps in the whole run
  batch: 8, // windows per step
  seq_len: 64, // tokens per window (the model's 64 positions)
  eval_every: 100, // steps between validation losses (also at the start and the end)
};

// ----------------------------------------------------------------------------------------------------------------
// Data: the split by whole stories (or of your own text), training windows, validation sequences

/** {stream, val_ids, val_tokens} from the split train.py trains and validates on (explore.py exports it), as
 * oneblock/data.py's load_data (the stories) and prepare_text (your own text, split.text). */
export function load_data(tok, split) {
  let stream, val_ids;
  if (split.text !== undefined) {
    stream = Int32Array.from(tok.encode(split.train)); // (n,)
    val_ids = windows(tok.encode(split.val), split.seq_len);
  } else {
    stream = Int32Array.from(tok.encode(split.train.map((story) => story + "\n").join(""))); // (n,)
    const newline = tok.encode("\n");
    val_ids = split.val.map((story) => [...newline, ...tok.encode(story + "\n")]);
  }
  const val_tokens = val_ids.reduce((n, ids) => n + ids.length - 1, 0);
  return { stream, val_ids, val_tokens };
}

/** Consecutive windows of up to length + 1 IDs that overlap by one, as train.windows.
 *
 *     windows([1, 2, 3, 4, 5, 6], 2)   // [[1, 2, 3], [3, 4, 5], [5, 6]] */
export function windows(ids, length) {
  const out = [];
  for (let i = 0; i < ids.length - 1; i += length) out.push(ids.slice(i, i + length + 1));
  return out;
}

/** The B windows (arrays of T + 1 token IDs) of one step, each from a start drawn as train.draw_starts draws it. */
export function draw_windows(rng, stream, s) {
  return Array.from({ length: s.batch }, () => {
    const start = rng.randrange(stream.length - s.seq_len);
    return Array.from(stream.subarray(start, start + s.seq_len + 1));
  });
}

/** The learning rate of step (0-based): linear warm-up to s.lr, then a cosine down to s.min_lr at the last step.
 *
 *     learning_rate(60, {lr: 1, min_lr: 0.1, warmup: 10, steps: 111})   // 0.55 */
export function learning_rate(step, s) {
  if (step < s.warmup) return (s.lr * (step + 1)) / s.warmup;
  const progress = (step - s.warmup) / Math.max(1, s.steps - 1 - s.warmup); // 0 after the warm-up, 1 at the last step
  return s.min_lr + 0.5 * (s.lr - s.min_lr) * (1.0 + Math.cos(Math.PI * progress));
}

// ----------------------------------------------------------------------------------------------------------------
// Tensors: every loop below runs over a tensor's numbers, a vector's or a matrix's data

const numbers = (t) => (t instanceof Float64Array ? t : t.data);

/** A dict of zero tensors shaped like params (Adam's moments at the start). */
export function zeros_like(params) {
  const zero = (t) => (t instanceof Float64Array ? new Float64Array(t.length) : model.matrix(t.rows, t.cols));
  return Object.fromEntries(Object.entries(params).map(([name, t]) => [name, zero(t)]));
}

// ----------------------------------------------------------------------------------------------------------------
// One step

/** The mean loss over the B windows and its gradient: the mean of the windows' gradients, which is the gradient of
 * the mean over all B * T positions because every window has T positions. config: the model's (model_config);
 * sums: PLAIN (training) or EXACT. */
export function loss_and_grads(params, windows, config, sums = model.PLAIN) {
  let total_loss = 0.0;
  const grads = zeros_like(params);
  for (const window of windows) {
    const pass = () => model.loss_and_grads(params, window.slice(0, -1), window.slice(1), config, sums);
    const [loss, g] = fast.reusing(pool, pass);
    total_loss += loss;
    for (const name in g) { // grads += g, tensor by tensor (g is in the pool, which the next window reuses)
      const to = numbers(grads[name]), from = numbers(g[name]);
      for (let j = 0; j < to.length; j++) to[j] += from[j];
    }
  }
  scale(grads, 1.0 / windows.length);
  return [total_loss / windows.length, grads];
}

const pool = { buffers: [] }; // the buffers of a window's forward and backward pass, reused by the next window

/** Every number of every gradient times factor, in place. */
export function scale(grads, factor) {
  for (const t of Object.values(grads)) {
    const x = numbers(t);
    for (let j = 0; j < x.length; j++) x[j] *= factor;
  }
}

/** One Adam step number t (1-based) with bias correction, in place. */
export function adam(params, grads, m, v, t, lr, s) {
  const c1 = 1.0 - s.beta1 ** t;
  const c2 = 1.0 - s.beta2 ** t;
  for (const name in params) {
    const p = numbers(params[name]), g = numbers(grads[name]), mt = numbers(m[name]), vt = numbers(v[name]);
    for (let j = 0; j < p.length; j++) {
      mt[j] = mt[j] * s.beta1 + (1.0 - s.beta1) * g[j];
      vt[j] = vt[j] * s.beta2 + (1.0 - s.beta2) * (g[j] * g[j]);
      p[j] -= (lr * (mt[j] / c1)) / (Math.sqrt(vt[j] / c2) + s.eps);
    }
  }
}

/** The state before the first step: the given weights (trained in place, not copied), zero moments, a batch sampler
 * seeded with seed. */
export function fresh_state(params, seed) {
  return { params, m: zeros_like(params), v: zeros_like(params), rng: new Random(seed), step: 0 };
}

/** One optimiser step on state {params, m, v, step}, the weights of the model of config, with the given windows;
 * returns {loss, norm}. A non-finite loss or gradient leaves the weights and the moments as they were (the caller
 * stops the run). */
export function train_step(state, windows, config, s) {
  const [loss, grads] = loss_and_grads(state.params, windows, config);
  let squares = 0.0;
  for (const t of Object.values(grads)) for (const x of numbers(t)) squares += x * x;
  const norm = Math.sqrt(squares); // the length of the whole gradient
  if (Number.isFinite(loss) && Number.isFinite(norm)) {
    if (norm > s.clip) scale(grads, s.clip / norm);
    adam(state.params, grads, state.m, state.v, state.step + 1, learning_rate(state.step, s), s);
    state.step += 1;
  }
  return { loss, norm };
}

/** The loss -log softmax(row)[target] of one row of logits (nats, plain sums), and the row's argmax, the first of the
 * largest: what the experiments measure at each position.
 *
 *     token_loss([0, 0], 1)   // [0.6931471805599453, 0] */
export function token_loss(row, target) {
  let top = 0;
  for (let j = 1; j < row.length; j++) if (row[j] > row[top]) top = j;
  let z = 0.0;
  for (let j = 0; j < row.length; j++) z += Math.exp(row[j] - row[top]);
  return [Math.log(z) + row[top] - row[target], top];
}

/** Total -log p (nats) of predicting tokens 1.. of each story from the ones before, for the model of config. */
export function story_nats(params, stories, config) {
  let total = 0.0;
  for (const ids of stories) {
    total += model.sequence_loss(params, ids.slice(0, -1), ids.slice(1), config, model.PLAIN) * (ids.length - 1);
  }
  return total;
}
