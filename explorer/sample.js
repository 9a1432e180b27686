// sample.js: sample.py's choice of the next token in JavaScript (docs/explorer.md, "The panels": Sample).
//
//     choose([0, 3, 1], 0, 0, null)   // 1: greedy takes the first of the largest logits

import { fsum } from "./model.js";

/** The next token ID from one position's logits (V numbers), as oneblock/sampling.py's choose (rng: a random.js
 * Random). */
export function choose(logits, temperature, top_k, rng) {
  const V = logits.length;
  if (temperature === 0) {
    let best = 0;
    for (let i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    return best;
  }
  // (V,) IDs, largest first, ties by ID
  const ranked = Array.from({ length: V }, (_, i) => i).sort((i, j) => logits[j] - logits[i] || i - j);
  const kept = (top_k ? ranked.slice(0, top_k) : ranked.slice()).sort((i, j) => i - j); // (k,) IDs, back in ID order
  const top = logits[ranked[0]];
  const weights = kept.map((i) => Math.exp((logits[i] - top) / temperature)); // (k,) softmax numerators
  const u = rng.random() * fsum(weights);
  let total = 0.0;
  for (let n = 0; n < kept.length; n++) {
    total += weights[n];
    if (u < total) return kept[n];
  }
  return kept.at(-1); // u landed on the rounding error past the last cumulative sum
}
