// induction.js: experiments/induction.py's copying task in JavaScript, which the page's "second block" experiment
// trains live (docs/explorer.md, "What a second block buys"): periodic sequences of token IDs, drawn as Python draws
// them, and what a model learned to copy from them.
//
//     periodic(new Random(0), 3).periods   // [10, 7, 15], as induction.periodic(random.Random(0), 3) in Python

import * as model from "./model.js";
import { token_loss } from "./train.js";

export const PERIODS = [4, 16]; // the shortest and longest repeated segment of an induction sequence
export const WINDOW = 64; // tokens an induction sequence is read in (the model's 64 positions)
export const VOCAB = 96; // the tokenizer's vocabulary: induction sequences are IDs 0..95
export const TEST_SEED = 1002; // random.Random seed of the test sequences (depth.py's)

// ----------------------------------------------------------------------------------------------------------------
// Periodic sequences

/** k distinct numbers of range(n), as Python's random.sample(range(n), k) draws them when n is larger than its
 * pool threshold (which it is for k <= 16 of 96): draw an index, again while it was drawn before.
 *
 *     sample_range(new Random(0), 96, 4)   // as random.Random(0).sample(range(96), 4) */
function sample_range(rng, n, k) {
  const chosen = new Set();
  const out = [];
  for (let i = 0; i < k; i++) {
    let j = rng.randrange(n);
    while (chosen.has(j)) j = rng.randrange(n);
    chosen.add(j);
    out.push(j);
  }
  return out;
}

/** count sequences of length tokens, each a segment of p distinct tokens (p from PERIODS, the tokens from the
 * VOCAB, both drawn with rng) repeated: {rows: count arrays of length IDs, periods: each p}. */
export function sequences(rng, count, length = WINDOW + 1) {
  const rows = [], periods = [];
  for (let n = 0; n < count; n++) {
    const p = PERIODS[0] + rng.randrange(PERIODS[1] - PERIODS[0] + 1); // rng.randint(4, 16)
    const segment = sample_range(rng, VOCAB, p);
    rows.push(Array.from({ length }, (_, t) => segment[t % p]));
    periods.push(p);
  }
  return { rows, periods };
}

/** {ids, targets, periods}: count sequences as induction.periodic makes them; ids are the first length - 1 tokens
 * of each, targets the last length - 1. */
export function periodic(rng, count, length = WINDOW + 1) {
  const { rows, periods } = sequences(rng, count, length);
  return { ids: rows.map((r) => r.slice(0, -1)), targets: rows.map((r) => r.slice(1)), periods };
}

// ----------------------------------------------------------------------------------------------------------------
// What a model learned: losses, copying, and each head's scores

/** {induction, previous_token} sums of one head on one sequence of period p, weights (T, T), and their counts, as
 * induction.head_scores defines them (induction_measures averages them over all the sequences). */
function head_sums(weights, p) {
  const T = weights.rows, W = weights.data;
  let induction = 0.0, previous = 0.0, copies = 0;
  for (let t = 0; t < T; t++) {
    if (t >= 1) previous += W[t * T + t - 1];
    if (t < p) continue; // not copyable
    copies += 1;
    for (let j = t + 1 - p; j >= 1; j -= p) induction += W[t * T + j];
  }
  return { induction, previous_token: previous, copies, positions: T - 1 };
}

/** What the model of config does on sequences {ids, targets, periods}: {loss, copy_loss, copy_accuracy,
 * first_period_loss} over the positions of each kind (induction.induction_measures), and scores: [[{induction,
 * previous_token} for each head] for each block] (induction.head_scores, over all sequences), with plain sums. keep:
 * the index of a sequence whose attention weights to return as `weights` (a list per block of a list per head of
 * (T, T) matrices), or null. */
export function induction_measures(params, config, set, keep = null) {
  const totals = { loss: [0, 0], copy_loss: [0, 0], copy_right: [0, 0], first_loss: [0, 0] }; // [sum, count]
  let score_sums = null;
  let weights = null;
  set.ids.forEach((ids, n) => {
    const [logits, cache] = model.forward(params, ids, config, model.PLAIN); // (T, V)
    const p = set.periods[n];
    for (let t = 0; t < logits.rows; t++) {
      const [loss, top] = token_loss(model.row(logits, t), set.targets[n][t]);
      add_to(totals.loss, loss);
      if (t >= p) { // copyable: the token at t occurred one period back, and the target followed it
        add_to(totals.copy_loss, loss);
        add_to(totals.copy_right, top === set.targets[n][t] ? 1 : 0);
      }
      if (t + 1 < p) add_to(totals.first_loss, loss); // the target is a token of the first segment, not yet seen
    }
    const sums = cache.blocks.map((block) => block.att.weights.map((w) => head_sums(w, p)));
    if (score_sums === null) score_sums = sums;
    else sums.forEach((block, b) => block.forEach((h, i) => {
      for (const key of Object.keys(h)) score_sums[b][i][key] += h[key];
    }));
    if (n === keep) weights = cache.blocks.map((block) => block.att.weights);
  });
  const mean = ([s, c]) => (c ? s / c : NaN);
  const score = (h) => ({ induction: h.induction / h.copies, previous_token: h.previous_token / h.positions });
  return {
    loss: mean(totals.loss),
    copy_loss: mean(totals.copy_loss),
    copy_accuracy: mean(totals.copy_right),
    first_period_loss: mean(totals.first_loss),
    scores: score_sums.map((block) => block.map(score)),
    weights,
  };
}

function add_to(pair, x) {
  pair[0] += x;
  pair[1] += 1;
}
