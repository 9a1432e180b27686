// trace_block.js: the checks of trace_block.py that the page runs itself, with exact sums (model.EXACT): the word-order
// gaps and the gradient check of a tiny copy of the model (docs/explorer.md, "The panels": Word order, Check).
//
//     position_gaps(params, tok.encode(ORDER_A), tok.encode(ORDER_B), config).at(-1)   // 0, exactly: positions "none"
//     const tiny = tiny_config(config);
//     gradient_errors_by_tensor(init_params(tiny, TINY.seed), x, y, tiny)   // ["tok_emb", [96, 4], 5.5e-10], ...

import { EXACT, backward, forward, loss_and_dlogits, model_config, sequence_loss, shape } from "./model.js";

export const TINY = { d: 4, hidden: 8, max_len: 8, seed: 3 }; // trace_block.TINY: small enough to check every number
export const STEP = 1e-6; // central-difference step of the gradient check

/** The config of the tiny copy of a model (its model_config): TINY's sizes, with the rest of the model's config
 * (its vocabulary, blocks, heads, scheme and any other setting), and the width raised where the heads need it (each
 * head at least 1 wide; with rope, an even width per head). Its weights are drawn from TINY.seed.
 *
 *     tiny_config(model_config({ vocab: 96, d: 16, hidden: 64, max_len: 64 }))
 *     // {vocab: 96, d: 4, hidden: 8, max_len: 8, blocks: 1, heads: 1, positions: "learned"}
 *     tiny_config(model_config({ vocab: 96, d: 16, hidden: 64, max_len: 64, blocks: 3, heads: 4,
 *       positions: "rope" })).d   // 8: four heads of width 2 */
export function tiny_config(config) {
  const { heads, positions } = config;
  let width = Math.max(1, Math.ceil(TINY.d / heads)); // of one head
  if (positions === "rope" && width % 2) width += 1;
  const d = width * heads;
  const hidden = TINY.hidden * (d / TINY.d);
  return model_config({ ...config, d, hidden, max_len: TINY.max_len });
}

// ----------------------------------------------------------------------------------------------------------------
// Word order

/** The largest |logit difference| between two token sequences at each position they share, unrounded, for the
 * model of config.
 *
 *     position_gaps(p, a, b, config)   // [0, 0, 0.222, ..., 0] for the trace's two sentences at initialisation,
 *                                      // positions "none" */
export function position_gaps(params, a, b, config) {
  const [la] = forward(params, a, config, EXACT); // (Ta, V)
  const [lb] = forward(params, b, config, EXACT); // (Tb, V)
  const V = la.cols;
  return Array.from({ length: Math.min(la.rows, lb.rows) }, (_, t) => {
    let gap = 0.0;
    for (let j = 0; j < V; j++) gap = Math.max(gap, Math.abs(la.data[t * V + j] - lb.data[t * V + j]));
    return gap;
  });
}

// ----------------------------------------------------------------------------------------------------------------
// The gradient check: every number of every tensor nudged by STEP both ways

/** Yield [name, shape, largest |central difference - backward|] tensor by tensor, so that a page can show progress
 * between tensors. backward_fn is model.backward unless a test swaps in a broken one to see the check fail. */
export function* gradient_errors_by_tensor(params, x, y, config, backward_fn = backward) {
  const [logits, cache] = forward(params, x, config, EXACT);
  const [, dlogits] = loss_and_dlogits(logits, y, EXACT);
  const grads = backward_fn(params, cache, dlogits, EXACT);
  for (const [name, tensor] of Object.entries(params)) {
    const values = tensor instanceof Float64Array ? tensor : tensor.data;
    const grad = grads[name] instanceof Float64Array ? grads[name] : grads[name].data;
    let worst = 0.0;
    for (let j = 0; j < values.length; j++) {
      worst = Math.max(worst, Math.abs(central_difference(params, values, j, STEP, x, y, config) - grad[j]));
    }
    yield [name, shape(tensor), worst];
  }
}

/** (L(w + h) - L(w - h)) / 2h for the number w = values[j] of one of params' tensors, L the loss of predicting y
 * from x with exact sums; values[j] is w again afterwards. */
export function central_difference(params, values, j, h, x, y, config) {
  const saved = values[j];
  try {
    values[j] = saved + h;
    const up = sequence_loss(params, x, y, config, EXACT);
    values[j] = saved - h;
    const down = sequence_loss(params, x, y, config, EXACT);
    return (up - down) / (2 * h);
  } finally {
    values[j] = saved;
  }
}
