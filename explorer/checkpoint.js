// checkpoint.js: checkpoint.py's safetensors files in JavaScript: read one, held to the same rules as checkpoint.py
// and explore.py hold it to (the same checks, in the same order, with the same messages), and write one that
// sample.py, train.py's reader and explore.py accept.
//
// A safetensors file is 8 bytes N (little-endian), N bytes of JSON header (padded with spaces to a multiple of 8),
// then every tensor's little-endian values one after another; checkpoint.py's docstring has the details. A
// training checkpoint holds the parameters (a grown model's other blocks as block{k}.<name>), Adam's moments
// (adam_m.<name>, adam_v.<name>), adam_step, rng_state, and metadata: format, format_version ("1" for one block and
// one head, "2" for a grown model, whose config has blocks and heads), config, training, tokenizer_sha256,
// data_sha256 and, in version 2, metadata_sha256: the hash of the other metadata, which this reader checks as
// checkpoint.py does (a changed number of heads shows in no tensor's shape).
//
// Reading goes as in Python, name for name: decode (the container), check_checkpoint (check_metadata, the config
// read by model.js's config_from_json as ModelConfig.from_json reads it, check_fits, check_training, check_tensors,
// check_metadata_hash), load_bytes; then read_weights adds what export.read_weights asks of a file for the page (its
// tokenizer's vocabulary, page_fits), and the page refuses a file larger than any it runs before reading it
// (check_file_size). The JSON of the header is read as Python reads it (parse_json, below), so that the page and
// Python refuse the same files: tests/test_page_loader.py gives both the damaged files of
// tests/test_fuzz_checkpoints.py and compares, file by file. Python's words for what a file holds (said, py_repr)
// are model.js's, as they are config.py's in Python.
//
//     const bytes = encode({w: {dtype: "F64", shape: [2], values: [1, 2]}}, {note: "hi"});
//     decode(bytes).tensors.get("w").values   // Float64Array [1, 2]

import { by_code_point } from "./bpe.js";
import {
  BLOCK_NAMES, GROWN_KEYS, GROWN_VERSION, ONE_BLOCK_VERSION, OUTSIDE, PARAM_SHAPES, SCHEMES, SIZE_KEYS, SWITCH_KEY,
  check_sizes, config_from_json, config_to_json, cut, float_repr, is_grown, matrix, param_names, py_repr, py_type,
  said, tuple_repr,
} from "./model.js";

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
  const h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
    0x5be0cd19]);
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
// JSON as Python reads it, and Python's repr: so that the page holds a file to checkpoint.py's rules, in its words
//
// JSON.parse will not do: it keeps the last of two equal keys (checkpoint.parse_json refuses them), reads 16.0 as 16
// (a float to Python, which no size may be), rounds whole numbers past 2^53, refuses NaN and Infinity (which
// Python writes and reads: a clip of Infinity is no clipping), and gives every object a prototype, so that a tensor
// named "__proto__" or "toString" is not what it seems. Here a JSON value is what Python's json.loads gives, in
// JavaScript: an object is a Map (in the file's order), an array an Array, a whole number a BigInt (Python's int),
// any other number a Number (Python's float), and a string, true, false or null. Its errors are json's, at the
// same character.

const MAX_DIGITS = 4300; // checkpoint.MAX_DIGITS: the longest whole number read
// Python's JSON reader stops near 1,000 levels deep (its recursion limit); this one stops at JSON_DEPTH, for which
// JavaScript's stack always has room. No checkpoint's header, config, training or tokenizer nests more than 4 deep,
// so JSON nested past either is refused by both: between the two, in other words.
const JSON_DEPTH = 500;
const ESCAPES = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
const NAMED = new Map([["n", ["null", null]], ["t", ["true", true]], ["f", ["false", false]], ["N", ["NaN", NaN]],
  ["I", ["Infinity", Infinity]], ["-", ["-Infinity", -Infinity]]]); // the values json reads by name, by first letter
const SMALL_INTS = Array.from({ length: 1024 }, (_, k) => BigInt(k)); // 0n to 1023n
const is_digit = (c) => c >= 0x30 && c <= 0x39; // a character code of 0 to 9
const is_white = (c) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d; // what json skips: space, \t, \n, \r

/** The value of the JSON text as Python's json.loads gives it (see above); an Error that starts with what when it is
 * not JSON, repeats a key in an object, holds a whole number too long to read, or nests deeper than Python's JSON
 * reader goes, with checkpoint.parse_json's messages.
 *
 *     parse_json('{"a": [1, 2.5]}', "the header")   // Map {"a" => [1n, 2.5]}
 *     parse_json('{"a": 1, "a": 2}', "metadata config")   // Error: metadata config has the key 'a' twice */
export function parse_json(text, what) {
  const n = text.length;
  let i = 0, depth = 0;
  const fail = (msg, at) => {
    throw new Error(`${what} is not valid JSON (${msg} at character ${code_points(text, at)})`);
  };
  const white = () => {
    while (i < n && is_white(text.charCodeAt(i))) i++;
  };
  const string = () => { // i at the opening quote; Python's scanstring
    const begin = i;
    let out = "", k = i + 1;
    for (;;) {
      let j = k;
      for (; j < n; j++) {
        const c = text.charCodeAt(j);
        if (c === 0x22 || c === 0x5c) break;
        if (c <= 0x1f) fail("Invalid control character at", j);
      }
      if (j >= n) fail("Unterminated string starting at", begin);
      out += text.slice(k, j);
      if (text.charCodeAt(j) === 0x22) {
        i = j + 1;
        return out;
      }
      if (++j === n) fail("Unterminated string starting at", begin);
      if (text[j] !== "u") {
        if (!Object.hasOwn(ESCAPES, text[j])) fail("Invalid \\escape", j - 1);
        out += ESCAPES[text[j]];
        k = j + 1;
      } else {
        const hex = text.slice(j + 1, j + 5);
        if (j + 5 >= n || !/^[0-9a-fA-F]{4}$/.test(hex)) fail("Invalid \\uXXXX escape", j);
        out += String.fromCharCode(parseInt(hex, 16)); // (a surrogate pair's two halves join, as in Python)
        k = j + 5;
      }
    }
  };
  const number = () => { // Python's _match_number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?
    const start = i;
    let k = i, is_float = false;
    if (text.charCodeAt(k) === 0x2d && ++k >= n) fail("Expecting value", start);
    if (text.charCodeAt(k) >= 0x31 && text.charCodeAt(k) <= 0x39) while (++k < n && is_digit(text.charCodeAt(k)));
    else if (text.charCodeAt(k) === 0x30) k++;
    else fail("Expecting value", start);
    if (k < n - 1 && text[k] === "." && is_digit(text.charCodeAt(k + 1))) {
      is_float = true;
      k += 2;
      while (k < n && is_digit(text.charCodeAt(k))) k++;
    }
    if (k < n - 1 && (text[k] === "e" || text[k] === "E")) {
      const e_start = k++;
      if (k < n - 1 && (text[k] === "-" || text[k] === "+")) k++;
      while (k < n && is_digit(text.charCodeAt(k))) k++;
      if (is_digit(text.charCodeAt(k - 1))) is_float = true;
      else k = e_start; // (an e without digits is not part of the number)
    }
    i = k;
    if (is_float) return Number(text.slice(start, k));
    const negative = text[start] === "-", digits = k - start - (negative ? 1 : 0);
    if (digits > MAX_DIGITS) {
      throw new Error(`${what} has a number of ${commas(digits)} digits, more than the ${commas(MAX_DIGITS)} Python`
        + " reads");
    }
    if (digits > 15) return BigInt(text.slice(start, k));
    let v = 0; // (exact below 10^15: no text to convert, and the small ones made once, as Python keeps its small ints)
    for (let at = k - digits; at < k; at++) v = 10 * v + text.charCodeAt(at) - 0x30;
    const whole = v < SMALL_INTS.length ? SMALL_INTS[v] : BigInt(v);
    return negative ? -whole : whole;
  };
  const deeper = (kind) => { // Python counts each container against its recursion limit
    if (++depth > JSON_DEPTH) {
      throw new Error(`${what} nests deeper than Python's JSON reader goes (maximum recursion depth exceeded while`
        + ` decoding a JSON ${kind} from a unicode string)`);
    }
  };
  const array = () => {
    deeper("array");
    i++;
    white();
    const out = [];
    if (i < n && text.charCodeAt(i) === 0x5d) {
      i++;
      depth--;
      return out;
    }
    for (;;) {
      out.push(value());
      white();
      if (i < n && text.charCodeAt(i) === 0x5d) break;
      if (i >= n || text.charCodeAt(i) !== 0x2c) fail("Expecting ',' delimiter", i);
      i++;
      white();
    }
    i++;
    depth--;
    return out;
  };
  const object = () => {
    deeper("object");
    i++;
    white();
    const pairs = [];
    if (i >= n || text.charCodeAt(i) !== 0x7d) {
      for (;;) {
        if (i >= n || text.charCodeAt(i) !== 0x22) fail("Expecting property name enclosed in double quotes", i);
        const key = string();
        white();
        if (i >= n || text.charCodeAt(i) !== 0x3a) fail("Expecting ':' delimiter", i);
        i++;
        white();
        pairs.push([key, value()]);
        white();
        if (i < n && text.charCodeAt(i) === 0x7d) break;
        if (i >= n || text.charCodeAt(i) !== 0x2c) fail("Expecting ',' delimiter", i);
        i++;
        white();
      }
    }
    i++;
    depth--;
    const out = new Map(); // checkpoint._no_duplicates, once the object is read
    for (const [key, v] of pairs) {
      if (out.has(key)) throw new Error(`${what} has the key ${said(key)} twice`);
      out.set(key, v);
    }
    return out;
  };
  const value = () => { // Python's scan_once
    if (i >= n) fail("Expecting value", i);
    const c = text.charCodeAt(i);
    if (c === 0x22) return string();
    if (c === 0x7b) return object();
    if (c === 0x5b) return array();
    if (is_digit(c)) return number();
    const [word, named] = NAMED.get(text[i]) ?? [];
    if (word !== undefined && text.startsWith(word, i)) {
      i += word.length;
      return named;
    }
    return number();
  };
  if (text.charCodeAt(0) === 0xfeff) fail("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0);
  white();
  const out = value();
  white();
  if (i !== n) fail("Extra data", i);
  return out;
}

/** How many characters (code points, as Python counts them) the first at UTF-16 units of text hold. */
function code_points(text, at) {
  let count = at;
  for (let k = 0; k + 1 < at; k++) {
    const c = text.charCodeAt(k), next = text.charCodeAt(k + 1);
    if (c >= 0xd800 && c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      count--;
      k++;
    }
  }
  return count;
}

/** n (a Number or a BigInt) with commas between thousands, as Python's f"{n:,}".
 *
 *     commas(10n ** 7n)   // "10,000,000" */
export function commas(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** Whether a string decoded from JSON is text that can be written as UTF-8, as checkpoint._is_text: JSON can spell
 * half of a character (a lone surrogate such as \ud800), which no file name or tokenizer holds. */
function is_text(s) {
  return !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
}

/** Why bytes that are not UTF-8 are not, as Python's bytes.decode says it: {reason, start}, for the first bad
 * sequence, at its first byte (whether a byte after it is wrong or missing).
 *
 *     utf8_error(new Uint8Array([0x7b, 0xe2, 0x28]))   // {reason: "invalid continuation byte", start: 1} */
function utf8_error(bytes) {
  for (let at = 0; at < bytes.length;) {
    const b = bytes[at];
    const need = b < 0x80 ? 0 : b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3
      : -1; // the bytes that must follow b
    if (need < 0) return { reason: "invalid start byte", start: at };
    const low = b === 0xe0 ? 0xa0 : b === 0xf0 ? 0x90 : 0x80, high = b === 0xed ? 0x9f : b === 0xf4 ? 0x8f : 0xbf;
    for (let k = 1; k <= need; k++) {
      if (at + k >= bytes.length) return { reason: "unexpected end of data", start: at };
      const c = bytes[at + k];
      const wrong = k === 1 ? c < low || c > high : c < 0x80 || c > 0xbf;
      if (wrong) return { reason: "invalid continuation byte", start: at };
    }
    at += need + 1;
  }
  return { reason: "invalid data", start: bytes.length }; // (TextDecoder and this loop never disagree)
}

/** Bytes as Python's repr writes them.
 *
 *     bytes_repr(new Uint8Array([91, 123, 0]))   // "b'[{\\x00'" */
function bytes_repr(bytes) {
  const text = String.fromCharCode(...bytes);
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = "b" + quote;
  for (const b of bytes) {
    const ch = String.fromCharCode(b);
    if (ch === quote || ch === "\\") out += "\\" + ch;
    else if (ch === "\t") out += "\\t";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (b < 0x20 || b >= 0x7f) out += "\\x" + b.toString(16).padStart(2, "0");
    else out += ch;
  }
  return out + quote;
}

// ----------------------------------------------------------------------------------------------------------------
// The safetensors container

export const DTYPES = { F32: 4, F64: 8, I64: 8 }; // safetensors dtype -> bytes per value
const HEADER_ALIGN = 8;
const MAX_HEADER = 100 * 1024 * 1024; // a longer header means a corrupt file
const MAX_RANK = 64; // checkpoint.MAX_RANK: the most dimensions a tensor may have
export const DATA_HASH_KEY = "data_sha256";

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

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1; // this machine's byte order
const ARRAYS = { F32: Float32Array, F64: Float64Array, I64: BigInt64Array }; // what each dtype's values are read as

/** A typed array of the numbers in little-endian bytes raw (a copy), as checkpoint._unpacked.
 *
 *     unpacked("F64", new Uint8Array(8))   // Float64Array [0] */
function unpacked(dtype, raw) {
  const copy = raw.slice(); // (its own buffer, aligned for the typed array)
  const width = DTYPES[dtype];
  if (!LITTLE_ENDIAN) for (let at = 0; at < copy.length; at += width) copy.subarray(at, at + width).reverse();
  return new ARRAYS[dtype](copy.buffer);
}

/** The number of values of a tensor of this shape (BigInts), or null once it is past most, as checkpoint._count.
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

/** {tensors, metadata} from the bytes of a safetensors file, as checkpoint.decode: the same checks in the same
 * order, with its messages (an Error naming what is malformed). tensors is a Map of name -> {dtype, shape (BigInts),
 * values (a Float32Array, Float64Array or BigInt64Array)}; metadata a Map of strings. */
export function decode(bytes) {
  if (bytes.length < 8) {
    throw new Error(`the file is ${bytes.length} bytes, shorter than the 8-byte header length: it is truncated or`
      + " not a safetensors file");
  }
  const n = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER)) {
    throw new Error(`the header length reads ${n} bytes, more than the ${MAX_HEADER} allowed: the file is corrupt or`
      + " not a safetensors file");
  }
  if (8n + n > BigInt(bytes.length)) {
    throw new Error(`the header length reads ${n} bytes but only ${bytes.length - 8} follow: the file is truncated`);
  }
  const raw_text = bytes.subarray(8, 8 + Number(n));
  if (raw_text[0] !== 0x7b) {
    throw new Error(`the header starts with ${bytes_repr(raw_text.subarray(0, 10))}, expected '{': the file is corrupt`
      + " or not a safetensors file");
  }
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(raw_text);
  } catch {
    const bad = utf8_error(raw_text);
    throw new Error(`the header is not UTF-8 (${bad.reason} at byte ${bad.start}): the file is corrupt`);
  }
  let header;
  try {
    header = parse_json(text, "the header");
  } catch (e) {
    throw new Error(`${e.message}: the file is corrupt`);
  }
  if (!(header instanceof Map)) {
    throw new Error(`the header is a JSON ${py_type(header)}, expected an object: the file is corrupt`);
  }
  const metadata = header.has("__metadata__") ? header.get("__metadata__") : new Map();
  header.delete("__metadata__");
  if (!(metadata instanceof Map) || [...metadata.values()].some((v) => typeof v !== "string")) {
    throw new Error("__metadata__ must map strings to strings: the file is corrupt");
  }
  const broken = [...metadata].find(([key, value]) => !(is_text(key) && is_text(value)));
  if (broken) {
    throw new Error(`__metadata__ ${said(broken[0])} holds half of a character (a lone surrogate), which is not text:`
      + " the file is corrupt");
  }
  const data = bytes.subarray(8 + Number(n));
  const spans = [];
  for (const [name, info] of header) {
    if (!(info instanceof Map) || info.size !== 3 || !["data_offsets", "dtype", "shape"].every((f) => info.has(f))) {
      throw new Error(`tensor ${said(name)}: expected exactly the fields dtype, shape and data_offsets, got`
        + ` ${said(info)}`);
    }
    const dtype = info.get("dtype"), shape = info.get("shape"), offsets = info.get("data_offsets");
    if (typeof dtype !== "string" || !Object.hasOwn(DTYPES, dtype)) {
      throw new Error(`tensor ${said(name)} has dtype ${said(dtype)}; this reader knows ['F32', 'F64', 'I64']`);
    }
    if (Array.isArray(shape) && shape.length > MAX_RANK) { // (before anything is done with each size)
      throw new Error(`tensor ${said(name)} has a shape of ${commas(shape.length)} sizes, more than the ${MAX_RANK}`
        + " this reader takes: the file is corrupt");
    }
    if (!Array.isArray(shape) || shape.some((s) => typeof s !== "bigint" || s < 0n)) {
      throw new Error(`tensor ${said(name)} has shape ${said(shape)}; expected a list of non-negative ints`);
    }
    if (!Array.isArray(offsets) || offsets.length !== 2 || offsets.some((o) => typeof o !== "bigint")
        || !(0n <= offsets[0] && offsets[0] <= offsets[1])) {
      throw new Error(`tensor ${said(name)} has data_offsets ${said(offsets)}; expected [begin, end], 0 <= begin <=`
        + " end");
    }
    const itemsize = BigInt(DTYPES[dtype]);
    const count = count_of(shape, BigInt(data.length) / itemsize);
    if (count === null) {
      throw new Error(`tensor ${said(name)} is ${dtype} of shape ${said_tuple(shape)}, more values than the`
        + ` ${data.length} bytes of data hold: the file is corrupt`);
    }
    const size = count * itemsize;
    if (offsets[1] - offsets[0] !== size) {
      throw new Error(`tensor ${said(name)} covers ${offsets[1] - offsets[0]} bytes, but ${dtype} of shape`
        + ` ${said_tuple(shape)} needs ${said(size)}: the file is corrupt`);
    }
    if (offsets[1] > BigInt(data.length)) {
      throw new Error(`tensor ${said(name)} ends at byte ${offsets[1]} of the data, but the file holds only`
        + ` ${data.length} bytes of data: the file is truncated`);
    }
    spans.push([offsets[0], offsets[1], name]);
  }
  let end = 0n;
  const order = (a, b) => (a < b ? -1 : a > b ? 1 : 0); // (BigInts)
  spans.sort((a, b) => order(a[0], b[0]) || order(a[1], b[1]) || by_code_point(a[2], b[2])); // Python's sorted(spans)
  for (const [begin, stop, name] of spans) {
    if (begin !== end) {
      throw new Error(`tensor ${said(name)} starts at byte ${begin} of the data, expected ${end}: the tensors must`
        + " follow each other without gaps or overlaps");
    }
    end = stop;
  }
  if (end !== BigInt(data.length)) {
    throw new Error(`the data part has ${data.length} bytes but the tensors cover ${end}: the file is corrupt`);
  }
  const want = metadata.get(DATA_HASH_KEY);
  if (want !== undefined && sha256(data) !== want) {
    throw new Error("the data's SHA-256 differs from the one recorded in the header: the file is corrupt");
  }
  const tensors = new Map();
  for (const [name, info] of header) {
    const [begin, stop] = info.get("data_offsets").map(Number);
    const dtype = info.get("dtype");
    tensors.set(name, { dtype, shape: info.get("shape"), values: unpacked(dtype, data.subarray(begin, stop)) });
  }
  return { tensors, metadata };
}

/** said of a shape as a tuple, as checkpoint.py writes said(tuple(shape)). */
function said_tuple(shape) {
  return cut(tuple_repr(shape));
}

// ----------------------------------------------------------------------------------------------------------------
// The training checkpoint (checkpoint.py's second half): which tensors and metadata it holds

export const FORMAT = "one-block checkpoint";
export const FORMAT_VERSION = ONE_BLOCK_VERSION; // a model of one block and one head, as before models could grow
export { GROWN_VERSION }; // a grown model: its config has blocks and heads (model.js: the config's JSON says them)
export const METADATA_HASH_KEY = "metadata_sha256";
const MOMENT_PREFIXES = ["adam_m.", "adam_v."];
const STEP = "adam_step", RNG = "rng_state", RNG_STATE_LEN = 625n;
const METADATA_KEYS = ["format", "format_version", "config", "training", "tokenizer_sha256"]; // required
const TOKENIZER_KEY = "tokenizer";
const TEXT_KEYS = ["text", "text_sha256", "split", TOKENIZER_KEY]; // your own text: all four; the stories: none
const HASH_KEYS = ["tokenizer_sha256", "corpus_sha256", "text_sha256", DATA_HASH_KEY, METADATA_HASH_KEY];
const NUMBER_KEYS = ["val_loss", "floor_nats_per_token", "val_floor_nats_per_token"]; // nats (at least 0), as text
const KNOWN_KEYS = [...METADATA_KEYS, "corpus_sha256", ...NUMBER_KEYS, ...TEXT_KEYS, "explorer_source", DATA_HASH_KEY,
  METADATA_HASH_KEY];
const SPLITS = ["line", "document"];
const BACKENDS = ["numpy", "numpy-plain", "python", "torch", "explorer"];
const DTYPE_NAMES = new Map([["float32", "F32"], ["float64", "F64"]]);
const NATS = /^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/; // checkpoint.NATS: a number of nats as repr writes a float

const list = (names) => py_repr(names); // a list of names as Python prints it: ['a', 'b']
const whole = (v, low) => typeof v === "bigint" && v >= BigInt(low); // a JSON int of at least low
const number = (v) => typeof v === "bigint" || typeof v === "number"; // an int or a float, not true or false
const finite = (v) => typeof v === "bigint" || (typeof v === "number" && Number.isFinite(v));
const is_hash = (v) => /^[0-9a-f]{64}$/.test(v); // checkpoint.SHA256
const is_nats_text = (v) => NATS.test(v) && Number.isFinite(Number(v)); // checkpoint._is_nats_text
const lower = (v) => String(v); // Python's str(bool).lower(): true, false

// checkpoint.TRAINING_RULES: every setting a checkpoint's training may record, name -> [test, what is expected]
const TRAINING_RULES = new Map([
  ["backend", [(v) => BACKENDS.includes(v), `one of ${list(BACKENDS)}`]],
  ["threads", [(v) => whole(v, 1), "a whole number of at least 1"]],
  ["dtype", [(v) => DTYPE_NAMES.has(v), `one of ${list([...DTYPE_NAMES.keys()])}`]],
  ["steps", [(v) => whole(v, 0), "a whole number of at least 0"]],
  ["batch", [(v) => whole(v, 1), "a whole number of at least 1"]],
  ["seq_len", [(v) => whole(v, 1), "a whole number of at least 1"]],
  ["lr", [(v) => finite(v) && v > 0, "a positive finite number"]],
  ["min_lr", [(v) => finite(v) && v >= 0, "a finite number of at least 0"]],
  ["warmup", [(v) => whole(v, 0), "a whole number of at least 0"]],
  ["beta1", [(v) => number(v) && 0 <= v && v < 1, "a number in [0, 1)"]],
  ["beta2", [(v) => number(v) && 0 <= v && v < 1, "a number in [0, 1)"]],
  ["eps", [(v) => finite(v) && v > 0, "a positive finite number"]],
  ["clip", [(v) => number(v) && v > 0, "a positive number (Infinity: no clipping)"]],
  ["seed", [(v) => v === null || whole(v, 0), "a whole number of at least 0, or null (weights from elsewhere)"]],
  ["val_stories", [(v) => v === null || whole(v, 1), "a whole number of at least 1, or null (your own text)"]],
  ["positions", [(v) => typeof v === "boolean" || SCHEMES.includes(v),
    `one of ${list(SCHEMES)}, or true or false (from before the schemes)`]],
  ["blocks", [(v) => whole(v, 1), "a whole number of at least 1"]],
  ["heads", [(v) => whole(v, 1), "a whole number of at least 1"]],
  ["val_fraction", [(v) => number(v) && 0 < v && v < 1, "a number between 0 and 1"]],
  ["vocab_size", [(v) => v === null || whole(v, 1), "a whole number of at least 1, or null (a given tokenizer)"]],
  [SWITCH_KEY, [(v) => typeof v === "boolean", "true or false"]],
  ["eval_every", [(v) => whole(v, 1), "a whole number of at least 1"]],
]);
const TEXT_NEEDS = ["val_fraction", "seq_len"];

/** (blocks, heads) of a model config (a Map of BigInts), as a ModelConfig reads them: one and one when it has
 * neither. */
function sizes_of(config) {
  return [config.get("blocks") ?? 1n, config.get("heads") ?? 1n];
}

/** The position scheme of a config (a Map), as checkpoint.positions_of. */
function positions_of(config) {
  return config.get("positions") ?? (config.get(SWITCH_KEY) ? "learned" : "none");
}

/** (name, shape) of every tensor a training checkpoint of config holds, one at a time, as
 * checkpoint.each_expected: a config of 10^12 blocks costs nothing until its names are read. */
function* each_expected(config) {
  const size = { V: config.get("vocab"), d: config.get("d"), H: config.get("hidden"), L: config.get("max_len") };
  const blocks = sizes_of(config)[0];
  const shape = (name) => PARAM_SHAPES[name].map((s) => size[s]);
  for (const prefix of ["", ...MOMENT_PREFIXES]) {
    for (const name of OUTSIDE.slice(0, 2)) yield [prefix + name, shape(name)];
    for (let b = 0n; b < blocks; b++) {
      for (const name of BLOCK_NAMES) yield [prefix + (b ? `block${b}.` : "") + name, shape(name)];
    }
    for (const name of OUTSIDE.slice(2)) yield [prefix + name, shape(name)];
  }
  yield [STEP, []];
  yield [RNG, [RNG_STATE_LEN]];
}

/** Every tensor a training checkpoint of config holds, name -> shape (BigInts): checkpoint.each_expected's, as a Map.
 *
 *     expected_shapes(new Map([["vocab", 96n], ["d", 16n], ["hidden", 64n], ["max_len", 64n]])).size   // 56 */
export function expected_shapes(config) {
  return new Map(each_expected(config));
}

/** How many tensors a checkpoint of this many blocks holds (a BigInt), as checkpoint.check_fits counts them. */
function tensor_count(blocks) {
  return BigInt(1 + MOMENT_PREFIXES.length) * (BigInt(OUTSIDE.length) + blocks * BigInt(BLOCK_NAMES.length)) + 2n;
}

/** The number of parameters of a model of config (BigInts), by arithmetic, as sizes.parameter_count. */
function parameter_count(config) {
  const size = { V: config.get("vocab"), d: config.get("d"), H: config.get("hidden"), L: config.get("max_len") };
  const one = (name) => PARAM_SHAPES[name].reduce((p, s) => p * size[s], 1n); // the numbers of one tensor
  const numbers = (names) => names.reduce((sum, name) => sum + one(name), 0n);
  return numbers(OUTSIDE) + sizes_of(config)[0] * numbers(BLOCK_NAMES);
}

/** How many numbers the tensors of a checkpoint of config hold, as checkpoint.check_fits counts them. */
function number_count(config) {
  return BigInt(1 + MOMENT_PREFIXES.length) * parameter_count(config) + 1n + RNG_STATE_LEN;
}

/** A count for a message, as checkpoint._many: n with commas, or past MAX_DIGITS digits the power of ten it reaches.
 *
 *     many(10n ** 7n), many(36n * 10n ** 5000n)   // "10,000,000", "at least 10^5,001" */
function many(n) {
  return n < 10n ** BigInt(MAX_DIGITS) ? commas(n) : `at least 10^${commas(String(n).length - 1)}`;
}

const same_shape = (a, b) => a.length === b.length && a.every((s, k) => s === b[k]);

// ----------------------------------------------------------------------------------------------------------------
// Checking a decoded checkpoint, as checkpoint.py does: the same checks, in the same order, with its messages

/** An Error naming the first bad metadata entry (its strings, before config and training are read), as
 * checkpoint.check_metadata; returns the format version. */
function check_metadata(metadata) {
  if (metadata.get("format") !== FORMAT) {
    throw new Error(`format is ${said(metadata.get("format"))}, expected '${FORMAT}': not a checkpoint of this model`);
  }
  const version = metadata.get("format_version");
  if (version !== FORMAT_VERSION && version !== GROWN_VERSION) {
    throw new Error(`format version is ${said(version)}, but this code reads versions '${FORMAT_VERSION}' and`
      + ` '${GROWN_VERSION}'`);
  }
  const missing = METADATA_KEYS.filter((key) => !metadata.has(key));
  if (missing.length) throw new Error(`metadata lacks ${list(missing)}`);
  if (!metadata.has(DATA_HASH_KEY)) {
    throw new Error(`metadata lacks ${DATA_HASH_KEY}, so nothing shows whether the data is the data that was written:`
      + " a changed weight would load unnoticed; every checkpoint this code writes has it");
  }
  const unknown = [...metadata.keys()].find((key) => !KNOWN_KEYS.includes(key));
  if (unknown !== undefined) {
    throw new Error(`metadata has the key ${said(unknown)}, which no checkpoint of this model has; expected some of`
      + ` ${list(KNOWN_KEYS)}`);
  }
  for (const key of HASH_KEYS) {
    if (metadata.has(key) && !is_hash(metadata.get(key))) {
      throw new Error(`metadata ${key} is ${said(metadata.get(key))}, expected a SHA-256: 64 hexadecimal digits`);
    }
  }
  for (const key of NUMBER_KEYS) {
    if (metadata.has(key) && !is_nats_text(metadata.get(key))) {
      throw new Error(`metadata ${key} is ${said(metadata.get(key))}, expected a finite number of at least 0 in`
        + " digits, such as 0.3306");
    }
  }
  const present = TEXT_KEYS.filter((key) => metadata.has(key));
  if (present.length && present.length !== TEXT_KEYS.length) {
    throw new Error(`metadata has ${list(present)} but not ${list(TEXT_KEYS.filter((key) => !metadata.has(key)))}: a`
      + ` model of your own text has all of ${list(TEXT_KEYS)}, a model of the stories none`);
  }
  if (present.length) {
    if (!SPLITS.includes(metadata.get("split"))) {
      throw new Error(`metadata split is ${said(metadata.get("split"))}, expected one of ${list(SPLITS)}`);
    }
    if (!metadata.get("text")) {
      throw new Error("metadata text is empty, expected the name of the text file the model learned");
    }
    parse_json(metadata.get(TOKENIZER_KEY), `the tokenizer it carries (metadata '${TOKENIZER_KEY}')`);
    if (sha256(new TextEncoder().encode(metadata.get(TOKENIZER_KEY))) !== metadata.get("tokenizer_sha256")) {
      throw new Error(`the tokenizer it carries (metadata '${TOKENIZER_KEY}') does not have the SHA-256 recorded in`
        + " tokenizer_sha256: the file is corrupt");
    }
  }
  return version;
}

/** An Error when the config's sizes ask for more tensors, or more numbers, than the file holds, before any name is
 * made for them, as checkpoint.check_fits: a header that says blocks = 10^12 is refused at once, by arithmetic. */
function check_fits(config, tensors) {
  const blocks = sizes_of(config)[0];
  const need_tensors = tensor_count(blocks), need_numbers = number_count(config);
  let have_numbers = 0n;
  for (const { shape } of tensors.values()) have_numbers += shape.reduce((p, s) => p * s, 1n);
  if (need_tensors <= BigInt(tensors.size) && need_numbers <= have_numbers) return;
  const missing = [];
  for (const [name] of each_expected(config)) {
    if (!tensors.has(name)) missing.push(name);
    if (missing.length === 6) break;
  }
  let what;
  if (need_tensors > BigInt(tensors.size)) {
    what = `config blocks is ${commas(blocks)}: a checkpoint of ${commas(blocks)} block${blocks !== 1n ? "s" : ""}`
      + ` holds ${many(need_tensors)} tensors, but this file holds ${commas(tensors.size)}`;
  } else {
    const asked = [...SIZE_KEYS, "blocks"].filter((key) => config.has(key))
      .map((key) => `${key} ${commas(config.get(key))}`);
    what = `the config's sizes (${asked.join(", ")}) make ${many(need_numbers)} numbers, but the tensors of this`
      + ` file hold ${commas(have_numbers)}`;
  }
  if (missing.length) {
    throw new Error(`${what}; missing tensors: ${list(missing.slice(0, 5))}${missing.length > 5 ? " ..." : ""}`);
  }
  for (const [name, want] of each_expected(config)) {
    const shape = tensors.get(name).shape;
    if (!same_shape(shape, want)) {
      throw new Error(`${what}; tensor '${name}' has shape ${cut(tuple_repr(shape))}, expected`
        + ` ${cut(tuple_repr(want))}`);
    }
  }
}

/** An Error naming the first bad setting of a parsed training, as checkpoint.check_training; returns it if good. */
function check_training(training, config, metadata) {
  if (!(training instanceof Map)) {
    throw new Error(`metadata training is a JSON ${py_type(training)}, expected an object of settings`);
  }
  for (const [name, value] of training) {
    if (!TRAINING_RULES.has(name)) {
      throw new Error(`training has the setting ${said(name)}, which no run records; expected some of`
        + ` ${list([...TRAINING_RULES.keys()])}`);
    }
    const [test, expected] = TRAINING_RULES.get(name);
    if (!test(value)) throw new Error(`training ${name} is ${said(value)}, expected ${expected}`);
  }
  const get = (name, otherwise) => (training.has(name) ? training.get(name) : otherwise);
  const str = (name) => py_repr(training.get(name)); // Python's f"{value}" of a number
  if (metadata.has("text")) {
    const lacks = TEXT_NEEDS.filter((name) => !training.has(name));
    if (lacks.length) {
      throw new Error(`training lacks ${list(lacks)}, which a model of your own text (metadata text) needs to split`
        + " its text as it was split");
    }
  }
  if (get("seq_len", 0n) > config.get("max_len")) {
    throw new Error(`training seq_len is ${str("seq_len")}, more than the ${config.get("max_len")} positions of the`
      + " model (config max_len)");
  }
  if (training.has("lr") && get("min_lr", 0n) > training.get("lr")) {
    throw new Error(`training min_lr is ${str("min_lr")}, more than lr ${str("lr")}: expected a learning rate that`
      + " falls");
  }
  if (training.has("steps") && get("warmup", 0n) > training.get("steps")) {
    throw new Error(`training warmup is ${str("warmup")}, longer than the run (steps ${str("steps")})`);
  }
  const scheme = positions_of(config);
  if (training.has("positions")) {
    let recorded = training.get("positions");
    if (typeof recorded === "boolean") recorded = recorded ? "learned" : "none"; // before the schemes
    if (recorded !== scheme) {
      throw new Error(`training positions is ${said(training.get("positions"))}, but the config's scheme is`
        + ` '${scheme}'`);
    }
  }
  if (training.has(SWITCH_KEY) && training.get(SWITCH_KEY) !== config.get(SWITCH_KEY)) {
    throw new Error(`training ${SWITCH_KEY} is ${lower(training.get(SWITCH_KEY))}, but config ${SWITCH_KEY} is`
      + ` ${lower(config.get(SWITCH_KEY))}`);
  }
  sizes_of(config).forEach((size, k) => {
    const name = GROWN_KEYS[k];
    if (get(name, size) !== size) {
      throw new Error(`training ${name} is ${str(name)}, but the config's ${name} is ${size}`);
    }
  });
  return training;
}

/** An Error naming the first bad tensor, as checkpoint.check_tensors: every expected tensor there with its shape and
 * no others, one float dtype (the training dtype's, when recorded), every value finite, a step from 0 to the run's
 * steps, and a Mersenne Twister state that random.Random can have reached. */
function check_tensors(tensors, config, training) {
  const shapes = expected_shapes(config);
  const missing = [...shapes.keys()].filter((name) => !tensors.has(name));
  if (missing.length) {
    throw new Error(`missing tensors: ${list(missing.slice(0, 5))}${missing.length > 5 ? " ..." : ""}`);
  }
  const extra = [...tensors.keys()].filter((name) => !shapes.has(name));
  if (extra.length) {
    const shown = extra.slice(0, 5).map((name) => (name.length <= 60 ? name : name.slice(0, 57) + "..."));
    throw new Error(`unexpected tensors: ${list(shown)}${extra.length > 5 ? " ..." : ""}`);
  }
  const float_dtype = tensors.get("tok_emb").dtype;
  if (float_dtype !== "F32" && float_dtype !== "F64") {
    throw new Error(`tensor 'tok_emb' has dtype ${float_dtype}, expected F32 or F64`);
  }
  if (training.has("dtype") && DTYPE_NAMES.get(training.get("dtype")) !== float_dtype) {
    throw new Error(`tensor 'tok_emb' has dtype ${float_dtype}, but training dtype is ${said(training.get("dtype"))}`);
  }
  for (const [name, want] of shapes) {
    const { dtype, shape, values } = tensors.get(name);
    if (!same_shape(shape, want)) {
      throw new Error(`tensor '${name}' has shape ${cut(tuple_repr(shape))}, expected ${tuple_repr(want)} for config`
        + ` ${py_repr(config)}`);
    }
    const want_dtype = name === STEP || name === RNG ? "I64" : float_dtype;
    if (dtype !== want_dtype) throw new Error(`tensor '${name}' has dtype ${dtype}, expected ${want_dtype}`);
    if (dtype !== "I64") {
      let bad = 0, first = -1;
      for (let k = 0; k < values.length; k++) {
        if (!Number.isFinite(values[k])) {
          if (bad++ === 0) first = k;
        }
      }
      if (bad) {
        throw new Error(`tensor '${name}' has ${bad} non-finite values (the first, at flat index ${first}, is`
          + ` ${float_repr(values[first])})`);
      }
    }
  }
  const step = tensors.get(STEP).values[0];
  if (step < 0n) throw new Error(`${STEP} is ${step}, expected a non-negative count of steps`);
  if (training.has("steps") && step > training.get("steps")) {
    throw new Error(`${STEP} is ${step}, past the end of the run it records (training steps ${training.get("steps")}):`
      + " the file is corrupt");
  }
  const words = tensors.get(RNG).values;
  const last = words[words.length - 1];
  if (words.subarray(0, -1).some((w) => w < 0n || w >= 2n ** 32n) || !(0n <= last && last <= 624n)) {
    throw new Error(`${RNG} is not a Mersenne Twister state (624 32-bit words and a position from 0 to 624)`);
  }
  if (words.subarray(0, -1).every((w) => w === 0n)) {
    throw new Error(`${RNG} has 624 words that are all zero, a Mersenne Twister state that no seed gives (it would draw`
      + " zeros for ever): the file is corrupt");
  }
}

/** An Error unless the metadata is the metadata that was written, as checkpoint.check_metadata_hash: a grown model's
 * file must carry metadata_sha256, and any file that carries it must match it. */
function check_metadata_hash(metadata, version) {
  if (!metadata.has(METADATA_HASH_KEY)) {
    if (version === GROWN_VERSION) {
      throw new Error(`this grown model's file (format version '${GROWN_VERSION}') has no ${METADATA_HASH_KEY}, so`
        + " nothing shows that its sizes, such as heads, are the ones it was trained with: it was written by code from"
        + " before grown models' metadata was hashed; train it again");
    }
    return;
  }
  if (metadata_digest(metadata) !== metadata.get(METADATA_HASH_KEY)) {
    throw new Error(`the metadata's SHA-256 differs from the one recorded in ${METADATA_HASH_KEY}: the header is`
      + " corrupt or was edited (a model's sizes, such as heads, are in it)");
  }
}

/** The message for a tokenizer that is not the one a checkpoint was trained with, as checkpoint.tokenizer_mismatch. */
function tokenizer_mismatch(recorded, have) {
  return `the checkpoint was trained with a tokenizer whose SHA-256 is ${recorded.slice(0, 16)}..., but this`
    + ` tokenizer.json has ${have.slice(0, 16)}...: token IDs would mean different things`;
}

/** Check a decoded checkpoint as checkpoint.check_checkpoint does, in its order: the metadata strings, the config
 * and training JSON, the sizes against what the file holds (before any per-block name is made), the tokenizer's
 * hash, the tensors and, last, the metadata's own hash. Returns {config, training} (Maps) or throws an Error naming
 * the first problem. */
export function check_checkpoint(tensors, metadata, tokenizer_sha256) {
  const version = check_metadata(metadata);
  const config = parse_json(metadata.get("config"), "metadata config"); // a Map: its sizes BigInts, to hold to the file
  config_from_json(config, version === GROWN_VERSION); // ModelConfig.from_json's checks, in its words
  check_fits(config, tensors);
  const [blocks, heads] = sizes_of(config);
  const scheme = positions_of(config);
  const d = config.get("d");
  if (heads > d) { // (as check_sizes says it: heads past d divide nothing, and may be past what a Number holds)
    const divisors = Array.from({ length: Number(d) }, (_, k) => k + 1).filter((k) => d % BigInt(k) === 0n);
    throw new Error(`config heads = ${heads} does not divide the width d = ${d}; expected one of`
      + ` ${divisors.join(", ")}`);
  }
  try {
    check_sizes(Number(d), Number(blocks), Number(heads), scheme); // (check_fits bounds d and blocks)
  } catch (e) {
    throw new Error(`config ${e.message}`);
  }
  if (scheme === "rope" && (config.get("d") / heads) % 2n) {
    throw new Error(`config positions is 'rope', which turns pairs of channels, but the head width d / heads =`
      + ` ${config.get("d") / heads} is odd`);
  }
  const training = check_training(parse_json(metadata.get("training"), "metadata training"), config, metadata);
  if (metadata.get("tokenizer_sha256") !== tokenizer_sha256) {
    throw new Error(tokenizer_mismatch(metadata.get("tokenizer_sha256"), tokenizer_sha256));
  }
  check_tensors(tensors, config, training);
  check_metadata_hash(metadata, version);
  return { config, training };
}

/** Decode and check the bytes of a training checkpoint, as checkpoint.load_bytes (where names it: a bad file is an
 * Error that starts with where): {config, training, tensors, step, metadata}, the config and training as Maps. */
export function load_bytes(bytes, where, tokenizer_sha256) {
  try {
    const { tensors, metadata } = decode(bytes);
    const { config, training } = check_checkpoint(tensors, metadata, tokenizer_sha256);
    return { config, training, tensors, step: tensors.get(STEP).values[0], metadata };
  } catch (e) {
    throw new Error(`${where}: ${e.message}`);
  }
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

/** The SHA-256 that metadata_sha256 records, as checkpoint.metadata_digest: of every metadata entry (a Map, or an
 * object of strings) but data_sha256 and metadata_sha256 itself, written as one JSON object with its keys sorted,
 * no spaces and every character past ASCII escaped. */
export function metadata_digest(metadata) {
  const entries = (metadata instanceof Map ? [...metadata] : Object.entries(metadata))
    .filter(([key]) => key !== DATA_HASH_KEY && key !== METADATA_HASH_KEY)
    .sort((a, b) => by_code_point(a[0], b[0]));
  const pairs = entries.map(([key, value]) => `${python_json_string(key)}:${python_json_string(value)}`);
  const text = `{${pairs.join(",")}}`;
  return sha256(new TextEncoder().encode(text));
}

// ----------------------------------------------------------------------------------------------------------------
// What the page reads: a checkpoint held to checkpoint.py's rules and to export.py's, before anything is built

export const PAGE_COPIES = 8; // export.PAGE_COPIES: float64 copies of the weights the page holds at once
export const PAGE_BYTES = 2 ** 30; // export.PAGE_BYTES: what the page keeps to
const MOST_PARAMETERS = PAGE_BYTES / (8 * PAGE_COPIES); // 16,777,216
// the largest file of a model the page runs: the longest header, float64 weights and their two moments, step and RNG
export const MOST_FILE_BYTES = 8 + MAX_HEADER + 3 * 8 * MOST_PARAMETERS + 8 * (1 + 625);

/** A number of bytes in words, with a binary prefix, as machine.in_bytes.
 *
 *     in_bytes(512), in_bytes(3 * 2 ** 30)   // "512 bytes", "3.0 GiB" */
export function in_bytes(n) {
  for (const [power, prefix] of [[50, "PiB"], [40, "TiB"], [30, "GiB"], [20, "MiB"], [10, "KiB"]]) {
    if (n >= 2 ** power) {
      if (n < 2 ** (power + 10)) return `${(n / 2 ** power).toFixed(1)} ${prefix}`;
      return `${float_repr(Number(n.toPrecision(3)))} bytes`; // (Python's f"{n:.3g}")
    }
  }
  return `${n} bytes`;
}

/** An Error, before a byte is read, when a file of size bytes is larger than any checkpoint the page runs
 * (MOST_FILE_BYTES): such a file is corrupt, or its model is too large for page_fits. */
export function check_file_size(size, where) {
  if (size > MOST_FILE_BYTES) {
    throw new Error(`${where} is ${in_bytes(size)}, more than the ${in_bytes(MOST_FILE_BYTES)} of the largest`
      + ` checkpoint the explorer runs (${commas(MOST_PARAMETERS)} float64 parameters, their two moments and the`
      + " longest header allowed), so it is not read; sample.py runs a larger model");
  }
}

/** An Error, naming the model and why, unless the page can hold a model of config (a checked Map), as
 * export.page_fits: PAGE_COPIES float64 copies of its weights within PAGE_BYTES. */
export function page_fits(config, where) {
  const [blocks, heads] = sizes_of(config);
  const count = parameter_count(config), need = PAGE_COPIES * 8 * Number(count);
  if (need > PAGE_BYTES) {
    throw new Error(`${where} is a model of ${blocks} block${blocks !== 1n ? "s" : ""} x ${heads} head`
      + `${heads !== 1n ? "s" : ""}, width ${config.get("d")}: ${commas(count)} parameters, which the explorer does not`
      + ` run: the page holds about ${PAGE_COPIES} float64 copies of the weights (${in_bytes(need)} here) and keeps to`
      + ` ${in_bytes(PAGE_BYTES)} (at most ${commas(MOST_PARAMETERS)} parameters); sample.py runs it`);
  }
}

/** The page's reading of a checkpoint file's bytes, held to the rules explore.py holds a file to before it exports
 * it (export.read_weights): checkpoint.py's (load_bytes, with the page's tokenizer's hash), a vocabulary the size
 * of the page's tokenizer (vocab tokens, as checkpoint.tokenizer_of), and a model small enough for the page
 * (page_fits). Returns {config, blocks, heads, step, val_loss, params}: config the model's (model.js's
 * model_config, as checkpoint.load_bytes gives a ModelConfig), blocks and heads its, the step a Number, val_loss the
 * text recorded or null, and params flat ({name: {shape, values: Float64Array}}, as flat_tensors gives, so that it
 * can cross from a worker); a bad file is an Error that starts with where. */
export function read_weights(bytes, where, tokenizer_sha256, vocab) {
  const ckpt = load_bytes(bytes, where, tokenizer_sha256);
  if (ckpt.config.get("vocab") !== BigInt(vocab)) {
    throw new Error(`${where}: its tokenizer has ${vocab} tokens, but the model's vocabulary is`
      + ` ${ckpt.config.get("vocab")}`);
  }
  page_fits(ckpt.config, where);
  const config = config_from_json(ckpt.config); // (its sizes held to the file's by check_fits: Numbers, exact)
  const params = {};
  for (const name of param_names(config)) {
    const { shape, values } = ckpt.tensors.get(name);
    const wide = values instanceof Float64Array ? values : Float64Array.from(values); // (F32 widened exactly)
    params[name] = { shape: shape.map(Number), values: wide };
  }
  return { config, blocks: config.blocks, heads: config.heads, step: Number(ckpt.step),
    val_loss: ckpt.metadata.get("val_loss") ?? null, params };
}

/** read_weights with the parameters as model.js tensors, for the page's own data (what explore.py exported). */
export function load_checkpoint(bytes, where, tokenizer_sha256, vocab) {
  const ckpt = read_weights(bytes, where, tokenizer_sha256, vocab);
  return { ...ckpt, params: unflat_tensors(ckpt.params) };
}

// ----------------------------------------------------------------------------------------------------------------
// Tensors for the page and its worker, and the checkpoint file the page writes

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
  const flat = (t) => ({ shape: t instanceof Float64Array ? [t.length] : [t.rows, t.cols], values: values_of(t) });
  return Object.fromEntries(Object.entries(tensors).map(([name, t]) => [name, flat(t)]));
}

/** The inverse of flat_tensors. */
export function unflat_tensors(flat) {
  return Object.fromEntries(Object.entries(flat).map(([name, t]) => [name, from_values(t.values, t.shape)]));
}

/** The bytes of a training checkpoint of float64 parameters, as checkpoint.save_checkpoint writes them: config the
 * model's (a model_config, recorded as config_to_json gives it), moments (m, v) model.js tensors like params (zeros
 * when none were kept), step the Adam step, rng_words the batch sampler's 625-number state (random.js getstate),
 * extra more metadata strings. A grown model's file (is_grown) is version 2, with the metadata's hash. */
export function checkpoint_bytes({ params, moments, step, rng_words, config, training, tokenizer_sha256,
  extra = {} }) {
  const tensors = {};
  [params, ...moments].forEach((dict, i) => {
    const flat = flat_tensors(dict);
    for (const name of Object.keys(params)) {
      tensors[["", ...MOMENT_PREFIXES][i] + name] = { dtype: "F64", ...flat[name] };
    }
  });
  tensors.adam_step = { dtype: "I64", shape: [], values: [step] };
  tensors.rng_state = { dtype: "I64", shape: [625], values: rng_words };
  const grown = is_grown(config);
  const metadata = {
    format: FORMAT,
    format_version: grown ? GROWN_VERSION : FORMAT_VERSION,
    config: JSON.stringify(config_to_json(config)),
    training: JSON.stringify(training),
    tokenizer_sha256,
    ...extra,
  };
  if (grown) metadata[METADATA_HASH_KEY] = metadata_digest(metadata);
  return encode(tensors, metadata);
}
