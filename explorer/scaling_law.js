// scaling_law.js: experiments/scaling_law.py's scaling law and its fit in JavaScript, and the scaling lesson's numbers
// (experiments/lessons_scaling.py's scaling_numbers), which the page computes from the record's cells: the JSON that
// scaling_law.law_points writes, {format, floor, cells: [{size, budget, n, d, loss}]}.
//
// The law is L = E + A / N^alpha + B / D^beta, fitted by least squares on log L from the same three starts and
// within the same bounds as the Python. Python's fit is SciPy's least_squares (a trust region, its default
// tolerances); this one is a Levenberg-Marquardt on the same residuals with their exact derivatives, in float64,
// run until no step lowers the cost and then polished by Gauss-Newton steps: the minimum itself, which SciPy's
// default tolerances stop short of by up to a few parts in 10^4 of A and B where the valley is long.
//
//     const [fitted, x] = fit_law([1e3, 1e4, 1e5], [1e5, 1e6, 1e7], [0.95, 0.7, 0.6], 0.5);  // E fixed at 0.5
//     scaling_numbers(points).free.E   // about 0.430 for experiments/scaling.json's cells, as the lesson says

import { fsum } from "./model.js";

export const POINTS_FORMAT = "scaling law points v1"; // law_points' "format" field
export const STARTS = Object.freeze([ // where the fits start: [log E, log A, alpha, log B, beta]; the least cost wins
  [Math.log(0.3), 2.0, 0.3, 4.0, 0.3],
  [Math.log(0.3), 4.0, 0.6, 8.0, 0.6],
  [Math.log(0.1), 6.0, 0.9, 10.0, 0.9],
]);
export const LOWER = Object.freeze([-10, -20, 0, -20, 0]); // the bounds of log E, log A, alpha, log B, beta
export const UPPER = Object.freeze([5, 40, 3, 40, 3]);
export const LEAST_BUDGETS = 4; // a refit keeps at least four budgets (lessons_scaling.py's LEAST_BUDGETS)
const FITTED = ["E", "A", "alpha", "B", "beta"]; // what fit_law returns, in its order
const MOST_STEPS = 2000; // Levenberg-Marquardt steps of one start, at most (the lesson's fits take tens)
const POLISH_STEPS = 50; // Gauss-Newton steps after it, at most (each one shrinks the last; a few suffice)

// ----------------------------------------------------------------------------------------------------------------
// The law

/** log L of the law at each point (n, d) for parameters x: [log E, log A, alpha, log B, beta], or without log E
 * when the floor is given (a Float64Array), as scaling_law.law.
 *
 *     law([Math.log(0.5), Math.log(20), 0.5, Math.log(300), 0.5], [400], [900])   // [2.4423...]: log 11.5 */
export function law(x, n, d, floor = null) {
  const e = floor !== null ? floor : Math.exp(x[0]);
  const [log_a, alpha, log_b, beta] = x.slice(-4);
  const out = new Float64Array(n.length); // (points,)
  for (let i = 0; i < n.length; i++) {
    out[i] = Math.log(e + Math.exp(log_a - alpha * Math.log(n[i])) + Math.exp(log_b - beta * Math.log(d[i])));
  }
  return out;
}

/** What the fit minimises at x: half the sum of squares of log L of the law less log loss, as scaling_law.law_cost.
 *
 *     law_cost([Math.log(20), 0.5, Math.log(300), 0.5], [400], [900], [11.5 * Math.E], 0.5)   // 0.5 */
export function law_cost(x, n, d, loss, floor = null) {
  const fitted = law(x, n, d, floor); // (points,)
  let sum = 0;
  for (let i = 0; i < n.length; i++) sum += (fitted[i] - Math.log(loss[i])) ** 2;
  return 0.5 * sum;
}

/** {r, J}: the residuals log L - log loss at x (points,) and their derivatives by each parameter (points, params):
 * with s = E + A / N^alpha + B / D^beta, d/d log E = E / s, d/d log A = (A / N^alpha) / s, d/d alpha = -log N
 * (A / N^alpha) / s, and the same for B and beta. */
function residuals(x, n, d, loss, floor) {
  const free = floor === null;
  const e = free ? Math.exp(x[0]) : floor;
  const [log_a, alpha, log_b, beta] = x.slice(-4);
  const r = new Float64Array(n.length); // (points,)
  const J = []; // (points, params)
  for (let i = 0; i < n.length; i++) {
    const ln = Math.log(n[i]), ld = Math.log(d[i]);
    const tn = Math.exp(log_a - alpha * ln), td = Math.exp(log_b - beta * ld);
    const s = e + tn + td;
    r[i] = Math.log(s) - Math.log(loss[i]);
    const row = [tn / s, -ln * tn / s, td / s, -ld * td / s];
    J.push(free ? [e / s, ...row] : row);
  }
  return { r, J };
}

/** The solution of the small system A p = b (A square, a list of rows), by Gaussian elimination with partial
 * pivoting.
 *
 *     solve([[2, 1], [1, 3]], [3, 5])   // [0.8, 1.4] */
export function solve(A, b) {
  const k = b.length;
  const m = A.map((row, i) => [...row, b[i]]); // (k, k + 1)
  for (let c = 0; c < k; c++) {
    let pivot = c;
    for (let i = c + 1; i < k; i++) if (Math.abs(m[i][c]) > Math.abs(m[pivot][c])) pivot = i;
    [m[c], m[pivot]] = [m[pivot], m[c]];
    for (let i = c + 1; i < k; i++) {
      const f = m[i][c] / m[c][c];
      for (let j = c; j <= k; j++) m[i][j] -= f * m[c][j];
    }
  }
  const p = new Array(k).fill(0);
  for (let i = k - 1; i >= 0; i--) {
    let sum = m[i][k];
    for (let j = i + 1; j < k; j++) sum -= m[i][j] * p[j];
    p[i] = sum / m[i][i];
  }
  return p;
}

/** The step from x: -(J^T J + mu diag(J^T J))^-1 J^T r over the parameters not held at a bound (one at a bound
 * whose gradient points out of it stays), projected into the bounds. mu = 0 is a Gauss-Newton step. */
function step(x, r, J, mu, lower, upper) {
  const k = x.length;
  const g = new Array(k).fill(0), H = Array.from({ length: k }, () => new Array(k).fill(0)); // (k,), (k, k)
  for (let i = 0; i < r.length; i++) {
    for (let a = 0; a < k; a++) {
      g[a] += J[i][a] * r[i];
      for (let b = 0; b < k; b++) H[a][b] += J[i][a] * J[i][b];
    }
  }
  const moving = [];
  for (let a = 0; a < k; a++) {
    if (!((x[a] <= lower[a] && g[a] > 0) || (x[a] >= upper[a] && g[a] < 0))) moving.push(a);
  }
  const p = solve(moving.map((a) => moving.map((b) => H[a][b] + (a === b ? mu * (H[a][a] || 1) : 0))),
    moving.map((a) => -g[a]));
  const out = [...x];
  moving.forEach((a, i) => { out[a] = Math.min(Math.max(x[a] + p[i], lower[a]), upper[a]); });
  return out;
}

/** The largest change of a parameter from x to y, relative to the parameter (or absolute, below 1). */
function largest_change(x, y) {
  return Math.max(...x.map((v, i) => Math.abs(y[i] - v) / Math.max(1, Math.abs(v))));
}

/** {x, cost}: the least-squares minimum from the start x0 within the bounds. Levenberg-Marquardt: a step is taken
 * when it lowers the cost (mu then falls), else tried again with a larger mu, until no step lowers it; then
 * Gauss-Newton steps while each moves less than the one before, to the point where the gradient vanishes (there
 * the cost is flat to its last bits, and cannot tell better points from worse). */
function fit_from(x0, n, d, loss, floor, lower, upper) {
  let x = x0.map((v, a) => Math.min(Math.max(v, lower[a]), upper[a]));
  let { r, J } = residuals(x, n, d, loss, floor);
  let cost = law_cost(x, n, d, loss, floor);
  let mu = 1e-3;
  for (let k = 0; k < MOST_STEPS; k++) {
    let next = null;
    while (mu < 1e30) {
      const y = step(x, r, J, mu, lower, upper);
      const c = law_cost(y, n, d, loss, floor);
      if (c < cost) {
        next = [y, c];
        break;
      }
      mu *= 4;
    }
    if (next === null) break; // no step lowers the cost: the minimum, to the cost's last bits
    [x, cost] = next;
    ({ r, J } = residuals(x, n, d, loss, floor));
    mu = Math.max(mu / 4, 1e-12);
  }
  let last = Infinity;
  for (let k = 0; k < POLISH_STEPS; k++) {
    const y = step(x, r, J, 0, lower, upper);
    const moved = largest_change(x, y);
    if (!(moved < last) || !Number.isFinite(moved)) break;
    [x, last] = [y, moved];
    ({ r, J } = residuals(x, n, d, loss, floor));
    if (moved === 0) break;
  }
  return { x, cost: law_cost(x, n, d, loss, floor) };
}

/** [fitted, x]: the least-squares fit of log L = log(E + A / N^alpha + B / D^beta) to the points (arrays n, d and
 * loss), from the start of least cost among starts: fitted {E, A, alpha, B, beta} (E the floor when given) and the
 * parameters as fitted, as scaling_law.fit_law.
 *
 *     const [fitted] = fit_law([1e3, 1e4, 1e5], [1e5, 1e6, 1e7], [0.95, 0.7, 0.6], 0.5);
 *     fitted.E   // 0.5 */
export function fit_law(n, d, loss, floor = null, starts = STARTS) {
  const lower = floor === null ? LOWER : LOWER.slice(1), upper = floor === null ? UPPER : UPPER.slice(1);
  let best = null;
  for (const start of starts) {
    const got = fit_from(start.slice(-lower.length), n, d, loss, floor, lower, upper);
    if (best === null || got.cost < best.cost) best = got;
  }
  const x = best.x;
  const e = floor !== null ? floor : Math.exp(x[0]);
  return [{ E: e, A: Math.exp(x.at(-4)), alpha: x.at(-3), B: Math.exp(x.at(-2)), beta: x.at(-1) }, x];
}

// ----------------------------------------------------------------------------------------------------------------
// The points: a cell's mean over its seeds at the rate its sweep chose, from the record (scaling_law.law_points)

export const RECORD_FORMAT = "scaling experiment v1"; // experiments/scaling.json's "format" field

/** The key of a size [width, blocks] in the record, as scaling_law.name_of.
 *
 *     name_of([64, 2])   // "64x2" */
export function name_of(size) {
  return `${size[0]}x${size[1]}`;
}

/** The learning rate the first seed's sweep chose in a cell: the lowest final tuning loss, the first of equal ones
 * (scaling_law.chosen_lr). */
export function chosen_lr(runs, plan, size, budget) {
  const sweep = runs.filter((r) => r.size === size && r.budget === budget && r.seed === plan.seeds[0]);
  if (sweep.length === 0) throw new Error(`scaling record: no run of ${size} at ${budget} FLOPs with the first seed`);
  return sweep.reduce((best, r) => (r.tune < best.tune ? r : best)).lr;
}

/** law_points' JSON from a record of experiments/scaling.py (its runs and settings), as scaling_law.law_points
 * writes it: each cell's n, d and its seeds' mean validation loss at the chosen rate (one rounding: model.js's
 * fsum, then the division, as Python's statistics.fmean), in the record's order; an Error names what is missing.
 *
 *     law_points(record).cells.length   // 63 for experiments/scaling.json */
export function law_points(record) {
  if (record?.format !== RECORD_FORMAT) {
    throw new Error(`scaling record: the format is ${JSON.stringify(record?.format)}, expected "${RECORD_FORMAT}"`);
  }
  const plan = record.settings;
  const cells = [];
  const seeds = [...plan.seeds, ...(plan.split_seeds ?? [])]; // the split seeds count where a cell trained them
  for (const size of plan.sizes.map(name_of)) {
    for (const budget of plan.budgets) {
      const lr = chosen_lr(record.runs, plan, size, budget);
      const values = seeds.flatMap((seed) => record.runs.filter((r) => r.size === size && r.budget === budget
        && r.lr === lr && r.seed === seed).map((r) => r.val)); // (seeds,)
      const run = record.runs.findLast((r) => r.size === size && r.budget === budget);
      cells.push({ size, budget, n: plan.parameters[size], d: run.tokens, loss: fsum(values) / values.length });
    }
  }
  return { format: POINTS_FORMAT, floor: record.floor.validation_nats_per_token, cells };
}

// ----------------------------------------------------------------------------------------------------------------
// The lesson's numbers, from law_points' JSON

/** The points as law_points writes them, or an Error naming what is not: the format, and each cell a size, a budget
 * and positive finite n, d and loss. */
function checked_points(points) {
  if (points === null || typeof points !== "object" || points.format !== POINTS_FORMAT) {
    throw new Error(`scaling law points: the format is ${JSON.stringify(points?.format)}, expected "${POINTS_FORMAT}"`);
  }
  if (!(typeof points.floor === "number" && points.floor > 0 && Number.isFinite(points.floor))) {
    throw new Error(`scaling law points: the floor is ${JSON.stringify(points.floor)}, expected a positive number`);
  }
  if (!Array.isArray(points.cells) || points.cells.length === 0) {
    throw new Error("scaling law points: expected cells, a list of {size, budget, n, d, loss}");
  }
  points.cells.forEach((cell, i) => {
    for (const key of ["budget", "n", "d", "loss"]) {
      const v = cell?.[key];
      if (!(typeof v === "number" && v > 0 && Number.isFinite(v))) {
        throw new Error(`scaling law points: cell ${i}'s ${key} is ${JSON.stringify(v)}, expected a positive number`);
      }
    }
  });
  return points;
}

/** [n, d, loss]: the arrays of the cells whose budget is at least least_budget, as scaling_law.point_arrays.
 *
 *     point_arrays({cells: [{budget: 10, n: 856, d: 64, loss: 1.5}, {budget: 20, n: 856, d: 128, loss: 1.2}]}, 20)
 *     // [[856], [128], [1.2]] */
export function point_arrays(points, least_budget = 0) {
  const cells = points.cells.filter((c) => c.budget >= least_budget);
  return [cells.map((c) => c.n), cells.map((c) => c.d), cells.map((c) => c.loss)]; // (cells,) each
}

/** The budgets each refit starts from: every budget that leaves at least LEAST_BUDGETS from it up, as
 * lessons_scaling.cuts.
 *
 *     cuts({cells: [10, 20, 40, 80].map((budget) => ({budget}))})   // [10, 20] */
export function cuts(points) {
  const budgets = [...new Set(points.cells.map((c) => c.budget))].sort((a, b) => a - b);
  return budgets.slice(0, budgets.length - LEAST_BUDGETS + 1);
}

/** fit_law's {E, A, alpha, B, beta} with the fit's cost, as lessons_scaling.fitted_at. */
function fitted_at(n, d, loss, floor = null) {
  const [fitted, x] = fit_law(n, d, loss, floor);
  return { ...Object.fromEntries(FITTED.map((k) => [k, fitted[k]])), cost: law_cost(x, n, d, loss, floor) };
}

/** The scaling lesson's numbers from law_points' JSON, as lessons_scaling.scaling_numbers: {floor, cells, free,
 * fixed, cost_ratio, cuts}: the fits over every cell with E free and E fixed at the floor, each {E, A, alpha, B,
 * beta, cost}, the ratio of their costs, and E free refitted on each cut's budget and above, {budget, cells, ...}.
 *
 *     scaling_numbers(points).cuts.map((row) => row.E)   // E climbs as the small budgets are left out */
export function scaling_numbers(points) {
  checked_points(points);
  const floor = points.floor;
  const [n, d, loss] = point_arrays(points);
  const free = fitted_at(n, d, loss), fixed = fitted_at(n, d, loss, floor);
  const rows = cuts(points).map((budget) => {
    const [n, d, loss] = point_arrays(points, budget); // (cells from budget up,) each
    return { budget, cells: loss.length, ...fitted_at(n, d, loss) };
  });
  return { floor, cells: points.cells.length, free, fixed, cost_ratio: fixed.cost / free.cost, cuts: rows };
}
