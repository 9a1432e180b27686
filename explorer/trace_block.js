// trace_block.js: the checks of trace_block.py that the page runs itself: the word-order gaps and the
// finite-difference gradient check of the tiny copy. Every sum is exact (model.EXACT), as in model.py, so a gap
// that is zero in Python is zero here, to the last bit.
//
//     last_logits_gap(params, tok.encode(ORDER_A), tok.encode(ORDER_B), false)   // 0, exactly
//     gradient_errors(init_params(96, 4, 8, 8, 3), x, y)                         // {tok_emb: 5.5e-10, ...}

import { EXACT, backward, forward, loss_and_dlogits, sequence_loss, shape } from "./model.js";

export const TINY = { d: 4, hidden: 8, max_len: 8, seed: 3 }; // trace_block.TINY: small enough to check every number
export const STEP = 1e-6; // central-difference step of the gradient check

// ----------------------------------------------------------------------------------------------------------------
// Word order

/** The largest |logit difference| between two token sequences at each position they share, unrounded.
 *
 *     position_gaps(p, a, b, false)   // [0, 0, 0.222, ..., 0] for the trace's two sentences at initialisation */
export function position_gaps(params, a, b, use_positions) {
  const [la] = forward(params, a, use_positions, EXACT); // (Ta, V)
  const [lb] = forward(params, b, use_positions, EXACT); // (Tb, V)
  return Array.from({ length: Math.min(la.length, lb.length) }, (_, t) => {
    let gap = 0.0;
    for (let j = 0; j < la[t].length; j++) gap = Math.max(gap, Math.abs(la[t][j] - lb[t][j]));
    return gap;
  });
}

/** The largest |logit difference| at the last position of two sequences of the same length. */
export function last_logits_gap(params, a, b, use_positions) {
  if (a.length !== b.length) throw new Error(`the two sequences have ${a.length} and ${b.length} tokens; the last positions only line up when they have the same number`);
  return position_gaps(params, a, b, use_positions).at(-1);
}

// ----------------------------------------------------------------------------------------------------------------
// The gradient check: every number of every tensor nudged by STEP both ways

/** Yield [name, shape, largest |central difference - backward|] tensor by tensor, so that a page can show progress
 * between tensors. backward_fn is model.backward unless a test swaps in a broken one to see the check fail. */
export function* gradient_errors_by_tensor(params, x, y, backward_fn = backward) {
  const [logits, cache] = forward(params, x, true, EXACT);
  const [, dlogits] = loss_and_dlogits(logits, y, EXACT);
  const grads = backward_fn(params, cache, dlogits, EXACT);
  for (const [name, tensor] of Object.entries(params)) {
    const rows = Array.isArray(tensor) ? tensor : [tensor]; // a vector is checked as one row
    const grad_rows = Array.isArray(tensor) ? grads[name] : [grads[name]];
    let worst = 0.0;
    rows.forEach((row, r) => {
      for (let j = 0; j < row.length; j++) {
        const saved = row[j];
        row[j] = saved + STEP;
        const up = sequence_loss(params, x, y, true, EXACT);
        row[j] = saved - STEP;
        const down = sequence_loss(params, x, y, true, EXACT);
        row[j] = saved;
        worst = Math.max(worst, Math.abs((up - down) / (2 * STEP) - grad_rows[r][j]));
      }
    });
    yield [name, shape(tensor), worst];
  }
}

/** {name: largest |central difference - backward|} over every number of every tensor (step 1e-6). */
export function gradient_errors(params, x, y, backward_fn = backward) {
  const errors = {};
  for (const [name, , worst] of gradient_errors_by_tensor(params, x, y, backward_fn)) errors[name] = worst;
  return errors;
}
