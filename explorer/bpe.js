// bpe.js: the tokenizer of bpe.py in JavaScript, read from the same tokenizer.json; same IDs, same error messages.
// Encoding: bpe.py's docstring, "How it works" (pieces by tokenizer.json's pattern, bpe.pattern_for).
//
//     const tok = Tokenizer.from_json(await (await fetch("data/tokenizer.json")).json());
//     tok.encode("now mia gives the hat to leo.").map((id) => tok.vocab[id])
//     // ["n", "ow", " mia", " gives", " the", " hat", " to", " leo", "."]

// ----------------------------------------------------------------------------------------------------------------
// Small helpers

/** Python's order of strings: by code point (JavaScript's < compares UTF-16 units, which differs past U+FFFF). */
export function by_code_point(a, b) {
  const x = [...a].map((ch) => ch.codePointAt(0)), y = [...b].map((ch) => ch.codePointAt(0));
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

/** Replace every occurrence of pair in symbols by the joined token, left to right.
 *
 *     merge(["a", "a", "a", "b"], ["a", "a"])   // ["aa", "a", "b"] */
export function merge(symbols, pair) {
  const out = [];
  let i = 0;
  while (i < symbols.length) {
    if (i + 1 < symbols.length && symbols[i] === pair[0] && symbols[i + 1] === pair[1]) {
      out.push(symbols[i] + symbols[i + 1]);
      i += 2;
    } else {
      out.push(symbols[i]);
      i += 1;
    }
  }
  return out;
}

const NOT_PRINTABLE = /^[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]$/u; // what Python's str.isprintable rejects

/** A string as Python's repr() writes it, so that messages read exactly as bpe.py's (quote: the quotes repr would
 * choose for it, or for a longer string it begins).
 *
 *     py_repr("\n ,.ab")   // "'\\n ,.ab'";   py_repr("it's")   // "\"it's\"";   py_repr("\u200b")   // "'\\u200b'" */
export function py_repr(s, quote = s.includes("'") && !s.includes('"') ? '"' : "'") {
  let out = quote;
  for (const ch of s) {
    const c = ch.codePointAt(0);
    const hex = (n) => c.toString(16).padStart(n, "0");
    if (ch === quote || ch === "\\") out += "\\" + ch;
    else if (ch === "\t") out += "\\t";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (c < 0x20 || c === 0x7f) out += "\\x" + hex(2);
    else if (c < 0x7f || (ch !== " " && !NOT_PRINTABLE.test(ch))) out += ch;
    else if (c <= 0xff) out += "\\x" + hex(2);
    else if (c <= 0xffff) out += "\\u" + hex(4);
    else out += "\\U" + hex(8);
  }
  return out + quote;
}

// ----------------------------------------------------------------------------------------------------------------
// The tokenizer

export class Tokenizer {
  /** Base characters (sorted), an ordered list of merges and the pre-tokenizer's pattern (bpe.pattern_for's, as
   * tokenizer.json records it); the vocabulary is rebuilt from them, as in bpe.py. */
  constructor(alphabet, merges, pattern) {
    this.alphabet = alphabet;
    this.pattern = pattern; // the pre-tokenizer
    this.piece_re = new RegExp(this.pattern, "gu"); // (the u flag reads code points, as Python does)
    this.known = new Set(alphabet); // the characters encode accepts
    this.merges = merges;
    this.vocab = [...alphabet, ...merges.map(([a, b]) => a + b)]; // index = token ID
    this.ids = new Map(this.vocab.map((tok, i) => [tok, i]));
    this.ranks = new Map(merges.map(([a, b], rank) => [a + "\u0000" + b, rank]));
    this.cache = new Map(); // piece -> token IDs
  }

  /** The tokenizer of a parsed tokenizer.json (Hugging Face format), as explore.py exports it: bpe.py wrote it, and
   * explore.py read it with bpe.py's checks. */
  static from_json(doc) {
    const vocab = doc?.model?.vocab;
    const merges = doc?.model?.merges;
    const pattern = doc?.pre_tokenizer?.pattern?.Regex;
    if (typeof vocab !== "object" || vocab === null || !Array.isArray(merges) || typeof pattern !== "string") {
      throw new Error("tokenizer.json: expected an object with model.vocab (an object), model.merges (a list) and"
        + " pre_tokenizer.pattern.Regex (a text)");
    }
    const alphabet = Object.keys(vocab).filter((tok) => [...tok].length === 1).sort(by_code_point);
    const tok = new Tokenizer(alphabet, merges, pattern);
    const wrong = tok.vocab.findIndex((t, i) => vocab[t] !== i);
    if (wrong >= 0 || tok.vocab.length !== Object.keys(vocab).length) {
      throw new Error(`tokenizer.json: model.vocab does not match its merges (first difference at ID ${wrong})`);
    }
    return tok;
  }

  // ---- encoding and decoding

  /** Token IDs of one pre-tokenised piece: apply merges in rank order. */
  encode_piece(piece) {
    if (!this.cache.has(piece)) {
      let symbols = [...piece];
      while (symbols.length > 1) {
        let best = Infinity;
        for (let i = 0; i + 1 < symbols.length; i++) {
          const rank = this.ranks.get(symbols[i] + "\u0000" + symbols[i + 1]);
          if (rank !== undefined && rank < best) best = rank;
        }
        if (best === Infinity) break;
        symbols = merge(symbols, this.merges[best]);
      }
      this.cache.set(piece, symbols.map((s) => this.ids.get(s)));
    }
    return this.cache.get(piece);
  }

  /** The first character outside the alphabet as {ch, pos, index, message}, or null. pos counts characters (code
   * points), as Python does; index is where it starts in the JavaScript string. */
  unknown(text) {
    let pos = 0;
    let index = 0;
    for (const ch of text) {
      if (!this.known.has(ch)) {
        const message = `unknown character ${py_repr(ch)} at position ${pos}; the tokenizer knows only`
          + ` ${py_repr(this.alphabet.join(""))}`;
        return { ch, pos, index, message };
      }
      pos += 1;
      index += ch.length;
    }
    return null;
  }

  /** Token IDs of text; an unknown character is an Error with bpe.py's message. */
  encode(text) {
    const bad = this.unknown(text);
    if (bad) throw new Error(bad.message);
    const ids = [];
    for (const piece of text.match(this.piece_re) ?? []) ids.push(...this.encode_piece(piece));
    return ids;
  }

  /** Text of a list of token IDs (each one of the vocabulary's: a model of this tokenizer's size drew them). */
  decode(ids) {
    return ids.map((i) => this.vocab[i]).join("");
  }
}
