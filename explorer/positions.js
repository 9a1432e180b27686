// positions.js: experiments/positions.py's length extrapolation in JavaScript, which the page's "positions" experiment
// measures live (docs/explorer.md, "Past the positions it trained on").
//
//     const {inputs, targets} = windows(stream_of_val_ids, 128);
//     loss_by_position(params, config, inputs, targets).losses.length   // 128, for a config of positions "rope"

import * as model from "./model.js";
import { PLAIN } from "./model.js";
import * as train from "./train.js";

export const WINDOW = 128; // tokens per extrapolation window: twice the 64 positions the models train on

/** {inputs, targets}: consecutive windows of length tokens of the stream (an array of IDs); window w reads tokens
 * w length .. and predicts the next ones, as positions.windows.
 *
 *     windows([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 4).inputs   // [[1, 2, 3, 4], [5, 6, 7, 8]] */
export function windows(stream, length = WINDOW) {
  const full = train.windows(Array.from(stream), length).filter((w) => w.length === length + 1); // train.py's, whole
  return { inputs: full.map((w) => w.slice(0, -1)), targets: full.map((w) => w.slice(1)) };
}

/** The held-out text as one stream of IDs, as windows reads it: a newline, then each story and its newline; for a
 * text of your own (split.text), its held-out part. */
export function validation_stream(tok, split) {
  if (split.text !== undefined) return tok.encode(split.val);
  return tok.encode("\n" + split.val.map((story) => story + "\n").join(""));
}

/** {losses, refusal}: the mean -log p of the target at each position over the windows for the model of config, with
 * plain sums; for a scheme that cannot read the whole window (learned, past its rows), the first max_len positions
 * only, and the message of the refusal (else null), as positions.loss_by_position. */
export function loss_by_position(params, config, inputs, targets) {
  let refusal = null;
  let T = inputs[0].length;
  try {
    model.check_length(T, config);
  } catch (e) {
    refusal = e.message;
    T = config.max_len;
  }
  const losses = new Float64Array(T); // (T,)
  inputs.forEach((ids, n) => {
    const [logits] = model.forward(params, ids.slice(0, T), config, PLAIN); // (T, V)
    for (let t = 0; t < T; t++) losses[t] += train.token_loss(model.row(logits, t), targets[n][t])[0];
  });
  for (let t = 0; t < T; t++) losses[t] /= inputs.length;
  return { losses: Array.from(losses), refusal };
}

/** The mean of losses[from..to) (a loss_by_position's), or null when they are not all there.
 *
 *     mean_loss([1, 2, 3, 4], 1, 3), mean_loss([1, 2], 0, 4)   // 2.5, null */
export function mean_loss(losses, from = 0, to = losses.length) {
  return losses.length >= to ? losses.slice(from, to).reduce((a, b) => a + b, 0) / (to - from) : null;
}
