// draw.js: the page's pictures on <canvas>: heatmaps and line charts, sharp on any screen, sized to their box.
//
//     const grid = heatmap(canvas, weights, {labels: tokens, color: blues});
//     grid.cell_at(event)   // {row, col} under the mouse, or null

// ----------------------------------------------------------------------------------------------------------------
// Colours

/** The colour a share t in [0, 1] of the way from the colour from to the colour to, each [red, green, blue]. */
function mix(from, to, t) {
  return `rgb(${from.map((f, k) => Math.round(f + (to[k] - f) * Math.min(1, Math.max(0, t)))).join(", ")})`;
}

/** A colour for t in [0, 1] along white -> dark blue (attention weights). */
export function blues(t) {
  return mix([247, 251, 255], [8, 48, 107], t);
}

/** A colour for c in [-1, 1] along blue -> white -> red (cosine similarity). */
export function diverging(c) {
  return mix([255, 255, 255], c < 0 ? [33, 102, 172] : [178, 24, 43], Math.abs(c));
}

/** A colour for a loss in nats: green when the model expected the token, through yellow, to red from 4 nats up. */
export function surprise(nats) {
  const t = Math.min(1, Math.max(0, nats / 4));
  return `hsl(${Math.round(120 * (1 - t))}, 75%, ${Math.round(42 + 8 * (1 - t))}%)`;
}

// ----------------------------------------------------------------------------------------------------------------
// Canvas set-up

/** Size the canvas's pixels to its box (times the screen's pixel ratio), its CSS height to height, and return
 * {ctx, width, height} in CSS pixels. */
function fit_canvas(canvas, height) {
  const width = Math.max(120, canvas.clientWidth || canvas.parentElement.clientWidth);
  canvas.style.height = `${height}px`;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  ctx.font = "11px system-ui, sans-serif";
  return { ctx, width, height };
}

// ----------------------------------------------------------------------------------------------------------------
// Heatmap

/** Draw values (rows x cols, arrays of numbers) as square cells, row labels on the left, column labels on top when
 * the cells are big enough. options: labels (of the rows, and of the columns too), color (value ->
 * CSS colour), mask (row, col) -> true to leave a cell blank, highlight (a row to outline), max_cell (pixels).
 * The canvas's data-highlight is the row outlined ("" for none). Returns {cell_at(mouse event) -> {row, col} | null,
 * outline(row): move the outline to row (null: none)}.
 *
 *     const grid = heatmap(canvas, [[1, 0], [0.5, 0.5]], { highlight: 1 });
 *     grid.outline(0)   // canvas.dataset.highlight === "0" */
export function heatmap(canvas, values, options = {}) {
  const rows = values.length;
  const cols = rows ? values[0].length : 0;
  const labels = options.labels ?? [];
  const color = options.color ?? blues;
  const box = Math.max(120, canvas.parentElement.clientWidth);
  const margin = labels.length ? 64 : 4;
  const cell = Math.max(2, Math.min(options.max_cell ?? 28, Math.floor((box - margin - 4) / Math.max(cols, 1))));
  const show_labels = cell >= 9;
  const top = show_labels && labels.length ? 56 : 4;
  canvas.style.width = `${margin + cell * cols + 4}px`;
  const { ctx, width, height } = fit_canvas(canvas, top + cell * rows + 4);

  /** The whole map again, with row (or none) outlined. */
  function paint(row) {
    ctx.clearRect(0, 0, width, height);
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) {
        if (options.mask?.(i, j)) continue;
        ctx.fillStyle = color(values[i][j]);
        ctx.fillRect(margin + j * cell, top + i * cell, cell, cell);
      }
    }
    ctx.fillStyle = "#333";
    ctx.textBaseline = "middle";
    if (show_labels) {
      ctx.textAlign = "right";
      labels.forEach((label, i) => ctx.fillText(label, margin - 4, top + (i + 0.5) * cell, margin - 6));
      ctx.textAlign = "left";
      labels.forEach((label, j) => {
        ctx.save();
        ctx.translate(margin + (j + 0.5) * cell, top - 4);
        ctx.rotate(-Math.PI / 3);
        ctx.fillText(label, 0, 0, top);
        ctx.restore();
      });
    }
    const outlined = row !== undefined && row !== null && row >= 0 && row < rows;
    if (outlined) {
      ctx.strokeStyle = "#d81b60";
      ctx.lineWidth = 2;
      ctx.strokeRect(margin - 1, top + row * cell - 1, cols * cell + 2, cell + 2);
    }
    canvas.dataset.highlight = outlined ? String(row) : "";
  }

  let shown = options.highlight ?? null;
  paint(shown);
  return {
    cell_at(event) {
      const rect = canvas.getBoundingClientRect();
      const col = Math.floor((event.clientX - rect.left - margin) / cell);
      const row = Math.floor((event.clientY - rect.top - top) / cell);
      return row >= 0 && row < rows && col >= 0 && col < cols ? { row, col } : null;
    },
    outline(row) {
      if ((row ?? null) === shown) return;
      shown = row ?? null;
      paint(shown);
    },
  };
}

// ----------------------------------------------------------------------------------------------------------------
// Line chart

/** Draw series of [x, y] points on linear axes. options: series [{points, color, label, dash, dots}], x_max,
 * y_max (y starts at 0), hlines [{y, color, label, dash}], vlines [{x, color, label, dash}], x_label, height.
 * The canvas's data-points gives the number of points drawn. */
export function line_chart(canvas, options) {
  const { ctx, width, height } = fit_canvas(canvas, options.height ?? 220);
  const pad = { left: 40, right: 10, top: 10, bottom: 30 };
  const w = width - pad.left - pad.right;
  const h = height - pad.top - pad.bottom;
  const x_max = Math.max(options.x_max ?? 1, 1e-9);
  const y_max = Math.max(options.y_max ?? 1, 1e-9);
  const X = (x) => pad.left + (x / x_max) * w;
  const Y = (y) => pad.top + h - (Math.min(Math.max(y, 0), y_max) / y_max) * h;

  // axes, ticks and labels
  ctx.strokeStyle = "#999";
  ctx.lineWidth = 1;
  ctx.strokeRect(pad.left, pad.top, w, h);
  ctx.fillStyle = "#444";
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  const y_step = nice_step(y_max / 4);
  for (let y = 0; y <= y_max + 1e-9; y += y_step) ctx.fillText(format_tick(y), pad.left - 4, Y(y));
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  const x_step = nice_step(x_max / 5);
  for (let x = 0; x <= x_max + 1e-9; x += x_step) ctx.fillText(format_tick(x), X(x), pad.top + h + 4);
  if (options.x_label) ctx.fillText(options.x_label, pad.left + w / 2, pad.top + h + 16);

  /** A dashed guide from (x0, y0) to (x1, y1), its label at (lx, ly) aligned to align (pixels). */
  const guide = (line, [x0, y0, x1, y1], [lx, ly], align) => {
    ctx.strokeStyle = line.color;
    ctx.setLineDash(line.dash ?? [6, 4]);
    ctx.beginPath();
    ctx.moveTo(x0, y0);
    ctx.lineTo(x1, y1);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = line.color;
    ctx.textAlign = align;
    ctx.textBaseline = "bottom";
    ctx.fillText(line.label ?? "", lx, ly);
  };
  for (const { y, ...line } of options.hlines ?? []) {
    guide(line, [pad.left, Y(y), pad.left + w, Y(y)], [pad.left + w - 4, Y(y) - 2], "right");
  }
  for (const { x, ...line } of options.vlines ?? []) {
    guide(line, [X(x), pad.top, X(x), pad.top + h], [X(x) + 4, pad.top + h - 4], "left");
  }

  let drawn = 0;
  let legend_x = pad.left + 8;
  for (const s of options.series) {
    ctx.strokeStyle = s.color;
    ctx.fillStyle = s.color;
    ctx.lineWidth = s.width ?? 1.5;
    ctx.setLineDash(s.dash ?? []);
    ctx.beginPath();
    s.points.forEach(([x, y], i) => (i ? ctx.lineTo(X(x), Y(y)) : ctx.moveTo(X(x), Y(y))));
    ctx.stroke();
    ctx.setLineDash([]);
    if (s.dots) for (const [x, y] of s.points) ctx.fillRect(X(x) - 2, Y(y) - 2, 4, 4);
    drawn += s.points.length;
  }
  // the legend last, on a white ground, so that no curve runs through its labels
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  for (const s of options.series.filter((s) => s.label)) {
    const width = 20 + ctx.measureText(s.label).width;
    ctx.fillStyle = "rgba(255, 255, 255, 0.85)";
    ctx.fillRect(legend_x - 2, pad.top + 1, width, 12);
    ctx.fillStyle = s.color;
    ctx.fillRect(legend_x, pad.top + 6, 12, 3);
    ctx.fillText(s.label, legend_x + 16, pad.top + 1);
    legend_x += 4 + width;
  }
  canvas.dataset.points = drawn;
}

/** A round step (1, 2 or 5 times a power of ten) near raw.
 *
 *     nice_step(0.37)   // 0.5 */
function nice_step(raw) {
  const power = 10 ** Math.floor(Math.log10(raw));
  const f = raw / power;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * power;
}

function format_tick(v) {
  return Math.abs(v) >= 1000 ? `${Math.round(v / 100) / 10}k` : String(Math.round(v * 1000) / 1000);
}
