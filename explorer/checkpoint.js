// checkpoint.js: the page's side of checkpoint.py's files: the safetensors container read and written, SHA-256, the
// bounds that price a file by arithmetic before memory is spent on it, and the check that a loaded file holds what
// the page needs to run it. oneblock/checkpoint.py is the one reader with every rule in its words; what the page
// refuses, and in what line: docs/explorer.md, "Which models it runs" (the one exception: the JSON grammar below).
// The safetensors container: oneblock/tensorfile.py's docstring; what a training checkpoint holds: checkpoint.py's,
// in its names that manifest.json's "checkpoint" carries.
//
//     const bytes = encode({w: {dtype: "F64", shape: [2], values: [1, 2]}}, {note: "hi"});
//     decode(bytes).tensors.get("w").values   // Float64Array [1, 2]

import { by_code_point } from "./bpe.js";
import {
  BLOCK_NAMES, GROWN_KEYS, JSON_KEYS, OUTSIDE, SCHEMES, SWITCH_KEY, checked, config_from_json, config_to_json,
  each_param, is_grown, parameter_count,
} from "./model.js";

// ----------------------------------------------------------------------------------------------------------------
// SHA-256 (FIPS 180-4), so that a page served from any static host, where crypto.subtle may be missing, can check
// and write the data hash

// the constants of FIPS 180-4, 4.2.2 and 5.3.3, from their definition: the first 32 bits of the fractional parts of
// the cube roots of the first 64 primes (K) and of the square roots of the first 8 (H0); each lies at least 0.005
// from the next whole number once scaled by 2^32, a thousand times any rounding of Math.cbrt or Math.sqrt
const PRIMES = [];
for (let n = 2; PRIMES.length < 64; n++) if (PRIMES.every((p) => n % p)) PRIMES.push(n);
const fraction_bits = (x) => Math.floor((x - Math.floor(x)) * 2 ** 32);
const K = Uint32Array.from(PRIMES, (p) => fraction_bits(Math.cbrt(p)));
const H0 = Uint32Array.from(PRIMES.slice(0, 8), (p) => fraction_bits(Math.sqrt(p)));

/** Hex SHA-256 of a Uint8Array.
 *
 *     sha256(new Uint8Array(0))   // "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" */
export function sha256(bytes) {
  const padded = new Uint8Array(Math.ceil((bytes.length + 9) / 64) * 64); // message, 0x80, zeros, 64-bit length
  padded.set(bytes);
  padded[bytes.length] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 8, Math.floor(bytes.length / 2 ** 29));
  view.setUint32(padded.length - 4, (bytes.length * 8) >>> 0);
  const h = Uint32Array.from(H0);
  const w = new Uint32Array(64);
  const rotr = (x, n) => (x >>> n) | (x << (32 - n));
  for (let off = 0; off < padded.length; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(off + 4 * i);
    for (let i = 16; i < 64; i++) {
      const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
      const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    let [a, b, c, d, e, f, g, hh] = h;
    for (let i = 0; i < 64; i++) {
      const t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
      const t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      [hh, g, f, e, d, c, b, a] = [g, f, e, (d + t1) >>> 0, c, b, a, (t1 + t2) >>> 0];
    }
    [a, b, c, d, e, f, g, hh].forEach((x, i) => (h[i] = (h[i] + x) >>> 0));
  }
  return Array.from(h, (x) => x.toString(16).padStart(8, "0")).join("");
}

// ----------------------------------------------------------------------------------------------------------------
// JSON as the page reads a file's: JSON.parse, with Python's int and float kept apart where they matter
//
// JSON.parse reads 16.0 as 16 (a float to Python, which no size may be), rounds whole numbers past 2^53, refuses
// the Infinity that Python writes (a clip of Infinity is no clipping) and keeps the last of two equal keys (which
// Python refuses, but only ever with no change to what the page shows: tests/test_page_loader.py's GRAMMAR). A
// reviver that sees each number's text mends the first three, but costs seconds on a header of millions of numbers,
// so it reads only a config's or training's flat object, after a plain JSON.parse has shown it to be one.

const MAX_DIGITS = 4300; // tensorfile.MAX_DIGITS: the longest whole number read (a longer one is refused)

/** The flat JSON object text as a Map of its keys, each one of known, to their values: a whole number as a BigInt
 * (Python's int), any other number as a Number, a string, true, false or null; an Error of a few words about what
 * (the file's config or training) for anything else, which checkpoint.py refuses too.
 *
 *     read_json('{"d": 16, "lr": 2.5}', "training", ["d", "lr"])   // Map {"d" => 16n, "lr" => 2.5} */
export function read_json(text, what, known) {
  let plain;
  try {
    plain = JSON.parse(with_infinity(text));
  } catch (e) {
    throw new Error(`its ${what} is not JSON (${e.message})`);
  }
  if (plain === null || typeof plain !== "object" || Array.isArray(plain)
      || Object.entries(plain).some(([key, v]) => !known.includes(key) || (v !== null && typeof v === "object"))) {
    throw new Error(`its ${what} is not a JSON object of the keys it may have, each a plain value`);
  }
  return new Map(Object.entries(JSON.parse(with_infinity(text), (key, value, context) => {
    if (typeof value !== "number") return value;
    if (context?.source === undefined) throw new Error("this browser's JSON.parse gives no number's text");
    if (/[.eE]/.test(context.source)) return value;
    if (context.source.replace("-", "").length > MAX_DIGITS) throw new Error(`its ${what} has too long a number`);
    return BigInt(context.source);
  })));
}

/** The index of the first character of the JSON text from `from` on, outside its strings, for which found(its
 * code, its index) is true, or -1; `from` must be outside the strings.
 *
 *     outside_strings('"e" e', 0, (c) => c === 0x65)   // 4 */
function outside_strings(text, from, found) {
  let quoted = false;
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (quoted) {
      if (c === 0x5c) i++;
      else if (c === 0x22) quoted = false;
    } else if (c === 0x22) {
      quoted = true;
    } else if (found(c, i)) {
      return i;
    }
  }
  return -1;
}

/** text with the bare Infinity and -Infinity that Python writes as a number that JSON.parse and Python both read as
 * infinite, 1e99999; the strings of text left as they are.
 *
 *     with_infinity('{"clip": Infinity, "note": "Infinity"}')   // '{"clip": 1e99999, "note": "Infinity"}' */
function with_infinity(text) {
  const bare = (c, i) => c === 0x49 && text.startsWith("Infinity", i);
  let out = "", from = 0;
  for (let at = outside_strings(text, 0, bare); at !== -1; at = outside_strings(text, from, bare)) {
    out += text.slice(from, at) + "1e99999";
    from = at + "Infinity".length;
  }
  return out + text.slice(from);
}

/** Whether the JSON text writes a number with a point or an exponent (a float to Python) outside its strings.
 *
 *     has_float('{"shape": [4.0], "note": "1.5"}'), has_float('{"shape": [4], "ok": true}')   // true, false */
function has_float(text) {
  const float = (c, i) => c === 0x2e || ((c === 0x65 || c === 0x45) && /[0-9]/.test(text[i - 1]));
  return outside_strings(text, 0, float) !== -1;
}

// ----------------------------------------------------------------------------------------------------------------
// The safetensors container

const DTYPES = { F32: 4, F64: 8, I64: 8 }; // tensorfile.DTYPES: safetensors dtype -> bytes per value
const HEADER_ALIGN = 8; // tensorfile.HEADER_ALIGN: the header is padded to a multiple of this
const MAX_HEADER = 100 * 1024 * 1024; // tensorfile.MAX_HEADER: a longer header means a corrupt file
const MAX_RANK = 64; // tensorfile.MAX_RANK: the most dimensions a tensor may have
export const DATA_HASH_KEY = "data_sha256"; // tensorfile.DATA_HASH_KEY

/** The bytes of a safetensors file holding tensors {name: {dtype, shape, values}} in the given order; metadata
 * (strings) goes into "__metadata__" with the data's SHA-256 added. I64 values are Numbers (exact below 2^53). */
export function encode(tensors, metadata = {}) {
  const header = {};
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (t.values.length !== n) {
      throw new Error(`tensor '${name}' has ${t.values.length} values but shape [${t.shape}] needs ${n}`);
    }
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + n * DTYPES[t.dtype]] };
    offset += n * DTYPES[t.dtype];
  }
  const data = new Uint8Array(offset);
  for (const [name, t] of Object.entries(tensors)) {
    const values = ARRAYS[t.dtype].from(t.values, t.dtype === "I64" ? BigInt : undefined); // (F32: rounded)
    data.set(little_endian(new Uint8Array(values.buffer), DTYPES[t.dtype]), header[name].data_offsets[0]);
  }
  const meta = { ...metadata, [DATA_HASH_KEY]: sha256(data) };
  let text = JSON.stringify({ __metadata__: meta, ...header });
  text += " ".repeat((HEADER_ALIGN - ((8 + new TextEncoder().encode(text).length) % HEADER_ALIGN)) % HEADER_ALIGN);
  const head = new TextEncoder().encode(text);
  const out = new Uint8Array(8 + head.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true);
  out.set(head, 8);
  out.set(data, 8 + head.length);
  return out;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1; // this machine's byte order
const ARRAYS = { F32: Float32Array, F64: Float64Array, I64: BigInt64Array }; // what each dtype's values are

/** bytes, the values of width bytes each of a typed array, turned in place between this machine's byte order and
 * the little-endian order of a file (nothing to do on a little-endian machine). */
function little_endian(bytes, width) {
  if (!LITTLE_ENDIAN) for (let at = 0; at < bytes.length; at += width) bytes.subarray(at, at + width).reverse();
  return bytes;
}

/** The number of values of a tensor of this shape (BigInts), or null once it is past most: a shape of a million
 * twos costs a million small multiplications, not one number of a million bits.
 *
 *     count_of([2n, 3n], 100n), count_of(Array(1000).fill(2n), 100n)   // 6n, null */
function count_of(shape, most) {
  if (shape.includes(0n)) return 0n;
  let count = 1n;
  for (const size of shape) {
    count *= size;
    if (count > most) return null;
  }
  return count;
}

const is_count = (v) => Number.isSafeInteger(v) && v >= 0; // a size or offset of a header (larger ones fit no file)

/** {tensors, metadata} from the bytes of a safetensors file, or an Error saying in a few words what is malformed,
 * each size priced before anything is made for it. tensors is a Map of name -> {dtype, shape (BigInts), values (a
 * Float32Array, Float64Array or BigInt64Array)}; metadata a Map of strings. */
export function decode(bytes) {
  if (bytes.length < 8) throw new Error("it is too short to be a safetensors file");
  const n = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER)) throw new Error(`its header length reads ${n} bytes, more than ${MAX_HEADER}`);
  if (8n + n > BigInt(bytes.length)) throw new Error("it is truncated: its header runs past its end");
  const raw_text = bytes.subarray(8, 8 + Number(n));
  if (raw_text[0] !== 0x7b) throw new Error("its header does not start with '{'");
  let text, parsed;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(raw_text);
    parsed = JSON.parse(text);
  } catch (e) {
    throw new Error(`its header is not JSON in UTF-8 (${e.message})`);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new Error("its header is not a JSON object");
  }
  if (has_float(text)) throw new Error("its header has a number with a point or an exponent");
  const header = new Map(Object.entries(parsed)); // (a tensor may be named "__proto__" or "toString")
  const meta = header.has("__metadata__") ? header.get("__metadata__") : {};
  header.delete("__metadata__");
  if (meta === null || typeof meta !== "object" || Array.isArray(meta)
      || Object.entries(meta).some(([key, v]) => typeof v !== "string" || !v.isWellFormed() || !key.isWellFormed())) {
    throw new Error("its __metadata__ does not map text to text");
  }
  const metadata = new Map(Object.entries(meta));
  const data = bytes.subarray(8 + Number(n));
  const spans = [];
  for (const [name, info] of header) {
    const what = `its tensor ${JSON.stringify(name.slice(0, 60))}`;
    const fields = info !== null && typeof info === "object" ? Object.keys(info).sort().join() : "";
    if (fields !== "data_offsets,dtype,shape") throw new Error(`${what} does not have exactly dtype, shape and`
      + " data_offsets");
    const { dtype, shape, data_offsets: offsets } = info;
    if (!Object.hasOwn(DTYPES, dtype)) throw new Error(`${what} has a dtype other than F32, F64 and I64`);
    if (!Array.isArray(shape) || shape.length > MAX_RANK || !shape.every((s) => is_count(s))) {
      throw new Error(`${what} has a shape that is not a list of at most ${MAX_RANK} whole numbers`);
    }
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => is_count(o))
        || offsets[0] > offsets[1]) {
      throw new Error(`${what} has data_offsets that are not [begin, end] with 0 <= begin <= end`);
    }
    const itemsize = DTYPES[dtype];
    const count = count_of(shape.map(BigInt), BigInt(Math.floor(data.length / itemsize)));
    if (count === null || BigInt(offsets[1] - offsets[0]) !== count * BigInt(itemsize) || offsets[1] > data.length) {
      throw new Error(`${what} does not cover its shape's bytes within the data`);
    }
    spans.push([offsets[0], offsets[1]]);
  }
  let end = 0;
  for (const [begin, stop] of spans.sort((a, b) => a[0] - b[0] || a[1] - b[1])) {
    if (begin !== end) throw new Error("its tensors do not follow each other without gaps or overlaps");
    end = stop;
  }
  if (end !== data.length) throw new Error("its tensors do not cover its data");
  const want = metadata.get(DATA_HASH_KEY);
  if (want !== undefined && sha256(data) !== want) throw new Error("its data's SHA-256 is not the one it records");
  const tensors = new Map();
  for (const [name, { dtype, shape, data_offsets: [begin, stop] }] of header) {
    const values = new ARRAYS[dtype](little_endian(data.slice(begin, stop), DTYPES[dtype]).buffer); // (aligned copy)
    tensors.set(name, { dtype, shape: shape.map(BigInt), values });
  }
  return { tensors, metadata };
}

// ----------------------------------------------------------------------------------------------------------------
// The training checkpoint: which tensors it holds

/** checkpoint.each_expected of config (a Map of BigInts), with manifest.json's "checkpoint" names. */
function* each_expected(config, { moment_prefixes, step, rng, rng_state_len }) {
  for (const prefix of ["", ...moment_prefixes]) {
    for (const [name, shape] of each_param(Object.fromEntries(config))) yield [prefix + name, shape];
  }
  yield [step, []];
  yield [rng, [BigInt(rng_state_len)]];
}

// ----------------------------------------------------------------------------------------------------------------
// Checking a decoded checkpoint: refused where checkpoint.py refuses it, in a few words of the page's own

// what a training setting may be (checkpoint.TRAINING_RULES decides the same): name -> test(value, names), names the
// checkpoint.py names that the export writes into manifest.json's "checkpoint" (its backends, dtype_names, ...)
const finite = (v) => typeof v === "bigint" || (typeof v === "number" && Number.isFinite(v));
const number = (v) => typeof v === "bigint" || typeof v === "number";
const at_least = (low, or_null = false) => (v) => (or_null && v === null) || (typeof v === "bigint" && v >= low);
const SETTINGS = new Map([
  ["backend", (v, names) => names.backends.includes(v)],
  ["threads", at_least(1n)], ["dtype", (v, names) => Object.hasOwn(names.dtype_names, v)], ["steps", at_least(0n)],
  ["batch", at_least(1n)], ["seq_len", at_least(1n)], ["warmup", at_least(0n)],
  ["lr", (v) => finite(v) && v > 0], ["min_lr", (v) => finite(v) && v >= 0], ["eps", (v) => finite(v) && v > 0],
  ["beta1", (v) => number(v) && v >= 0 && v < 1], ["beta2", (v) => number(v) && v >= 0 && v < 1],
  ["clip", (v) => number(v) && v > 0], // (Infinity: no clipping)
  ["seed", at_least(0n, true)], ["val_stories", at_least(1n, true)], ["vocab_size", at_least(1n, true)],
  ["positions", (v) => typeof v === "boolean" || SCHEMES.includes(v)], [SWITCH_KEY, (v) => typeof v === "boolean"],
  ["blocks", at_least(1n)], ["heads", at_least(1n)], ["eval_every", at_least(1n)],
  ["val_fraction", (v) => number(v) && v > 0 && v < 1],
]);

/** An Error unless the metadata strings are a checkpoint's (as checkpoint.check_metadata); returns the version. */
function check_metadata(metadata, names) {
  const { format, versions, metadata_keys, known_keys, hash_keys, number_keys, text_keys, splits } = names;
  if (metadata.get("format") !== format) throw new Error(`it is not a ${format}`);
  const version = metadata.get("format_version");
  if (!versions.includes(version)) throw new Error(`its format version is not one of ${versions.join(", ")}`);
  const lacks = [...metadata_keys, DATA_HASH_KEY].find((key) => !metadata.has(key));
  if (lacks) throw new Error(`its metadata lacks ${lacks}`);
  if ([...metadata.keys()].some((key) => !known_keys.includes(key))) throw new Error("its metadata has a key no"
    + " checkpoint has");
  const nats = (v) => /^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/.test(v) && Number.isFinite(Number(v)); // as repr writes
  if (hash_keys.some((key) => metadata.has(key) && !/^[0-9a-f]{64}$/.test(metadata.get(key)))
      || number_keys.some((key) => metadata.has(key) && !nats(metadata.get(key)))) {
    throw new Error("its metadata holds a hash or a loss that is not one");
  }
  const text = text_keys.filter((key) => metadata.has(key)).length;
  if (text && (text !== text_keys.length || !splits.includes(metadata.get("split"))
      || !metadata.get("text") || sha256(new TextEncoder().encode(metadata.get("tokenizer")))
        !== metadata.get("tokenizer_sha256"))) {
    throw new Error("its metadata of a text of your own is not whole");
  }
  return version;
}

/** An Error when the config's sizes ask for more tensors, or more numbers, than the file holds, by arithmetic
 * before any name is made for them (as checkpoint.check_fits): a header that says blocks = 10^12 is refused at once. */
function check_fits(config, tensors, names) {
  const per = BigInt(1 + names.moment_prefixes.length); // each parameter and its moments; then the step and the state
  const blocks = config.get("blocks") ?? 1n;
  const need_tensors = per * (BigInt(OUTSIDE.length) + blocks * BigInt(BLOCK_NAMES.length)) + 2n;
  const need_numbers = per * parameter_count(Object.fromEntries(config)) + 1n + BigInt(names.rng_state_len);
  let have_numbers = 0n;
  for (const { shape } of tensors.values()) have_numbers += shape.reduce((p, s) => p * s, 1n);
  if (need_tensors > BigInt(tensors.size)) {
    throw new Error(`its config of ${blocks} blocks needs ${need_tensors} tensors, but it holds ${tensors.size}`);
  }
  if (need_numbers > have_numbers) {
    throw new Error(`its config's sizes need ${String(need_numbers).length > 30 ? "more" : need_numbers} numbers,`
      + ` but its tensors hold ${have_numbers}`);
  }
}

/** An Error where checkpoint.check_training refuses training (read_json's Map); config a Map, its scheme positions. */
function check_training(training, config, positions, metadata, names) {
  const get = (name, otherwise) => (training.has(name) ? training.get(name) : otherwise);
  const recorded = get("positions", positions);
  const scheme = typeof recorded === "boolean" ? (recorded ? "learned" : "none") : recorded; // (before the schemes)
  if ([...training].some(([name, value]) => !SETTINGS.get(name)(value, names))
      || (metadata.has("text") && !(training.has("val_fraction") && training.has("seq_len")))
      || get("seq_len", 0n) > config.get("max_len") || (training.has("lr") && get("min_lr", 0n) > training.get("lr"))
      || (training.has("steps") && get("warmup", 0n) > training.get("steps")) || scheme !== positions
      || get(SWITCH_KEY, positions === "learned") !== (positions === "learned")
      || GROWN_KEYS.some((key) => get(key, config.get(key) ?? 1n) !== (config.get(key) ?? 1n))
      || (metadata.get("format_version") === names.grown_version
        && names.model_settings.some((key) => training.has(key)))) {
    throw new Error("its training settings are not ones a run of this model records");
  }
}

/** An Error naming the first tensor checkpoint.check_tensors refuses; config a checked Map, training read_json's. */
function check_tensors(tensors, config, training, names) {
  const shapes = new Map(each_expected(config, names));
  const other = [...tensors.keys()].find((name) => !shapes.has(name))
    ?? [...shapes.keys()].find((name) => !tensors.has(name));
  if (other !== undefined) throw new Error(`its tensors are not its config's (${JSON.stringify(other.slice(0, 60))})`);
  const float_dtype = tensors.get("tok_emb").dtype;
  if (float_dtype === "I64" || (training.has("dtype") && names.dtype_names[training.get("dtype")] !== float_dtype)) {
    throw new Error(`its tok_emb has dtype ${float_dtype}, not its training's`);
  }
  for (const [name, want] of shapes) {
    const { dtype, shape, values } = tensors.get(name);
    if (shape.length !== want.length || shape.some((s, k) => s !== want[k])) {
      throw new Error(`its tensor ${name} has shape [${shape}], but its config makes it [${want}]`);
    }
    if (dtype !== (name === names.step || name === names.rng ? "I64" : float_dtype)) {
      throw new Error(`its tensor ${name} has dtype ${dtype}`);
    }
    if (dtype !== "I64" && !values.every(Number.isFinite)) throw new Error(`its tensor ${name} is not all finite`);
  }
  const step = tensors.get(names.step).values[0];
  if (step < 0n || (training.has("steps") && step > training.get("steps"))) {
    throw new Error(`its ${names.step} ${step} is not a step of the run it records`);
  }
  const words = tensors.get(names.rng).values, last = words[words.length - 1];
  if (words.subarray(0, -1).some((w) => w < 0n || w >= 2n ** 32n) || !(0n <= last && last <= 624n)
      || words.subarray(0, -1).every((w) => w === 0n)) {
    throw new Error(`its ${names.rng} is not a state the batch sampler can have`);
  }
}

/** Check a decoded checkpoint in checkpoint.check_checkpoint's order, with checkpoint.py's names (manifest.json's
 * checkpoint), and the tokenizer's hash against manifest.json's: {config, training} (Maps) and described, the
 * model's model_config, or an Error. */
export function check_checkpoint(tensors, metadata, { tokenizer_sha256, checkpoint: names }) {
  const version = check_metadata(metadata, names);
  const config = read_json(metadata.get("config"), "config", JSON_KEYS); // its sizes BigInts, to hold to the file's
  const described = config_from_json(config, names.grown_versions.includes(version));
  const { positions } = described;
  check_fits(config, tensors, names);
  checked(described); // (d and blocks held to the file by check_fits; heads past d, whatever its size, divide no d)
  const training = read_json(metadata.get("training"), "training", [...SETTINGS.keys()]);
  check_training(training, config, positions, metadata, names);
  if (metadata.get("tokenizer_sha256") !== tokenizer_sha256) {
    throw new Error("it was trained with another tokenizer than the page's");
  }
  check_tensors(tensors, config, training, names);
  const hash_key = names.metadata_hash_key;
  if (metadata.has(hash_key) ? metadata_digest(metadata, hash_key) !== metadata.get(hash_key)
    : names.grown_versions.includes(version)) {
    throw new Error(`its metadata's SHA-256 is not the one it records in ${hash_key}`);
  }
  return { config, described, training };
}

/** The one line a refused file gets: where, the page's few words (why), and the command that says why in full. */
function refusal(where, why) {
  return new Error(`${where}: ${why}; python3 explore.py --ckpt ${where} gives the full reason`);
}

/** The SHA-256 that hash_key (metadata_sha256) records of metadata (a Map, or an object of strings), as
 * tensorfile.metadata_digest; ensure_ascii's escapes are \uXXXX in lower-case hex (past U+FFFF, two surrogates). */
function metadata_digest(metadata, hash_key) {
  const entries = (metadata instanceof Map ? [...metadata] : Object.entries(metadata))
    .filter(([key]) => key !== DATA_HASH_KEY && key !== hash_key)
    .sort((a, b) => by_code_point(a[0], b[0]));
  const escaped = (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`;
  const python_json = (text) => JSON.stringify(text).replace(/[\u007f-\uffff]/g, escaped);
  const pairs = entries.map(([key, value]) => `${python_json(key)}:${python_json(value)}`);
  const text = `{${pairs.join(",")}}`;
  return sha256(new TextEncoder().encode(text));
}

// ----------------------------------------------------------------------------------------------------------------
// What the page reads: a checkpoint it can run, priced by its size before it is read

/** The size of the largest file of a model of the manifest's most_parameters parameters (page_fits' bound): the
 * longest header, float64 weights and their two moments, the step and the RNG. */
export function most_file_bytes({ most_parameters, checkpoint: names }) {
  return 8 + MAX_HEADER + 3 * 8 * most_parameters + 8 * (1 + names.rng_state_len);
}

/** A number of bytes in words, with a binary prefix.
 *
 *     in_bytes(512), in_bytes(3 * 2 ** 30)   // "512 bytes", "3.0 GiB" */
export function in_bytes(n) {
  for (const [power, prefix] of [[40, "TiB"], [30, "GiB"], [20, "MiB"], [10, "KiB"]]) {
    if (n >= 2 ** power) return `${(n / 2 ** power).toFixed(1)} ${prefix}`;
  }
  return `${n} bytes`;
}

/** An Error, before a byte is read, when a file of size bytes is larger than any checkpoint of the manifest's
 * (most_file_bytes): such a file is corrupt, or its model is too large for the page. */
export function check_file_size(size, where, manifest) {
  const most = most_file_bytes(manifest);
  if (size > most) {
    throw new Error(`${where} is ${in_bytes(size)}, more than the ${in_bytes(most)} of the largest`
      + " checkpoint the explorer runs, so it is not read; sample.py runs a larger model");
  }
}

/** A checkpoint file's bytes read as checkpoint.load_bytes and export.read_weights read them (manifest the page's
 * manifest.json, vocab its tokenizer's size): {config (a model_config), step (a Number), val_loss (its text, or
 * null), params (as flat_tensors gives them, to cross from a worker)}, or an Error of one line that starts with
 * where. */
export function read_weights(bytes, where, manifest, vocab) {
  let tensors, metadata, ckpt;
  try {
    ({ tensors, metadata } = decode(bytes));
    ckpt = check_checkpoint(tensors, metadata, manifest);
  } catch (e) {
    throw refusal(where, e.message.split("\n")[0]);
  }
  const config = ckpt.described; // (its sizes held to the file's by check_fits: Numbers, exact)
  if (config.vocab !== vocab) throw refusal(where, `its vocabulary is ${config.vocab} tokens, the page's ${vocab}`);
  const most = manifest.most_parameters;
  if (parameter_count(Object.fromEntries(ckpt.config)) > BigInt(most)) {
    throw refusal(where, `its model has more than the ${most} parameters the page runs (sample.py runs it)`);
  }
  const params = {};
  for (const [name] of each_param(config)) {
    const { shape, values } = tensors.get(name);
    const wide = values instanceof Float64Array ? values : Float64Array.from(values); // (F32 widened exactly)
    params[name] = { shape: shape.map(Number), values: wide };
  }
  const step = Number(tensors.get(manifest.checkpoint.step).values[0]);
  return { config, step, val_loss: metadata.get("val_loss") ?? null, params };
}

// ----------------------------------------------------------------------------------------------------------------
// Tensors for the page and its worker, and the checkpoint file the page writes

/** A dict of model.js tensors as {name: {shape, values}} with flat Float64Array values (copies): what crosses
 * between the page and the worker (postMessage copies typed arrays cheaply) and what checkpoint files hold. */
export function flat_tensors(tensors) {
  const flat = (t) => (t instanceof Float64Array ? { shape: [t.length], values: Float64Array.from(t) }
    : { shape: [t.rows, t.cols], values: Float64Array.from(t.data) });
  return Object.fromEntries(Object.entries(tensors).map(([name, t]) => [name, flat(t)]));
}

/** The inverse of flat_tensors: model.js tensors (a matrix {rows, cols, data}, or a vector), copies. */
export function unflat_tensors(flat) {
  const tensor = ({ shape, values }) => (shape.length === 1 ? Float64Array.from(values)
    : { rows: shape[0], cols: shape[1], data: Float64Array.from(values) });
  return Object.fromEntries(Object.entries(flat).map(([name, t]) => [name, tensor(t)]));
}

/** The bytes of a training checkpoint of float64 parameters, as checkpoint.checkpoint_bytes writes them (and keeps
 * recorded_training's settings), with the manifest's names and tokenizer_sha256: config a model_config, moments (m,
 * v) model.js tensors like params, rng_words random.js's getstate. */
export function checkpoint_bytes({ params, moments, step, rng_words, config, training, extra = {} },
  { tokenizer_sha256, checkpoint: names }) {
  const tensors = {};
  [params, ...moments].forEach((dict, i) => {
    const flat = flat_tensors(dict);
    for (const name of Object.keys(params)) {
      tensors[["", ...names.moment_prefixes][i] + name] = { dtype: "F64", ...flat[name] };
    }
  });
  tensors[names.step] = { dtype: "I64", shape: [], values: [step] };
  tensors[names.rng] = { dtype: "I64", shape: [names.rng_state_len], values: rng_words };
  const grown = is_grown(config);
  const left_out = grown ? names.model_settings : GROWN_KEYS;
  const recorded = Object.entries(training).filter(([name]) => !left_out.includes(name));
  const metadata = {
    format: names.format,
    format_version: grown ? names.grown_version : names.one_block_version,
    config: JSON.stringify(config_to_json(config)),
    training: JSON.stringify(Object.fromEntries(recorded)),
    tokenizer_sha256,
    ...extra,
  };
  if (grown) metadata[names.metadata_hash_key] = metadata_digest(metadata, names.metadata_hash_key);
  return encode(tensors, metadata);
}
