// random.js: Python's random.Random in JavaScript, bit for bit: CPython's Mersenne Twister (Modules/_randommodule.c:
// init_genrand, init_by_array, genrand_uint32) and the Lib/random.py methods of the lab's draws (model.init_params'
// rng.gauss(0.0, 0.02), train.py's rng.randrange(n)). gauss also needs cos, sin and log, which JavaScript engines
// need not round as the C library does (tests/test_explorer.py allows 2 ulp in the initial weights).

// ----------------------------------------------------------------------------------------------------------------
// The Mersenne Twister (MT19937), as CPython seeds and steps it

const N = 624; // words of state
const M = 397;
const MATRIX_A = 0x9908b0df;
const UPPER_MASK = 0x80000000;
const LOWER_MASK = 0x7fffffff;

export class Random {
  /** A generator seeded like random.Random(seed), seed a non-negative integer below 2^53: as CPython seeds with an
   * int, its 32-bit words, least significant first, go to init_by_array.
   *
   *     new Random(0).random()  // 0.8444218515250481, as random.Random(0).random() */
  constructor(seed) {
    if (!Number.isSafeInteger(seed) || seed < 0) {
      throw new RangeError(`seed ${seed} is not a whole number from 0 to 2^53 - 1`);
    }
    this.mt = new Uint32Array(N); // (624,) the state words
    this.index = N; // the next word to temper; N means "generate a fresh block first"
    this.gauss_next = null; // gauss makes two numbers at a time and keeps the second
    const key = [seed % 2 ** 32];
    if (seed >= 2 ** 32) key.push(Math.floor(seed / 2 ** 32));
    this.init_by_array(key);
  }

  init_genrand(s) {
    const mt = this.mt;
    mt[0] = s >>> 0;
    for (let i = 1; i < N; i++) {
      mt[i] = (Math.imul(1812433253, mt[i - 1] ^ (mt[i - 1] >>> 30)) + i) >>> 0;
    }
  }

  init_by_array(key) {
    const mt = this.mt;
    this.init_genrand(19650218);
    let i = 1;
    let j = 0;
    for (let k = Math.max(N, key.length); k > 0; k--) {
      mt[i] = ((mt[i] ^ Math.imul(mt[i - 1] ^ (mt[i - 1] >>> 30), 1664525)) + key[j] + j) >>> 0;
      i++;
      j++;
      if (i >= N) {
        mt[0] = mt[N - 1];
        i = 1;
      }
      if (j >= key.length) j = 0;
    }
    for (let k = N - 1; k > 0; k--) {
      mt[i] = ((mt[i] ^ Math.imul(mt[i - 1] ^ (mt[i - 1] >>> 30), 1566083941)) - i) >>> 0;
      i++;
      if (i >= N) {
        mt[0] = mt[N - 1];
        i = 1;
      }
    }
    mt[0] = 0x80000000;
  }

  /** The next 32-bit word (an integer 0 to 2^32 - 1). */
  genrand_uint32() {
    const mt = this.mt;
    if (this.index >= N) {
      let kk = 0;
      for (; kk < N - M; kk++) {
        const y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
        mt[kk] = mt[kk + M] ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      }
      for (; kk < N - 1; kk++) {
        const y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
        mt[kk] = mt[kk + (M - N)] ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      }
      const y = (mt[N - 1] & UPPER_MASK) | (mt[0] & LOWER_MASK);
      mt[N - 1] = mt[M - 1] ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      this.index = 0;
    }
    let y = mt[this.index++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  // ---- the methods of Lib/random.py that the lab calls

  /** A float in [0, 1) with 53 random bits, as random.random(). */
  random() {
    const a = this.genrand_uint32() >>> 5; // 27 bits
    const b = this.genrand_uint32() >>> 6; // 26 bits
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
  }

  /** An integer in [0, n), as random.randrange(n): k = n's bit length, draw k bits (random.getrandbits(k): the top
   * k bits of a word) until the number is below n.
   *
   *     new Random(0).randrange(90)  // 49, as random.Random(0).randrange(90) */
  randrange(n) {
    if (!(Number.isInteger(n) && n > 0 && n < 2 ** 32)) throw new RangeError(`randrange(${n}): expected 1 to 2^32 - 1`);
    const shift = 32 - Math.ceil(Math.log2(n + 1)); // 32 - n.bit_length()
    let r = this.genrand_uint32() >>> shift;
    while (r >= n) r = this.genrand_uint32() >>> shift;
    return r;
  }

  /** A normal draw, as random.gauss(mu, sigma): Box-Muller, the second number of each pair kept for the next call. */
  gauss(mu = 0.0, sigma = 1.0) {
    let z = this.gauss_next;
    this.gauss_next = null;
    if (z === null) {
      const x2pi = this.random() * (2.0 * Math.PI);
      const g2rad = Math.sqrt(-2.0 * Math.log(1.0 - this.random()));
      z = Math.cos(x2pi) * g2rad;
      this.gauss_next = Math.sin(x2pi) * g2rad;
    }
    return mu + z * sigma;
  }

  // ---- the state, as checkpoint.py stores it (rng_state: the 624 words and the position in them)

  /** The 625 numbers of random.Random.getstate()[1]: the state words, then the index. */
  getstate() {
    if (this.gauss_next !== null) throw new Error("cannot store the state with a pending gauss number");
    return [...this.mt, this.index];
  }
}
