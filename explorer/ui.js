// ui.js: what page.js, experiments.js and lessons.js share: finding elements, messages in the page, reading a form's
// fields, fetching the served files, and showing numbers and tokens.

export const $ = (id) => document.getElementById(id);

/** Show text in the message element (or the element of that id; kind "error" or "note"); empty text hides it. */
export function say(id, text, kind = "error") {
  const el = typeof id === "string" ? $(id) : id;
  el.textContent = text;
  el.className = `message ${kind === "error" ? "error" : ""}`;
  el.hidden = !text;
}

/** What read() reads from a panel's fields, with the panel's message element id emptied; or null, with the message
 * of read's Error (the first field that is wrong) said there. */
export function read_or_say(id, read) {
  say(id, "");
  try {
    return read();
  } catch (e) {
    say(id, `${e.message}.`);
    return null;
  }
}

/** A number field's value, or an Error naming the field, the bad value and what is expected; ok(v) says whether v
 * is allowed. */
export function read_number(id, label, ok, expected) {
  const raw = $(id).value.trim();
  const v = Number(raw);
  if (raw === "" || !Number.isFinite(v) || !ok(v)) {
    throw new Error(`${label} is ${JSON.stringify(raw)}; expected ${expected}`);
  }
  return v;
}

/** An integer field's value from low to high, or an Error as read_number's. */
export function read_int(id, label, low, high) {
  const whole = (v) => Number.isInteger(v) && v >= low && v <= high;
  return read_number(id, label, whole, `a whole number from ${low} to ${high}`);
}

/** A number in four significant digits, or in e-notation when it is tiny or huge; 0 as "0".
 *
 *     format_number(0.000123456)   // "1.235e-4" */
export function format_number(x) {
  return x === 0 ? "0" : Math.abs(x) >= 1e-3 && Math.abs(x) < 1e4 ? x.toPrecision(4) : x.toExponential(3);
}

/** A token as a chip shows it: a space as ␣, a newline as ⏎.
 *
 *     show_token(" mia")   // "␣mia" */
export function show_token(t) {
  return t.replaceAll(" ", "␣").replaceAll("\n", "⏎");
}

/** Call fn at the next frame, once however many times it was asked for before then (pending: a Map kept by the
 * caller, fn's key in it). */
export function soon(pending, key, fn) {
  if (pending.has(key)) return;
  pending.set(key, requestAnimationFrame(() => {
    pending.delete(key);
    fn();
  }));
}

/** The served file at path (relative to the page): its bytes (as "bytes"), its text (as "text") or its parsed JSON
 * (as "json"), or an Error that names it. A file of more than most bytes is refused, unread when the server gives
 * its size. */
export async function fetch_file(path, as, most = Infinity) {
  let response;
  try {
    response = await fetch(path, { cache: "no-store" });
  } catch (e) {
    throw new Error(`could not fetch ${path} (${e.message})`);
  }
  if (!response.ok) throw new Error(`could not fetch ${path} (HTTP ${response.status})`);
  const size = Number(response.headers.get("content-length") ?? 0);
  const bytes = size > most ? null : new Uint8Array(await response.arrayBuffer());
  if (bytes === null || bytes.length > most) {
    throw new Error(`${path} is ${bytes?.length ?? size} bytes, more than the ${most} the page reads`);
  }
  const text = as === "bytes" ? null : new TextDecoder().decode(bytes);
  return as === "json" ? JSON.parse(text) : as === "text" ? text : bytes;
}

/** A figure of a caption and a canvas (an image that label describes), appended to parent: the canvas. */
export function add_figure(parent, caption, label) {
  const figure = element("figure"), canvas = element("canvas");
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", label);
  figure.append(element("figcaption", "", caption), canvas);
  parent.append(figure);
  return canvas;
}

/** A table row of cells, each [text, class].
 *
 *     table_row([["tok_emb", ""], ["3.1e-10", "num"]]).cells.length   // 2 */
export function table_row(cells) {
  const tr = element("tr");
  for (const [text, cls] of cells) tr.append(element("td", cls, text));
  return tr;
}

/** A new element of tag with the given class and text. */
export function element(tag, className = "", text = "") {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text) el.textContent = text;
  return el;
}
