// fast.js: the performance tricks behind model.js's plain sums, apart from the maths, each adding in the order of the
// plain line it replaces (docs/developers.md, "How fast the explorer trains"). Each is marked `trick:` with that line
// and what it bought: microseconds per call at the Train panel's sizes (T 64, d 16, H 64, V 96), the median of three
// runs of `python3 -m dev.bench_explorer --tricks` (each the median of 7 turns) in headless Chromium 156 on a shared
// 2-vCPU AMD EPYC. PLAIN_LINES holds the plain lines as functions, for that benchmark and the test.
//
//     const O = new Float64Array(1);
//     products_plain(Float64Array.of(1, 2), 2, 1, Float64Array.of(3, 4), 2, 1, O, 1, 1, 2);   // O: [11]

// ----------------------------------------------------------------------------------------------------------------
// Products: out[i][j] = sum_t a(i, t) b(j, t), a(i, t) = A[i ai + t at], b(j, t) = B[j bj + t bt] (model.js products)

/** The plain line: every entry its own sum, left to right over t.
 *
 *     simple_products(Float64Array.of(1, 2), 2, 1, Float64Array.of(3, 4), 2, 1, new Float64Array(1), 1, 1, 2) */
function simple_products(A, ai, at, B, bj, bt, O, n, m, k) {
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      let s = 0.0;
      for (let t = 0; t < k; t++) s += A[i * ai + t * at] * B[j * bj + t * bt];
      O[i * m + j] = s;
    }
  }
}

/** trick: replaces simple_products' `for (let t ...) s += A[i * ai + t * at] * B[j * bj + t * bt]` for every i and
 * j: two rows i meet four rows j at a time, so that 8 sums run side by side and each number read is used 2 or 4
 * times (the rows and columns left over at the edges run the plain line). The logits of a window, (64, 16) times
 * (16, 96): 72 us instead of 250 (dev/bench_explorer.py --tricks: products). */
export function products_plain(A, ai, at, B, bj, bt, O, n, m, k) {
  const n2 = n - (n % 2), m4 = m - (m % 4);
  for (let i = 0; i < n2; i += 2) {
    for (let j = 0; j < m4; j += 4) {
      let pa = i * ai, pb = j * bj;
      let s00 = 0.0, s01 = 0.0, s02 = 0.0, s03 = 0.0, s10 = 0.0, s11 = 0.0, s12 = 0.0, s13 = 0.0;
      for (let t = 0; t < k; t++) {
        const x0 = A[pa], x1 = A[pa + ai];
        const y0 = B[pb], y1 = B[pb + bj], y2 = B[pb + 2 * bj], y3 = B[pb + 3 * bj];
        s00 += x0 * y0;
        s01 += x0 * y1;
        s02 += x0 * y2;
        s03 += x0 * y3;
        s10 += x1 * y0;
        s11 += x1 * y1;
        s12 += x1 * y2;
        s13 += x1 * y3;
        pa += at;
        pb += bt;
      }
      const o0 = i * m + j, o1 = o0 + m;
      O[o0] = s00;
      O[o0 + 1] = s01;
      O[o0 + 2] = s02;
      O[o0 + 3] = s03;
      O[o1] = s10;
      O[o1 + 1] = s11;
      O[o1 + 2] = s12;
      O[o1 + 3] = s13;
    }
  }
  for (let i = 0; i < n; i++) {
    for (let j = i < n2 ? m4 : 0; j < m; j++) {
      let s = 0.0;
      for (let t = 0; t < k; t++) s += A[i * ai + t * at] * B[j * bj + t * bt];
      O[i * m + j] = s;
    }
  }
}

// ----------------------------------------------------------------------------------------------------------------
// Attention's loops: a row of scores (q_i against the keys j <= i), and a row of the context (weights times values)

/** The plain line: out[n] = sum_{c<width} X[x + c] Y[y + n step + c] for n < count, each sum left to right. */
function simple_rows_dots(X, x, Y, y, step, count, width, out) {
  for (let n = 0; n < count; n++) {
    let s = 0.0;
    for (let c = 0; c < width; c++) s += X[x + c] * Y[y + n * step + c];
    out[n] = s;
  }
}

/** trick: replaces simple_rows_dots' `for (let c ...) s += X[x + c] * Y[y + n * step + c]` for every n: four rows
 * of Y at a time, so that each number of X read is used four times (the rows left over at the end run the plain
 * line). One head's scores, every row of 64: 24 us instead of 37 (dev/bench_explorer.py --tricks: rows_dots). */
export function rows_dots_plain(X, x, Y, y, step, count, width, out) {
  let n = 0;
  for (; n + 3 < count; n += 4) {
    const y0 = y + n * step, y1 = y0 + step, y2 = y1 + step, y3 = y2 + step;
    let s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    for (let c = 0; c < width; c++) {
      const a = X[x + c];
      s0 += a * Y[y0 + c];
      s1 += a * Y[y1 + c];
      s2 += a * Y[y2 + c];
      s3 += a * Y[y3 + c];
    }
    out[n] = s0;
    out[n + 1] = s1;
    out[n + 2] = s2;
    out[n + 3] = s3;
  }
  if (n < count) simple_rows_dots(X, x, Y, y + n * step, step, count - n, width, out.subarray(n)); // the rows left
}

/** The plain line: O[o + c] = sum_{n<count} W[w + n w_step] X[x + n x_step + c] for c < width, each sum left to
 * right over n. */
function simple_weighted_rows(W, w, w_step, count, X, x, x_step, width, O, o) {
  for (let c = 0; c < width; c++) {
    let s = 0.0;
    for (let n = 0; n < count; n++) s += W[w + n * w_step] * X[x + n * x_step + c];
    O[o + c] = s;
  }
}

/** trick: replaces simple_weighted_rows' `for (let n ...) s += W[w + n * w_step] * X[x + n * x_step + c]` for every
 * c: four columns at a time, so that each weight read is used four times and X is read row by row. One head's
 * context, every row of 64: 24 us instead of 52 (dev/bench_explorer.py --tricks: weighted_rows). */
export function weighted_rows_plain(W, w, w_step, count, X, x, x_step, width, O, o) {
  let c = 0;
  for (; c + 3 < width; c += 4) {
    let s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    let pw = w, px = x + c;
    for (let n = 0; n < count; n++) {
      const a = W[pw];
      s0 += a * X[px];
      s1 += a * X[px + 1];
      s2 += a * X[px + 2];
      s3 += a * X[px + 3];
      pw += w_step;
      px += x_step;
    }
    O[o + c] = s0;
    O[o + c + 1] = s1;
    O[o + c + 2] = s2;
    O[o + c + 3] = s3;
  }
  simple_weighted_rows(W, w, w_step, count, X, x + c, x_step, width - c, O, o + c); // the columns left, if any
}

// ----------------------------------------------------------------------------------------------------------------
// A pool of buffers for a training step's matrices

let scratch = null; // the pool that `pooled` takes from while `reusing` runs, else null

/** trick: replaces model.matrix's `new Float64Array(rows * cols)` inside `reusing`: a zeroed buffer of the pool,
 * the one the call before made at this point (a training step's windows make the same matrices in the same order,
 * so after the first window nothing new is allocated and nothing is left for the garbage collector); null outside
 * `reusing`. A window's forward and backward pass: 0.97 ms instead of 1.47 (dev/bench_explorer.py --tricks: pool).
 *
 *     pooled(4)   // null: no pool in use */
export function pooled(n) {
  if (scratch === null) return null;
  let data = scratch.buffers[scratch.next];
  if (data === undefined || data.length !== n) data = scratch.buffers[scratch.next] = new Float64Array(n);
  else data.fill(0.0);
  scratch.next += 1;
  return data;
}

/** fn(), with every matrix model.js makes in a buffer of pool ({buffers: []} to start with) that the call before
 * left (see pooled). What fn returns lives in the pool, until the next call with it overwrites it: copy out what
 * must last.
 *
 *     const pool = {buffers: []};
 *     reusing(pool, () => loss_and_grads(p, x, y, config))   // the gradients: add them up before the next call */
export function reusing(pool, fn) {
  if (scratch !== null) throw new Error("reusing: already inside a call of reusing; pools do not nest");
  scratch = pool;
  pool.next = 0;
  try {
    return fn();
  } finally {
    scratch = null;
  }
}

// ----------------------------------------------------------------------------------------------------------------
// The plain lines and the tricks, by name, for the benchmark that measures what each trick bought

export const PLAIN_LINES = {
  products: simple_products,
  rows_dots: simple_rows_dots,
  weighted_rows: simple_weighted_rows,
};
export const TRICKS = { products: products_plain, rows_dots: rows_dots_plain, weighted_rows: weighted_rows_plain };
