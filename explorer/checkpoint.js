// checkpoint.js: checkpoint.py's safetensors files in JavaScript: read one (with the same checks and messages), and
// write one that sample.py, train.py's reader and explore.py accept.
//
// A safetensors file is 8 bytes N (little-endian), N bytes of JSON header (padded with spaces to a multiple of 8),
// then every tensor's little-endian values one after another; checkpoint.py's docstring has the details. A
// training checkpoint holds the parameters (a grown model's other blocks as block{k}.<name>), Adam's moments
// (adam_m.<name>, adam_v.<name>), adam_step, rng_state, and metadata: format, format_version ("1" for one block and
// one head, "2" for a grown model, whose config has blocks and heads), config, training, tokenizer_sha256,
// data_sha256 and, in version 2, metadata_sha256: the hash of the other metadata, which this reader checks as
// checkpoint.py does (a changed number of heads shows in no tensor's shape).
//
//     const bytes = encode({w: {dtype: "F64", shape: [2], values: [1, 2]}}, {note: "hi"});
//     decode(bytes).tensors.w.values   // Float64Array [1, 2]

import { by_code_point } from "./bpe.js";
import { SCHEMES, check_sizes, matrix, param_names, param_shapes } from "./model.js";

// ----------------------------------------------------------------------------------------------------------------
// SHA-256 (FIPS 180-4), so that a page served from any static host, where crypto.subtle may be missing, can check
// and write the data hash

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

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
  const h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
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
// The safetensors container

export const DTYPES = { F32: 4, F64: 8, I64: 8 }; // safetensors dtype -> bytes per value
const HEADER_ALIGN = 8;
const MAX_HEADER = 100 * 1024 * 1024; // a longer header means a corrupt file
export const DATA_HASH_KEY = "data_sha256";

/** The bytes of a safetensors file holding tensors {name: {dtype, shape, values}} in the given order; metadata
 * (strings) goes into "__metadata__" with the data's SHA-256 added. I64 values are Numbers (exact below 2^53). */
export function encode(tensors, metadata = {}) {
  const header = {};
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (t.values.length !== n) throw new Error(`tensor '${name}' has ${t.values.length} values but shape [${t.shape}] needs ${n}`);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + n * DTYPES[t.dtype]] };
    offset += n * DTYPES[t.dtype];
  }
  const data = new Uint8Array(offset);
  const view = new DataView(data.buffer);
  for (const [name, t] of Object.entries(tensors)) {
    let at = header[name].data_offsets[0];
    for (const x of t.values) {
      if (t.dtype === "F64") view.setFloat64(at, x, true);
      else if (t.dtype === "F32") view.setFloat32(at, x, true);
      else view.setBigInt64(at, BigInt(x), true);
      at += DTYPES[t.dtype];
    }
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

/** {tensors, metadata} from the bytes of a safetensors file; anything malformed is an Error naming it, with the
 * messages of checkpoint.decode. Values: Float64Array (F32 widened exactly) or an Array of Numbers (I64). */
export function decode(bytes) {
  if (bytes.length < 8) {
    throw new Error(`the file is ${bytes.length} bytes, shorter than the 8-byte header length: it is truncated or not a safetensors file`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = Number(view.getBigUint64(0, true));
  if (n > MAX_HEADER) {
    throw new Error(`the header length reads ${n} bytes, more than the ${MAX_HEADER} allowed: the file is corrupt or not a safetensors file`);
  }
  if (8 + n > bytes.length) throw new Error(`the header length reads ${n} bytes but only ${bytes.length - 8} follow: the file is truncated`);
  let header;
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(8, 8 + n));
    if (!text.startsWith("{")) throw new SyntaxError("it does not start with '{'");
    header = JSON.parse(text);
  } catch (e) {
    throw new Error(`the header is not valid UTF-8 JSON (${e.message}): the file is corrupt`);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) {
    throw new Error("the header is not a JSON object: the file is corrupt");
  }
  const metadata = header.__metadata__ ?? {};
  delete header.__metadata__;
  if (typeof metadata !== "object" || Object.values(metadata).some((v) => typeof v !== "string")) {
    throw new Error("__metadata__ must map strings to strings: the file is corrupt");
  }
  const data = bytes.subarray(8 + n);
  const dview = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const spans = [];
  const tensors = {};
  for (const [name, info] of Object.entries(header)) {
    const { dtype, shape, data_offsets: offsets } = info ?? {};
    if (!(dtype in DTYPES)) throw new Error(`tensor '${name}' has dtype ${JSON.stringify(dtype)}; this reader knows F32, F64, I64`);
    if (!Array.isArray(shape) || shape.some((s) => !Number.isInteger(s) || s < 0)) {
      throw new Error(`tensor '${name}' has shape ${JSON.stringify(shape)}; expected a list of non-negative ints`);
    }
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(Number.isInteger) || !(0 <= offsets[0] && offsets[0] <= offsets[1])) {
      throw new Error(`tensor '${name}' has data_offsets ${JSON.stringify(offsets)}; expected [begin, end], 0 <= begin <= end`);
    }
    const count = shape.reduce((a, b) => a * b, 1);
    if (offsets[1] - offsets[0] !== count * DTYPES[dtype]) {
      throw new Error(`tensor '${name}' covers ${offsets[1] - offsets[0]} bytes, but ${dtype} of shape (${shape}) needs ${count * DTYPES[dtype]}: the file is corrupt`);
    }
    if (offsets[1] > data.length) {
      throw new Error(`tensor '${name}' ends at byte ${offsets[1]} of the data, but the file holds only ${data.length} bytes of data: the file is truncated`);
    }
    spans.push([offsets[0], offsets[1], name]);
    const values = dtype === "I64" ? new Array(count) : new Float64Array(count);
    for (let i = 0; i < count; i++) {
      const at = offsets[0] + i * DTYPES[dtype];
      values[i] = dtype === "F64" ? dview.getFloat64(at, true) : dtype === "F32" ? dview.getFloat32(at, true) : Number(dview.getBigInt64(at, true));
    }
    tensors[name] = { dtype, shape, values };
  }
  let end = 0;
  for (const [begin, stop, name] of spans.sort((a, b) => a[0] - b[0] || a[1] - b[1])) {
    if (begin !== end) {
      throw new Error(`tensor '${name}' starts at byte ${begin} of the data, expected ${end}: the tensors must follow each other without gaps or overlaps`);
    }
    end = stop;
  }
  if (end !== data.length) throw new Error(`the data part has ${data.length} bytes but the tensors cover ${end}: the file is corrupt`);
  if (metadata[DATA_HASH_KEY] !== undefined && sha256(data) !== metadata[DATA_HASH_KEY]) {
    throw new Error("the data's SHA-256 differs from the one recorded in the header: the file is corrupt");
  }
  return { tensors, metadata };
}

// ----------------------------------------------------------------------------------------------------------------
// The training checkpoint (checkpoint.py's second half)

export const FORMAT = "one-block checkpoint";
export const FORMAT_VERSION = "1"; // a model of one block and one head, as before models could grow
export const GROWN_VERSION = "2"; // a grown model: its config has blocks and heads
export const METADATA_HASH_KEY = "metadata_sha256";
const MOMENT_PREFIXES = ["adam_m.", "adam_v."];
const METADATA_KEYS = ["format", "format_version", "config", "training", "tokenizer_sha256"];
const KNOWN_KEYS = [...METADATA_KEYS, "corpus_sha256", "val_loss", "floor_nats_per_token", "val_floor_nats_per_token", "text", "text_sha256", "split", "tokenizer", "explorer_source", DATA_HASH_KEY, METADATA_HASH_KEY]; // checkpoint.KNOWN_KEYS
const CONFIG_KEYS = ["vocab", "d", "hidden", "max_len", "blocks", "heads", "use_positions", "positions"];

/** Every tensor a training checkpoint holds, name -> shape, for a model config (blocks 1 when it has none).
 *
 *     Object.keys(expected_shapes({vocab: 96, d: 16, hidden: 64, max_len: 64})).length   // 56 */
export function expected_shapes(config) {
  const params = param_shapes({ ...config, blocks: config.blocks ?? 1 });
  const shapes = { ...params };
  for (const prefix of MOMENT_PREFIXES) for (const [name, s] of Object.entries(params)) shapes[prefix + name] = s;
  shapes.adam_step = [];
  shapes.rng_state = [625];
  return shapes;
}

/** A JSON string as Python's json.dumps writes it with ensure_ascii: every character outside space to ~ escaped, as
 * \uXXXX in lower-case hex (a character past U+FFFF as its two surrogates), but the five with short escapes.
 *
 *     python_json_string('Zoë "x"\n')   // '"Zo\\u00eb \\"x\\"\\n"' */
export function python_json_string(text) {
  const short = { '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f" };
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const ch = text[i], code = text.charCodeAt(i);
    out += short[ch] ?? (code >= 0x20 && code <= 0x7e ? ch : `\\u${code.toString(16).padStart(4, "0")}`);
  }
  return out + '"';
}

/** The SHA-256 that metadata_sha256 records, as checkpoint.metadata_digest: of every metadata entry but data_sha256
 * and metadata_sha256 itself, written as one JSON object with its keys sorted, no spaces and every character past
 * ASCII escaped. */
export function metadata_digest(metadata) {
  const keys = Object.keys(metadata).filter((key) => key !== DATA_HASH_KEY && key !== METADATA_HASH_KEY);
  const text = `{${keys.sort(by_code_point).map((key) => `${python_json_string(key)}:${python_json_string(metadata[key])}`).join(",")}}`;
  return sha256(new TextEncoder().encode(text));
}

/** Check a decoded checkpoint as checkpoint.check_checkpoint does (its metadata, config, sizes, tensors and, for a
 * grown model, the metadata's hash); return {config, training, positions, blocks, heads} or throw an Error naming
 * the first problem. */
export function check_checkpoint(tensors, metadata, tokenizer_sha256) {
  if (metadata.format !== FORMAT) {
    throw new Error(`format is ${JSON.stringify(metadata.format ?? null)}, expected '${FORMAT}': not a checkpoint of this model`);
  }
  const version = metadata.format_version;
  if (version !== FORMAT_VERSION && version !== GROWN_VERSION) {
    throw new Error(`format version is ${JSON.stringify(version ?? null)}, but this code reads versions '${FORMAT_VERSION}' (one block, one head) and '${GROWN_VERSION}' (a grown model)`);
  }
  const missing_keys = METADATA_KEYS.filter((key) => !(key in metadata));
  if (missing_keys.length) throw new Error(`metadata lacks ${missing_keys.join(", ")}`);
  const unknown = Object.keys(metadata).find((key) => !KNOWN_KEYS.includes(key));
  if (unknown !== undefined) throw new Error(`metadata has the key ${JSON.stringify(unknown)}, which no checkpoint of this model has`);
  let config, training;
  try {
    config = JSON.parse(metadata.config);
    training = JSON.parse(metadata.training);
  } catch (e) {
    throw new Error(`metadata config or training is not valid JSON (${e.message})`);
  }
  if (typeof config !== "object" || config === null || Array.isArray(config)) throw new Error("metadata config is not a JSON object");
  const odd = Object.keys(config).find((key) => !CONFIG_KEYS.includes(key));
  if (odd !== undefined) throw new Error(`config has the key ${JSON.stringify(odd)}, which no model config has`);
  const grown = version === GROWN_VERSION;
  for (const key of ["vocab", "d", "hidden", "max_len", ...(grown ? ["blocks", "heads"] : [])]) {
    if (!Number.isInteger(config[key]) || config[key] < 1) throw new Error(`config ${key} is ${JSON.stringify(config[key])}, expected a positive int`);
  }
  if (!grown && ("blocks" in config || "heads" in config)) {
    throw new Error(`config has blocks or heads, but format version '${FORMAT_VERSION}' is of one block and one head: a grown model's file is version '${GROWN_VERSION}'`);
  }
  if (typeof config.use_positions !== "boolean") throw new Error(`config use_positions is ${JSON.stringify(config.use_positions)}, expected true or false`);
  const positions = config.positions ?? (config.use_positions ? "learned" : "none");
  if (!SCHEMES.includes(positions)) throw new Error(`config positions is ${JSON.stringify(positions)}, expected one of ${SCHEMES.join(", ")}`);
  if (config.use_positions !== (positions === "learned")) {
    throw new Error(`config use_positions is ${config.use_positions} but positions is '${positions}': use_positions is true exactly for 'learned'`);
  }
  const blocks = config.blocks ?? 1, heads = config.heads ?? 1;
  try {
    check_sizes(config.d, blocks, heads, positions);
  } catch (e) {
    throw new Error(`config ${e.message}`);
  }
  check_training_agrees(training, config, positions, blocks, heads);
  if (metadata.tokenizer_sha256 !== tokenizer_sha256) {
    throw new Error(`the checkpoint was trained with a tokenizer whose SHA-256 is ${String(metadata.tokenizer_sha256).slice(0, 16)}..., but this tokenizer.json has ${tokenizer_sha256.slice(0, 16)}...: token IDs would mean different things`);
  }
  const shapes = expected_shapes(config);
  const missing = Object.keys(shapes).filter((name) => !(name in tensors));
  if (missing.length) throw new Error(`missing tensors: ${missing.slice(0, 5).join(", ")}${missing.length > 5 ? " ..." : ""}`);
  const extra = Object.keys(tensors).filter((name) => !(name in shapes));
  if (extra.length) throw new Error(`unexpected tensors: ${extra.slice(0, 5).join(", ")}${extra.length > 5 ? " ..." : ""}`);
  const float_dtype = tensors.tok_emb.dtype;
  if (!["F32", "F64"].includes(float_dtype)) throw new Error(`tensor 'tok_emb' has dtype ${float_dtype}, expected F32 or F64`);
  for (const [name, want] of Object.entries(shapes)) {
    const { dtype, shape, values } = tensors[name];
    if (shape.join() !== want.join() || shape.length !== want.length) {
      throw new Error(`tensor '${name}' has shape (${shape.join(", ")}), expected (${want.join(", ")}) for config ${metadata.config}`);
    }
    const want_dtype = name === "adam_step" || name === "rng_state" ? "I64" : float_dtype;
    if (dtype !== want_dtype) throw new Error(`tensor '${name}' has dtype ${dtype}, expected ${want_dtype}`);
    if (dtype !== "I64") {
      const bad = values.findIndex((x) => !Number.isFinite(x));
      if (bad >= 0) throw new Error(`tensor '${name}' has non-finite values (the first, at flat index ${bad}, is ${values[bad]})`);
    }
  }
  if (!(METADATA_HASH_KEY in metadata) && grown) {
    throw new Error(`this grown model's file (format version '${GROWN_VERSION}') has no ${METADATA_HASH_KEY}, so nothing shows that its sizes, such as heads, are the ones it was trained with`);
  }
  if (METADATA_HASH_KEY in metadata && metadata_digest(metadata) !== metadata[METADATA_HASH_KEY]) {
    throw new Error(`the metadata's SHA-256 differs from the one recorded in ${METADATA_HASH_KEY}: the header is corrupt or was edited (a model's sizes, such as heads, are in it)`);
  }
  return { config, training, positions, blocks, heads };
}

/** An Error unless the training settings, where they record the scheme, blocks or heads, say what the config says,
 * as checkpoint.check_training does (a file whose two halves disagree was edited, or is not what it claims). */
function check_training_agrees(training, config, positions, blocks, heads) {
  if (typeof training !== "object" || training === null || Array.isArray(training)) throw new Error("metadata training is not a JSON object");
  if ("positions" in training) {
    const recorded = typeof training.positions === "boolean" ? (training.positions ? "learned" : "none") : training.positions;
    const said = typeof training.positions === "string" ? `'${training.positions}'` : JSON.stringify(training.positions);
    if (recorded !== positions) throw new Error(`training positions is ${said}, but the config's scheme is '${positions}'`);
  }
  if ("use_positions" in training && training.use_positions !== config.use_positions) {
    throw new Error(`training use_positions is ${training.use_positions}, but config use_positions is ${config.use_positions}`);
  }
  for (const [name, size] of [["blocks", blocks], ["heads", heads]]) {
    if (name in training && training[name] !== size) throw new Error(`training ${name} is ${training[name]}, but the config's ${name} is ${size}`);
  }
}

/** Read a checkpoint file's bytes: {config, training, positions, blocks, heads, params (model.js tensors), step,
 * metadata}, or an Error that says what is wrong. */
export function load_checkpoint(bytes, tokenizer_sha256) {
  const { tensors, metadata } = decode(bytes);
  const checked = check_checkpoint(tensors, metadata, tokenizer_sha256);
  const params = {};
  for (const name of param_names(checked.blocks)) params[name] = from_values(tensors[name].values, tensors[name].shape);
  return { ...checked, params, step: tensors.adam_step.values[0], metadata };
}

/** A model.js tensor (a matrix {rows, cols, data}, or a vector) with the given shape from flat row-major values. */
export function from_values(values, shape) {
  const flat = Float64Array.from(values); // (rows * cols,)
  if (shape.length === 1) return flat;
  const m = matrix(shape[0], shape[1]);
  m.data.set(flat);
  return m;
}

/** The flat row-major values of a model.js tensor (a copy). */
export function values_of(t) {
  return Float64Array.from(t instanceof Float64Array ? t : t.data);
}

/** A dict of model.js tensors as {name: {shape, values}} with flat Float64Array values: what crosses between the
 * page and the worker (postMessage copies typed arrays cheaply) and what checkpoint files hold. */
export function flat_tensors(tensors) {
  return Object.fromEntries(Object.entries(tensors).map(([name, t]) => [name, { shape: t instanceof Float64Array ? [t.length] : [t.rows, t.cols], values: values_of(t) }]));
}

/** The inverse of flat_tensors. */
export function unflat_tensors(flat) {
  return Object.fromEntries(Object.entries(flat).map(([name, t]) => [name, from_values(t.values, t.shape)]));
}

/** The bytes of a training checkpoint of float64 parameters, as checkpoint.save_checkpoint writes them: moments
 * (m, v) are model.js tensors like params (zeros when none were kept), step the Adam step, rng_words the batch
 * sampler's 625-number state (random.js getstate), extra more metadata strings. A config with blocks or heads is a
 * grown model's: version 2, with the metadata's hash. */
export function checkpoint_bytes({ params, moments, step, rng_words, config, training, tokenizer_sha256, extra = {} }) {
  const tensors = {};
  [params, ...moments].forEach((dict, i) => {
    const flat = flat_tensors(dict);
    for (const name of Object.keys(params)) tensors[["", ...MOMENT_PREFIXES][i] + name] = { dtype: "F64", ...flat[name] };
  });
  tensors.adam_step = { dtype: "I64", shape: [], values: [step] };
  tensors.rng_state = { dtype: "I64", shape: [625], values: rng_words };
  const grown = "blocks" in config || "heads" in config;
  const metadata = {
    format: FORMAT,
    format_version: grown ? GROWN_VERSION : FORMAT_VERSION,
    config: JSON.stringify(config),
    training: JSON.stringify(training),
    tokenizer_sha256,
    ...extra,
  };
  if (grown) metadata[METADATA_HASH_KEY] = metadata_digest(metadata);
  return encode(tensors, metadata);
}
