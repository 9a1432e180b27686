"""The catalogue of named mistakes: each a small change of the lab's model.py, in one function, with what it breaks.

A mistake is written as text replacements of model.py's own lines, inside one function, so that it is at once the
explanation (read the two lines), the mistaken model the grader compares a learner's output with, and the bug that
`python3 -m oneblock.workbook bug` plants. Each `old` appears exactly once in its function (a test holds that).

    >>> m = MISTAKES["loss_grad_not_divided"]
    >>> m["step"], m["edits"][0][1]
    ('loss_and_dlogits', '        dlogits.append(p)  # (V,)')
    >>> broken = mistaken_model(m)
    >>> broken.loss_and_dlogits([[0.0, 0.0]] * 2, [1, 0])[1][0]
    [0.5, -0.5]
"""

import ast
import types
from pathlib import Path

LAB_MODEL = Path(__file__).resolve().parent.parent / "model.py"


def mistake(step, edits, explain, breaks):
    """One entry of the catalogue: the function it changes, its edits [(old line, new line), ...], a paragraph that
    explains it, and the sentence of the model's description (model.py's words) that it breaks."""
    return {"step": step, "edits": edits, "explain": explain, "breaks": breaks}


# ----------------------------------------------------------------------------------------------------------------
# The catalogue, in build order

LAYERNORM = ("LayerNorm of a row r of n numbers: mu = mean(r), var = mean((r - mu)^2) (biased), xhat = (r - mu) /"
             " sqrt(var + EPS), out = g * xhat + b")  # (the model's description, which three mistakes break)

MISTAKES = {
    "variance_n_minus_1": mistake(
        "layernorm_forward",
        [("        s = math.sqrt(fsum(c * c for c in centred) / n + EPS)",
          "        s = math.sqrt(fsum(c * c for c in centred) / (n - 1) + EPS)")],
        "The variance is divided by n - 1, the estimate of a population's variance from a sample. Layer norm "
        "measures the row it has, all of it: the mean of the squared deviations, divided by n. With n - 1 every "
        "row comes out a little too small, by sqrt((n - 1) / n).",
        LAYERNORM),
    "eps_outside_sqrt": mistake(
        "layernorm_forward",
        [("        s = math.sqrt(fsum(c * c for c in centred) / n + EPS)",
          "        s = math.sqrt(fsum(c * c for c in centred) / n) + EPS")],
        "EPS is added after the square root instead of under it. It still keeps the division away from zero, "
        "but it is another number: sqrt(var) + EPS, not sqrt(var + EPS), and every output of the layer moves a "
        "little (most for rows of small variance).",
        LAYERNORM),
    "layernorm_backward_no_mean_terms": mistake(
        "layernorm_backward",
        [("        dx.append([(ui - mean_u - xi * mean_ux) / s for ui, xi in zip(u, xh)])  # (n,)",
          "        dx.append([ui / s for ui in u])  # (n,)")],
        "The gradient through layer norm is taken as if the mean and the variance were constants: dx = u / s. "
        "But both are computed from the row itself, so moving one entry moves them too, and that takes back "
        "the row's mean of u and the part of u along xhat.",
        "Layer-norm input gradient, with u = dy * g: dx = (u - mean(u) - xhat * mean(u * xhat)) / sqrt(var + EPS)"),
    "layernorm_backward_no_xhat_term": mistake(
        "layernorm_backward",
        [("        dx.append([(ui - mean_u - xi * mean_ux) / s for ui, xi in zip(u, xh)])  # (n,)",
          "        dx.append([(ui - mean_u) / s for ui in u])  # (n,)")],
        "The term - xhat * mean(u * xhat) is missing: the gradient takes the mean's dependence on the row into "
        "account, but not the variance's. Dividing by the row's own standard deviation makes the output's "
        "length fixed, so the part of u along xhat has nowhere to go.",
        "Layer-norm input gradient, with u = dy * g: dx = (u - mean(u) - xhat * mean(u * xhat)) / sqrt(var + EPS)"),
    "dg_without_xhat": mistake(
        "layernorm_backward",
        [("    dg = column_sums([[a * xi for a, xi in zip(dyr, xh)] for dyr, xh in zip(dy, cache[\"xhat\"])])  # (n,)",
          "    dg = column_sums(dy)  # (n,)")],
        "The gain's gradient is summed from dy alone, like the bias's. The gain multiplies xhat, so each "
        "position's contribution is dy times the xhat it multiplied: dg = sum over rows of dy * xhat.",
        LAYERNORM),
    "no_scale_forward": mistake(
        "attention_forward",
        [("    scale = 1.0 / math.sqrt(d)", "    scale = 1.0")],
        "The scores are not divided by sqrt(d). A dot product of two d-wide vectors grows like sqrt(d), and "
        "unscaled scores make the softmax sharper than the model means: the attention weights change.",
        "scores = q k^T / sqrt(d), j > i masked out"),
    "no_scale_backward": mistake(
        "attention_backward",
        [("    scale = 1.0 / math.sqrt(d)", "    scale = 1.0")],
        "The forward pass divides the scores by sqrt(d), so their gradient carries the same factor: without it "
        "dq and dk, and so dWq, dWk and dx, are sqrt(d) times too large.",
        "scores = q k^T / sqrt(d), j > i masked out"),
    "mask_reads_later": mistake(
        "attention_forward",
        [("        scores = [fsum(map(mul, q[i], k[j])) * scale for j in range(i + 1)]  # (i+1,) the mask: j > i is"
          " never read",
          "        scores = [fsum(map(mul, q[i], k[j])) * scale for j in range(min(i + 2, T))]  # (i+2,)"),
         ("        ctx.append([fsum(map(mul, w, col[: i + 1])) for col in v_cols])  # (d,)",
          "        ctx.append([fsum(map(mul, w, col[: len(w)])) for col in v_cols])  # (d,)"),
         ("        weights.append(w + [0.0] * (T - i - 1))  # (T,)",
          "        weights.append(w + [0.0] * (T - len(w)))  # (T,)")],
        "The mask lets position i read position i + 1: a token sees the next one, the very token it is trained "
        "to predict. The loss falls fast and means nothing; at sampling time there is no next token to read. "
        "Position i may read positions 0..i only.",
        "scores = q k^T / sqrt(d), j > i masked out: causal, position i reads 0..i only"),
    "softmax_backward_no_mean": mistake(
        "attention_backward",
        [("        dscores.append([wj * (dwj - mean_dw) * scale for wj, dwj in zip(w, dw)])  # (i+1,) the 1/sqrt(d)"
          " included",
          "        dscores.append([wj * dwj * scale for wj, dwj in zip(w, dw)])  # (i+1,)")],
        "The softmax's backward is taken as w * dw, forgetting that the weights of a row sum to 1: raising one "
        "score lowers every other weight. Its gradient is w * (dw - sum_j w_j dw_j), the weighted mean taken "
        "away.",
        "attn = softmax(scores) row by row"),
    "skip_gradient_forgotten": mistake(
        "backward",
        [("    dx1 = add(dx2, dx1_mlp)  # (T, d) skip path 2: both contributions added",
          "    dx1 = dx1_mlp  # (T, d)")],
        "x1 is used twice: it goes into the MLP branch and, unchanged, along the skip path into x2. Its "
        "gradient is the sum of both: the MLP branch's and dx2 itself. Here only the branch's arrives.",
        "At each skip path the incoming gradient goes to both branches and the two contributions are added explicitly"),
    "relu_gradient_everywhere": mistake(
        "backward",
        [("    dpre = [[da if z > 0.0 else 0.0 for da, z in zip(ra, rz)] for ra, rz in zip(dact, cache[\"pre\"])]"
          "  # (T, H) ReLU",
          "    dpre = [[da for da, z in zip(ra, rz)] for ra, rz in zip(dact, cache[\"pre\"])]  # (T, H)")],
        "The gradient passes through ReLU where its input was negative. There ReLU's output is a constant 0: a "
        "small change of the input changes nothing, so its gradient is 0.",
        "m = ReLU(h2 W1 + b1) W2 + b2"),
    "positions_shifted": mistake(
        "forward",
        [("        x0 = add(x0, params[\"pos_emb\"][:T])  # (T, d)",
          "        x0 = add(x0, params[\"pos_emb\"][1:T + 1])  # (T, d)")],
        "Position t gets row t + 1 of the position table: the first row is never used, and a sequence of the "
        "model's full length has no row for its last position. Position t's row is row t.",
        "x0 = tok_emb[ids] + pos_emb[0:T]"),
    "loss_grad_not_divided": mistake(
        "loss_and_dlogits",
        [("        dlogits.append([pi / T for pi in p])  # (V,)", "        dlogits.append(p)  # (V,)")],
        "The loss is the mean over the T positions, so each position's gradient (softmax - onehot) is divided "
        "by T. Without it every gradient of the model is T times too large.",
        "Its gradient with respect to the logits is (softmax(logits[t]) - onehot(targets[t])) / T"),
    "weight_transposed": mistake(
        "attention_forward",
        [("    q = matmul(x, params[\"Wq\"])  # (T, d)", "    q = matmul(x, transpose(params[\"Wq\"]))  # (T, d)")],
        "Wq is used transposed. It is square, so nothing fails, but x Wq^T is another map: the parameter's "
        "(d_in, d_out) layout says q = x Wq, each column of Wq making one component of q.",
        "q,k,v = h1 Wq, h1 Wk, h1 Wv"),
}


# ----------------------------------------------------------------------------------------------------------------
# A mistake applied


def planted(source, entry):
    """source with entry's edits made inside its step's function; a ValueError if an old line is not there exactly
    once in that function."""
    lines = source.split("\n")
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == entry["step"])
    for old, new in entry["edits"]:
        where = [i for i in range(node.lineno - 1, node.end_lineno) if lines[i] == old]
        if len(where) != 1:
            raise ValueError(f"the line {old.strip()!r} is in {entry['step']} {len(where)} times; expected once")
        lines[where[0]] = new
    return "\n".join(lines)


def mistaken_model(entry):
    """A module-like namespace of the lab's model.py with entry's mistake planted."""
    text = planted(LAB_MODEL.read_text(encoding="utf-8"), entry)
    namespace = {"__name__": "mistaken_model"}
    exec(compile(text, "model.py (a catalogue mistake)", "exec"), namespace)
    return types.SimpleNamespace(**namespace)
