// trace_block.js: the checks of trace_block.py that the page runs itself: the word-order gaps and the
// finite-difference gradient check of a tiny copy of the model (of the loaded model's blocks, heads and position
// scheme). Every sum is exact (model.EXACT), as in model.py, so a gap that is zero in Python is zero here, to the
// last bit.
//
//     last_logits_gap(params, tok.encode(ORDER_A), tok.encode(ORDER_B), "none", 1)   // 0, exactly
//     gradient_errors(init_params(96, 4, 8, 8, 3), x, y, "learned", 1)              // {tok_emb: 5.5e-10, ...}

import { EXACT, backward, forward, loss_and_dlogits, sequence_loss, shape } from "./model.js";

export const TINY = { d: 4, hidden: 8, max_len: 8, seed: 3 }; // trace_block.TINY: small enough to check every number
export const STEP = 1e-6; // central-difference step of the gradient check

/** The sizes of the tiny copy of a model of `blocks` blocks, `heads` heads and the scheme positions: TINY's, with the
 * width raised where the heads need it (each head at least 1 wide; with rope, an even width per head).
 *
 *     tiny_config(1, 1, "learned")   // {d: 4, hidden: 8, max_len: 8, seed: 3, blocks: 1, heads: 1}
 *     tiny_config(3, 4, "rope").d    // 8: four heads of width 2 */
export function tiny_config(blocks, heads, positions) {
  let width = Math.max(1, Math.ceil(TINY.d / heads)); // of one head
  if (positions === "rope" && width % 2) width += 1;
  const d = width * heads;
  return { ...TINY, d, hidden: TINY.hidden * (d / TINY.d), blocks, heads };
}

// ----------------------------------------------------------------------------------------------------------------
// Word order

/** The largest |logit difference| between two token sequences at each position they share, unrounded.
 *
 *     position_gaps(p, a, b, "none", 1)   // [0, 0, 0.222, ..., 0] for the trace's two sentences at initialisation */
export function position_gaps(params, a, b, positions, heads) {
  const [la] = forward(params, a, positions, heads, EXACT); // (Ta, V)
  const [lb] = forward(params, b, positions, heads, EXACT); // (Tb, V)
  const V = la.cols;
  return Array.from({ length: Math.min(la.rows, lb.rows) }, (_, t) => {
    let gap = 0.0;
    for (let j = 0; j < V; j++) gap = Math.max(gap, Math.abs(la.data[t * V + j] - lb.data[t * V + j]));
    return gap;
  });
}

/** The largest |logit difference| at the last position of two sequences of the same length. */
export function last_logits_gap(params, a, b, positions, heads) {
  if (a.length !== b.length) throw new Error(`the two sequences have ${a.length} and ${b.length} tokens; the last positions only line up when they have the same number`);
  return position_gaps(params, a, b, positions, heads).at(-1);
}

// ----------------------------------------------------------------------------------------------------------------
// The gradient check: every number of every tensor nudged by STEP both ways

/** Yield [name, shape, largest |central difference - backward|] tensor by tensor, so that a page can show progress
 * between tensors. backward_fn is model.backward unless a test swaps in a broken one to see the check fail. */
export function* gradient_errors_by_tensor(params, x, y, positions, heads, backward_fn = backward) {
  const [logits, cache] = forward(params, x, positions, heads, EXACT);
  const [, dlogits] = loss_and_dlogits(logits, y, EXACT);
  const grads = backward_fn(params, cache, dlogits, EXACT);
  for (const [name, tensor] of Object.entries(params)) {
    const values = tensor instanceof Float64Array ? tensor : tensor.data;
    const grad = grads[name] instanceof Float64Array ? grads[name] : grads[name].data;
    let worst = 0.0;
    for (let j = 0; j < values.length; j++) {
      const saved = values[j];
      values[j] = saved + STEP;
      const up = sequence_loss(params, x, y, positions, heads, EXACT);
      values[j] = saved - STEP;
      const down = sequence_loss(params, x, y, positions, heads, EXACT);
      values[j] = saved;
      worst = Math.max(worst, Math.abs((up - down) / (2 * STEP) - grad[j]));
    }
    yield [name, shape(tensor), worst];
  }
}

/** {name: largest |central difference - backward|} over every number of every tensor (step 1e-6). */
export function gradient_errors(params, x, y, positions, heads, backward_fn = backward) {
  const errors = {};
  for (const [name, , worst] of gradient_errors_by_tensor(params, x, y, positions, heads, backward_fn)) errors[name] = worst;
  return errors;
}
