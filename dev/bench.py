"""Benchmark (not a test): time one full training step (forward + loss + backward of every parameter) of every
backend side by side, and check the speed targets (the backends and the table: docs/developers.md, "The NumPy paths'
speed"). `--tricks` times each trick of numpy_fast.py, through numpy_fast.py's own code, against the plain line it
replaces. `--against DIR` also times the same backends of the code in DIR (another checkout, such as the code before
a change), in the same rounds, so that before and after are measured side by side.

    python3 -m dev.bench                             # the targets' three sizes, every backend (minutes)
    python3 -m dev.bench --sizes series-b32 --rounds 5 --no-torch --json bench.json
    python3 -m dev.bench --threads 1 --no-torch      # one BLAS thread, as train.py runs
    python3 -m dev.bench --no-compile                # PyTorch eager only: torch.compile compiles each size
    python3 -m dev.bench --tricks --threads 1        # numpy_fast.py's tricks one by one, in seconds
    python3 -m dev.bench --profile --sizes series-b32    # where a tuned step's time goes, per function and line
    python3 -m dev.bench --sizes series-b32 --against ../before --no-torch   # this code and the code in ../before

How it measures, and why:
- Each backend runs in its own worker process, and the NumPy workers never import torch: importing torch changes
  glibc's allocator thresholds, which would hide the page-fault cost a NumPy training loop really pays.
- The workers take turns round by round (only one runs at a time), so a busy phase of this shared machine hits
  every backend alike; a short pause between turns lets the previous worker's BLAS/OpenMP threads stop spinning.
  Each turn runs one untimed step, then enough timed steps to last about --round-seconds.
- The reference runs one sequence at a time (B = 1 at length T, whatever B the size has), a few rounds only; at
  the large size it is skipped (minutes per step), and at a grown size (several blocks or heads): model.py has one
  block and one head.
- `--profile` runs in one torch-free worker: a line tracer charges the time between two lines of numpy_fast.py to
  the first (its NumPy calls), so it shows each layer's and each pass's share of a step; the tracer slows each line
  (by how much: docs/developers.md), so it also prints the untraced time of a step.
- `--tricks` runs in one torch-free worker: for each trick, the plain line and numpy_fast.py's own code take turns
  on the same arrays (`trick_cases`; `plain_variant`: a change to a trick changes what its row times), and the
  median microseconds per call of each is reported, with the functions of numpy_fast.py each side ran.

Shape legend: B = sequences per step, T = positions, d = width, H = hidden width, V = vocabulary, L = max_len.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from unittest import mock

from atomic import folder_for, output_problem, resolved, write_atomic
from dev import figures_judge, positive, timed
from oneblock import machine
from oneblock.config import ModelConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the lab's folder, where workers start

# ----------------------------------------------------------------------------------------------------------------
# Sizes and backends

SIZES = {  # name -> model and batch config; blocks and heads are 1 unless given
    "series-b1": {"V": 96, "d": 16, "H": 64, "L": 64, "B": 1, "T": 63},
    "series-b32": {"V": 96, "d": 16, "H": 64, "L": 64, "B": 32, "T": 64},
    "large": {"V": 4096, "d": 128, "H": 512, "L": 256, "B": 16, "T": 256},
    "grown-b32": {"V": 96, "d": 16, "H": 64, "L": 64, "B": 32, "T": 64, "blocks": 2, "heads": 4},
}
CEILING = ["matmul-f32", "matmul-f64"]  # the ceiling's workers, at every size taking turns with the backends
BACKENDS = ["reference", "plain-f64", "plain-f32", "fast-f64", "fast-f32", "torch-f64", "torch-f32", "compile-f32"]
SEED = 3  # parameters and token IDs are drawn from this seed, identically in every worker


def flops_per_token(cfg):
    """Training FLOPs per token: 6 x non-embedding parameters + 6 x T x d (attention) per block.

    >>> flops_per_token(SIZES["series-b32"]), flops_per_token(SIZES["large"]), flops_per_token(SIZES["grown-b32"])
    (35424, 4555008, 60864)
    """
    config = model_config(cfg)
    non_embedding = config.parameter_count() - (config.vocab + config.max_len) * config.d  # all but the two tables
    return 6 * non_embedding + 6 * config.blocks * cfg["T"] * config.d


def model_config(cfg):
    """The ModelConfig of a size (learned positions, as every size here has).

    >>> model_config(SIZES["grown-b32"]).describe()
    '2 blocks x 4 heads, width 16, learned positions'
    """
    return ModelConfig(vocab=cfg["V"], d=cfg["d"], hidden=cfg["H"], max_len=cfg["L"], blocks=cfg.get("blocks", 1),
                       heads=cfg.get("heads", 1)).checked()


# ----------------------------------------------------------------------------------------------------------------
# Worker side: one backend, one size; steps on request


def make_inputs(cfg, dtype="float64"):
    """Parameters (dict of arrays of dtype: the model's initial ones of seed SEED, as train.py starts from them) and
    IDs, targets (B, T)."""
    import numpy as np

    from oneblock import numpy_model

    rng = np.random.default_rng(SEED)
    ids = rng.integers(0, cfg["V"], (cfg["B"], cfg["T"]))  # (B, T)
    targets = rng.integers(0, cfg["V"], (cfg["B"], cfg["T"]))  # (B, T)
    return numpy_model.init_params(model_config(cfg), SEED, dtype), ids, targets


def make_step(backend, cfg):
    """A function running one training step for a backend (for the ceiling's matmul-f32 and matmul-f64: one
    CEILING_N x CEILING_N matmul in that dtype)."""
    import numpy as np

    if backend.startswith("matmul"):
        a = np.random.default_rng(0).standard_normal((CEILING_N, CEILING_N))  # (n, n)
        a = a.astype(np.float32 if backend.endswith("f32") else np.float64)
        out = np.empty_like(a)  # (n, n)
        return lambda: np.matmul(a, a, out=out)
    params, ids, targets = make_inputs(cfg)
    config = model_config(cfg)
    if backend == "reference":
        import model

        p = {name: t.tolist() for name, t in params.items()}
        x, y = ids[0].tolist(), targets[0].tolist()  # one sequence at a time

        def step():
            logits, cache = model.forward(p, x)
            _, dlogits = model.loss_and_dlogits(logits, y)
            model.backward(p, cache, dlogits)

        return step
    if backend.startswith(("plain", "fast")):  # train.py's own step (fast: its Workspace made once)
        from oneblock import training
        from oneblock.settings import Settings

        s = Settings(backend="numpy-plain" if backend.startswith("plain") else "numpy", dtype="float" + backend[-2:],
                     batch=cfg["B"], seq_len=cfg["T"], threads=machine.blas_threads())
        _, loss_and_grads, _ = training.model_functions(s, config)
        p = {name: t.astype(s.dtype) for name, t in params.items()}
        return lambda: loss_and_grads(p, ids, targets)
    import torch

    from oneblock import torch_model

    p = torch_model.to_torch(params, torch.float32 if backend.endswith("f32") else torch.float64)
    x, y = torch_model.as_ids(ids), torch_model.as_ids(targets)

    def loss(x, y):
        logits, _ = torch_model.forward(p, x, config)
        return torch_model.loss_fn(logits, y)

    if backend.startswith("compile"):  # forward and loss compiled; autograd compiles their backward pass with them
        loss = torch.compile(loss)  # one graph: the twin's blocks and heads come from the config

    def step():
        for t in p.values():
            t.grad = None
        loss(x, y).backward()

    return step


CEILING_N = 2048  # the ceiling is NumPy's own rate on an n x n matmul, n this


def worker(backend, size):
    """Serve the parent over stdin/stdout: 'run K' -> seconds per step over K timed steps, until the parent closes
    stdin. The tricks' worker (size: its rounds) and the profile's answer once and stop."""
    if backend in ("tricks", "profile"):
        print(json.dumps(time_tricks(int(size)) if backend == "tricks" else profile_step(size)), flush=True)
        return
    step = make_step(backend, SIZES[size])
    first = timed(step)  # with torch.compile: the compiling
    times, t_end = [], time.perf_counter() + 0.5  # warm-up for about half a second, at least 3 steps
    while len(times) < 3 or time.perf_counter() < t_end:
        times.append(timed(step))
    print(json.dumps({"estimate": statistics.median(times[len(times) // 2:]), "first": first}), flush=True)
    for line in sys.stdin:  # 'run K'
        step()  # untimed: caches and threads back to work after the other workers' turns
        print(json.dumps({"per_step": timed(step, int(line.split()[1]))}), flush=True)


# ----------------------------------------------------------------------------------------------------------------
# The tricks of numpy_fast.py, one by one: numpy_fast's own function, against the plain line the trick replaces


def trick_cases(nf=None):
    """[(name, shape, plain, tuned)]: two functions doing the same work, on float32 arrays of the series-b32 size
    (N = 2048 positions), or of the large size where the name says so, each returning what it wrote. tuned calls
    numpy_fast's own code (nf: the module, numpy_fast itself by default): the trick's own function, or, where the
    trick is a few lines inside a bigger function (named in brackets), that function. plain is the plain line the
    trick replaces: alone, where the trick is a function of its own; else the same function with that line in place
    of the trick (see `plain_variant`), or a workspace made with the trick switched off by the module's own
    constant or argument. Both write into arrays made beforehand wherever NumPy lets them, and a side that writes
    over its input has arrays of its own; what the workspace itself buys is the gap between the plain and fast
    steps of the main table (and the row "workspace made once")."""
    import numpy as np

    from oneblock import numpy_model as nm

    if nf is None:
        from oneblock import numpy_fast as nf

    f4 = np.float32
    rng = np.random.default_rng(SEED)
    cfg = SIZES["series-b32"]
    config = model_config(cfg)
    B, T, d, H, V = cfg["B"], cfg["T"], config.d, config.hidden, config.vocab
    N = B * T
    params, ids, targets = make_inputs(cfg, f4)  # ids, targets (B, T)

    def normal(*shape):
        return rng.normal(0.0, 1.0, shape).astype(f4)

    for t in params.values():  # no gain exactly 1 and no bias exactly 0: a plain line that drops one shows
        if t.ndim == 1:
            t += 0.1 * normal(*t.shape)  # (n,)

    def workspace():
        """A workspace after one forward pass, made with numpy_fast's constants as they are then."""
        ws = nf.Workspace(params, config, B, T)
        ws.forward(params, ids)
        return ws

    ws = workspace()
    x, x3, g, b = normal(N, d), normal(B, T, d), normal(d), normal(d)  # (N, d), (B, T, d), (d,), (d,)
    sums, out, xhat, rstd = np.empty(d, f4), np.empty((N, d), f4), np.empty((N, d), f4), np.empty(N, f4)
    y_plain = normal(N, H)  # (N, H) the plain side adds the bias to this in place, the tuned side to its copy
    y_tuned = y_plain.copy()  # (N, H)
    dlogits, dw, dw_t = normal(N, V), np.empty((d + 1, V), f4), np.empty((V, d + 1), f4)
    tok_ids, d_tok = ids.reshape(N), np.empty((V, d), f4)  # (N,), (V, d)
    loss_ws = {side: workspace() for side in ("layout", "picked plain", "picked")}
    with mock.patch.object(nf, "VOCAB_MAJOR_BELOW", 0):  # the logits (N, V): the plain layout
        loss_ws["layout plain"] = workspace()

    def variant(qualname, *swaps):
        return plain_variant(nf, qualname, swaps)

    layernorm = {  # the plain lines in layernorm_forward
        "centring": variant("layernorm_forward", (("np.matmul(rows, ws.centering",),
                                                  "np.subtract(rows, rows.mean(-1, keepdims=True), out=xhat)")),
        "row means": variant("layernorm_forward", (("np.matmul(squares, ws.mean_d",),
                                                   "np.mean(squares, axis=1, out=rstd)")),
        "joined rows": variant("layernorm_forward", (("shape = ws.joined_d",), "shape = xhat.shape  # rows of n")),
        "reciprocal": variant("layernorm_forward", (("np.divide(1.0, rstd, out=rstd)", "xhat *= rstd[:, None]"),
                                                    "xhat /= rstd[:, None]  # centred / std\n"
                                                    "np.divide(1.0, rstd, out=rstd)  # (1 / std, for the backward)")),
    }
    relu = variant("block_forward", (("np.maximum(pre, ws.zeros_NH",), "act = np.maximum(pre, 0.0, out=blk.act)"))
    attention = {  # the plain lines in attention_forward
        "fused qkv": variant(
            "attention_forward",
            (('np.multiply(params["Wq"]', "qkv = np.matmul(x.reshape(N, d), blk.w_qkv"),
             "qkv = blk.qkv  # (B, T, 3d): three products, and the scores divided by sqrt(dh)\n"
             'for part, name in enumerate(("Wq", "Wk", "Wv")):\n'
             "    np.matmul(x, params[name], out=qkv[:, :, part * d:(part + 1) * d])"),
            (("st += ws.mask",), "st /= math.sqrt(dh)\nst += ws.mask")),
        "q transposed": variant("attention_forward", (("if B > 1 or nh > 1:",), "if False:  # q's transposed view")),
        "key-major softmax": variant(
            "attention_forward",
            (("if B > 1 or nh > 1:",), "if False:  # (no copy of q: query-major scores take q as it is)"),
            (("st = blk.scores", "st2 *= z"),
             "w = blk.scores.reshape(B, nh, T, T) if nh > 1 else blk.scores.reshape(B, T, T)  # query-major\n"
             "np.matmul(q, k.swapaxes(-1, -2), out=w)  # (B, nh, T_query, T_key)\n"
             "w += ws.mask[:, 0].T  # (T_query, T_key) -inf where the key comes later\n"
             "m = ws.att_top.reshape(*w.shape[:-1], 1)  # (B, nh, T, 1) each query's largest score, then its sum\n"
             "np.max(w, axis=-1, keepdims=True, out=m)\n"
             "w -= m\n"
             "np.exp(w, out=w)\n"
             "np.sum(w, axis=-1, keepdims=True, out=m)\n"
             "w /= m"),
            (("np.matmul(by_query(st, B, nh), v",), "np.matmul(w, v, out=split_heads(blk.ctx, nh))")),
        "full mask": variant("attention_forward", (("st += ws.mask",), "st += ws.mask[:, :1]  # (T, 1, T)")),
    }
    forward = {  # the plain lines in Workspace.forward
        "take clip": variant("Workspace.forward", (('np.take(params["tok_emb"]',),
                                                    'x0 = np.take(params["tok_emb"], ids, axis=0, out=self.x0)')),
        "output bias": variant(
            "Workspace.forward",
            (("self.hf_ones[:, :d] = hf.reshape(N, d)", 'self.w_out_b_out[d] = params["b_out"]'),
             "hf2 = hf.reshape(N, d)  # (N, d): hf @ W_out + b_out"),
            (("np.matmul(self.w_out_b_out.T, self.hf_ones.T",),
             'np.matmul(params["W_out"].T, hf2.T, out=self.logits_memory)  # (V, N)\n'
             'self.logits_memory += params["b_out"][:, None]'),
            (("np.matmul(self.hf_ones, self.w_out_b_out",),
             'np.matmul(hf2, params["W_out"], out=self.logits_memory)  # (N, V)\n'
             'self.logits_memory += params["b_out"]')),
    }
    picked = variant("Workspace.loss_and_dlogits", (("np.take(memory, index, out=self.picked)",),
                                                    "self.picked[...] = np.take_along_axis(lg, targets.reshape(N, 1),"
                                                    " 1)[:, 0]"))
    ln = (x, g, b, out, xhat, rstd, ws)  # layernorm_forward's arguments
    blk = ws.block[0]

    def loss(name, fn=None):
        w = loss_ws[name]
        return lambda: (fn or type(w).loss_and_dlogits)(w, w.logits, targets)

    def add_bias():
        nf.add_bias(y_tuned, params["b1"], ws.joined_H, ws.tile_H)
        return y_tuned

    def token_rows_plain(n):
        def run():
            d_tok.fill(0.0)
            np.add.at(d_tok, tok_ids[:n], x[:n])
            return d_tok
        return run

    return [
        ("column sums", f"({N}, {d})", lambda: np.sum(x, axis=0, out=sums),
         lambda: nf.column_sums(x, ws.ones[N], out=sums)),
        *((f"{name} (layernorm_forward)", f"({N}, {d})", (lambda fn=fn: fn(*ln)), lambda: nf.layernorm_forward(*ln))
          for name, fn in layernorm.items()),
        ("bias rows (add_bias)", f"({N}, {H})", lambda: np.add(y_plain, params["b1"], out=y_plain), add_bias),
        ("relu (block_forward)", f"({N}, {H})", lambda: relu(params, x3, blk, ws),
         lambda: nf.block_forward(params, x3, blk, ws)),
        *((f"{name} (Workspace.forward)", f"({B}, {T})", (lambda fn=fn: fn(ws, params, ids)[0]),
           lambda: ws.forward(params, ids)[0]) for name, fn in forward.items()),
        ("weight gradient", f"({d + 1}, {V})", lambda: np.matmul(ws.hf_ones.T, dlogits, out=dw),
         lambda: nf.weight_grad(ws.hf_ones, dlogits, dw, dw_t)),
        ("loss layout (loss_and_dlogits)", f"({N}, {V})", loss("layout plain"), loss("layout")),
        ("picked (loss_and_dlogits)", f"({N}, {V})", loss("picked plain", picked), loss("picked")),
        *((f"{name} (attention_forward)", f"({B}, {T}, {d})", (lambda fn=fn: fn(params, x3, blk, ws)),
           lambda: nf.attention_forward(params, x3, blk, ws)) for name, fn in attention.items()),
        ("token rows", f"({N}, {d})", token_rows_plain(N), lambda: nf.token_rows_sum(tok_ids, x, d_tok, ws)),
        ("token rows B 1", f"({T - 1}, {d})", token_rows_plain(T - 1),
         lambda: nf.token_rows_sum(tok_ids[:T - 1], x[:T - 1], d_tok, ws)),
        ("parameter check", f"{len(params)} tensors", lambda: nm.check_params(params, config),
         lambda: ws.check(params)),
        ("workspace made once", f"({B}, {T})", lambda: nf.loss_and_grads(params, ids, targets, config),
         lambda: ws.loss_and_grads(params, ids, targets)),
        *large_trick_cases(nf),
    ]


def large_trick_cases(nf):
    """The tricks whose gain shows at the large size: the loss in blocks and on two threads, and the weight
    gradient's orientation; each side of a loss has a workspace of its own (the gradient, written over the logits,
    is its next input)."""
    import numpy as np

    cfg = SIZES["large"]
    config = model_config(cfg)
    N, d, H, V = cfg["B"] * cfg["T"], config.d, config.hidden, config.vocab
    params, ids, targets = make_inputs(cfg, np.float32)  # ids, targets (B, T)
    whole = nf.Workspace(params, config, cfg["B"], cfg["T"])
    whole.forward(params, ids)  # (a second at this size: the others copy its logits)

    def workspace(threads=1):
        ws = nf.Workspace(params, config, cfg["B"], cfg["T"], threads=threads)
        ws.logits_memory[...] = whole.logits_memory  # (N, V)
        return ws

    blocks, one, two = workspace(), workspace(), workspace(threads=2)

    def loss(ws):
        return lambda: ws.loss_and_dlogits(ws.logits, targets)

    unblocked = mock.patch.object(nf, "LOSS_BLOCK_BYTES", 1 << 62)  # each call: the whole logits in one block

    dw1, dw1_t, dpre = np.empty((d, H), np.float32), np.empty((H, d), np.float32), whole.block[0].pre
    h2 = whole.block[0].h2.reshape(N, d)  # (N, d)
    return [("large: loss blocks (loss_and_dlogits)", f"({N}, {V})", unblocked(loss(whole)),
             loss(blocks)),
            ("large: loss threads (loss_and_dlogits)", f"({N}, {V})", loss(one), loss(two)),
            ("large: weight gradient", f"({d}, {H})", lambda: np.matmul(h2.T, dpre, out=dw1),
             lambda: nf.weight_grad(h2, dpre, dw1, dw1_t))]


def plain_variant(module, qualname, swaps):
    """The function qualname of module ("Class.method" for a method) with lines of its source swapped for plain
    ones, compiled in a copy of the module's globals, so that it calls the module's own code for everything else.
    swaps: [(anchors, new)], anchors one or two pieces of text, each on exactly one line of the function: those
    lines, and the lines between them, become new (its lines indented as the first). A trick that has changed so
    that an anchor is gone stops the benchmark with a LookupError, naming the function and the anchor.

    >>> me = sys.modules[__name__]
    >>> plain_variant(me, "flops_per_token", [(("return 6 *",), "return 0")])(SIZES["large"])
    0
    >>> plain_variant(me, "flops_per_token", [(("no such line",), "return 0")])
    Traceback (most recent call last):
    ...
    LookupError: dev.bench.flops_per_token has 0 lines with 'no such line', not one: make its trick's row again
    """
    import inspect
    import textwrap

    fn = module
    for part in qualname.split("."):
        fn = getattr(fn, part)
    lines = textwrap.dedent(inspect.getsource(fn)).split("\n")
    for anchors, new in swaps:
        found = []
        for anchor in anchors:
            at = [i for i, line in enumerate(lines) if anchor in line]
            if len(at) != 1:
                raise LookupError(f"{module.__name__}.{qualname} has {len(at)} lines with {anchor!r}, not one:"
                                  f" make its trick's row again")
            found += at
        first, last = found[0], found[-1]
        indent = lines[first][:len(lines[first]) - len(lines[first].lstrip())]
        lines[first:last + 1] = [indent + line for line in new.split("\n")]
    namespace = dict(vars(module))
    exec(compile("\n".join(lines), f"<{module.__name__}.{qualname}, plain>", "exec"), namespace)
    return namespace[fn.__name__]


def traced(fn, module):
    """(what one call of fn returns, {function: calls}, lines): the functions of module's file that the call runs
    (by qualified name) and how often, and how many of the file's lines it runs (on this thread).

    >>> traced(lambda: flops_per_token(SIZES["large"]), sys.modules[__name__])
    (4555008, {'flops_per_token': 1, 'model_config': 1}, 8)
    """
    source, calls, lines = module.__file__, {}, [0]

    def on_line(frame, event, arg):
        lines[0] += event == "line"
        return on_line

    def on_call(frame, event, arg):
        code = frame.f_code
        if code.co_filename != source:
            return None
        name = getattr(code, "co_qualname", code.co_name)  # (Python 3.10 has co_name only)
        calls[name] = calls.get(name, 0) + 1
        return on_line

    before = sys.gettrace()
    sys.settrace(on_call)
    try:
        result = fn()
    finally:
        sys.settrace(before)
    return result, calls, lines[0]


def time_tricks(rounds, nf=None, turn_seconds=0.02):
    """Rows {name, shape, plain_us, tuned_us, calls, lines, plain_calls}: the median over rounds of microseconds
    per call, plain and tuned taking turns, each turn about turn_seconds of calls; and what one call of each side
    runs of numpy_fast.py (nf: the module timed, numpy_fast itself by default), as `traced` reports it: the
    functions tuned calls and the lines it runs, and the functions plain calls. A change to a trick changes what
    its rows run."""
    if nf is None:
        from oneblock import numpy_fast as nf

    rows = []
    for name, shape, plain, tuned in trick_cases(nf):
        _, plain_calls, _ = traced(plain, nf)
        _, calls, lines = traced(tuned, nf)
        k = {fn: max(1, round(turn_seconds / max(timed(fn), 1e-7))) for fn in (plain, tuned)}
        times = {plain: [], tuned: []}
        for _ in range(rounds):
            for fn in (plain, tuned):
                times[fn].append(timed(fn, k[fn]) * 1e6)
        rows.append({"name": name, "shape": shape, "plain_us": statistics.median(times[plain]),
                     "tuned_us": statistics.median(times[tuned]), "calls": calls, "lines": lines,
                     "plain_calls": plain_calls})
    return rows


# ----------------------------------------------------------------------------------------------------------------
# Where a tuned step's time goes: every line of numpy_fast.py timed by a line tracer


def profile_step(size):
    """{"step_ms", "traced_ms", "functions": [{name, calls, us}], "lines": [{name, line, code, us}]}: the untraced
    median time of a float32 step of numpy_fast.py at size, the traced one, and per step the microseconds spent in
    each function and on each line of numpy_fast.py (a line's NumPy calls, and the functions outside the file it
    calls, count as the line's; the tracer's own cost, which docs/developers.md gives, is in every figure)."""
    import collections
    import linecache

    from oneblock import numpy_fast

    step = make_step("fast-f32", SIZES[size])  # a Workspace made once, on as many threads as BLAS has
    threads = machine.blas_threads()
    step()
    steps = max(3, round(1.0 / timed(step)))  # about a second of steps
    untraced = statistics.median(timed(step) for _ in range(steps))
    source, spent, calls = numpy_fast.__file__, collections.Counter(), collections.Counter()
    now = {"key": None, "t": 0.0}  # the line running since time t

    def charge():
        t = time.perf_counter()
        if now["key"]:
            spent[now["key"]] += t - now["t"]
        return t

    def on_line(frame, event, arg):
        charge()
        if event == "line":
            now["key"] = (frame.f_code.co_name, frame.f_lineno)
        elif event == "return":  # back to the caller's line, if it is in numpy_fast.py
            back = frame.f_back
            now["key"] = (back.f_code.co_name, back.f_lineno) if back and back.f_code.co_filename == source else None
        now["t"] = time.perf_counter()
        return on_line

    def on_call(frame, event, arg):
        if frame.f_code.co_filename != source:
            return None  # its time goes to the line of numpy_fast.py that called it
        calls[frame.f_code.co_name] += 1
        return on_line(frame, event, arg)

    sys.settrace(on_call)
    traced = timed(step, steps)
    sys.settrace(None)
    functions = collections.Counter()
    for (name, _), seconds in spent.items():
        functions[name] += seconds
    return {"step_ms": untraced * 1e3, "traced_ms": traced * 1e3, "steps": steps, "threads": threads,
            "functions": [{"name": name, "calls": calls[name] / steps, "us": seconds / steps * 1e6}
                          for name, seconds in functions.most_common()],
            "lines": [{"name": name, "line": line, "code": linecache.getline(source, line).strip(),
                       "us": seconds / steps * 1e6} for (name, line), seconds in spent.most_common()]}


def report_profile(args, sizes):
    """Profile a float32 step of numpy_fast.py at each size in a torch-free worker; print per function and the
    slowest lines."""
    for size in sizes:
        proc, prof = start("profile", size, args.threads)
        proc.wait()
        cfg = SIZES[size]
        total = sum(f["us"] for f in prof["functions"])
        print(f"numpy_fast.py float32 at {size} (B {cfg['B']}, T {cfg['T']}), {prof['threads']} BLAS thread(s):"
              f" {prof['step_ms']:.3f} ms a step untraced, {prof['traced_ms']:.3f} traced (medians of"
              f" {prof['steps']} steps)")
        print(f"  {'function':24s} {'calls':>6s} {'us/step':>9s} {'share':>6s}")
        for f in prof["functions"]:
            print(f"  {f['name']:24s} {f['calls']:6.0f} {f['us']:9.1f} {100 * f['us'] / total:5.1f}%")
        print(f"  the {args.profile_lines} slowest lines (a NumPy call or a few each):")
        for line in prof["lines"][:args.profile_lines]:
            print(f"  {line['us']:9.1f} us {100 * line['us'] / total:5.1f}%  {line['name']}:{line['line']}  "
                  f"{line['code'][:70]}")
        print()
    return 0


# ----------------------------------------------------------------------------------------------------------------
# Parent side: start the workers, interleave their rounds, report


def reply(proc):
    """The next line a worker prints, as JSON; if it stopped instead, exit naming it (its error is printed above)."""
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"error: the bench.py worker {' '.join(proc.args[-3:])} stopped with exit status"
                         f" {proc.wait()} before answering; its error is printed above")
    return json.loads(line)


def start(backend, size, threads=None, code=None):
    """A worker process for backend at size (with that many BLAS and OpenMP threads, when given), after its
    warm-up; and its first reply. code: the folder of another checkout whose bench.py (and model files) the worker
    runs, started as python3 -m dev.bench in a checkout of this layout, as python3 bench.py in one from before it
    (when the benchmark lay at the root); None for this one."""
    env = dict(os.environ)
    if threads:
        env.update({var: str(threads) for var in machine.THREAD_VARIABLES})
    command = [sys.executable, "-m", "dev.bench"]
    if code and not os.path.isfile(os.path.join(code, "dev", "bench.py")):
        command = [sys.executable, os.path.join(os.path.abspath(code), "bench.py")]
    proc = subprocess.Popen([*command, "--worker", backend, "--size", size], cwd=code or ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    return proc, reply(proc)


def say(line):
    """A line of progress on stderr (the tables go to stdout): the workers started, the rounds done and left."""
    print(line, file=sys.stderr, flush=True)


def bench_size(size, backends, args):
    """Rows {size, backend, code, ms, tokens_per_s, rounds} for one size, backends interleaved round by round; code
    is "before" for a backend of the code in args.against, "" for this code's."""
    cfg = SIZES[size]
    grown = cfg.get("blocks", 1) * cfg.get("heads", 1) > 1
    workers, k, times, first = {}, {}, {}, {}
    started = time.perf_counter()
    for b in CEILING + backends:
        if b == "reference" and (size == "large" or args.reference_rounds == 0 or grown):
            continue
        compared = args.against and not grown and b not in ("reference", *CEILING) and not b.startswith("compile")
        for code in ("", "before") if compared else ("",):
            say(f"    {size}: starting {b}{' before' if code else ''}"
                + (" (torch.compile compiles its first step first)" if b.startswith("compile") else ""))
            proc, hello = start(b, size, args.threads, args.against if code else None)
            workers[b, code] = proc
            k[b, code] = 1 if b == "reference" else max(1, round(args.round_seconds / hello["estimate"]))
            times[b, code], first[b, code] = [], hello.get("first")
    order = list(workers)
    rounds_started = time.perf_counter()
    for r in range(args.rounds):
        for key in order[r % len(order):] + order[:r % len(order)]:  # rotate who goes first
            if key[0] == "reference" and r >= args.reference_rounds:
                continue
            time.sleep(args.pause)
            workers[key].stdin.write(f"run {k[key]}\n")  # its reply: the seconds per step
            workers[key].stdin.flush()
            times[key].append(reply(workers[key])["per_step"])
        left = (time.perf_counter() - rounds_started) / (r + 1) * (args.rounds - r - 1)
        say(f"    {size}: round {r + 1} of {args.rounds} ({time.perf_counter() - started:.0f} s so far, about"
            f" {left:.0f} s left for this size)")
    for proc in workers.values():  # (a worker, of this code or of older code, stops at the end of its stdin)
        proc.stdin.close()
        proc.wait()
    rows = []
    for b, code in order:
        per_step = statistics.median(times[b, code])
        rows.append({"size": size, "backend": b, "code": code, "ms": per_step * 1e3, "rounds": len(times[b, code])})
        if b in CEILING:
            rows[-1]["gflops"] = 2 * CEILING_N**3 / per_step / 1e9
            continue
        tokens = cfg["T"] if b == "reference" else cfg["B"] * cfg["T"]
        rows[-1].update({"tokens_per_s": tokens / per_step, "gflops": tokens / per_step * flops_per_token(cfg) / 1e9,
                         "steps_per_round": k[b, code], "first_step_s": first[b, code]})
    return rows


def ceilings(rows):
    """{size: {"f32": GFLOP/s, "f64": GFLOP/s}}: the ceiling at each size, the median over the rounds of its turns.

    >>> ceilings([{"size": "large", "backend": "matmul-f32", "gflops": 190.0}])
    {'large': {'f32': 190.0}}
    """
    found = {}
    for r in rows:
        if r["backend"] in CEILING:
            found.setdefault(r["size"], {})[r["backend"][-3:]] = r["gflops"]
    return found


def report(rows, ceiling):
    """Print the table: one line per (size, backend), medians over rounds, with ratios: against PyTorch eager in the
    same dtype ("vs eager"; for compile-f32, compiled against eager) and against torch.compile (float32 only); a
    backend of the code compared against (--against) in the line after this code's, and this code's speed as a
    share of it. Then the time each torch.compile took."""
    for size, rates in ceiling.items():
        print(f"{size:11s} NumPy {CEILING_N} x {CEILING_N} matmul ceiling, taking turns with the backends:"
              f" {rates['f32']:.0f} GFLOP/s float32, {rates['f64']:.0f} float64")
    rows = [r for r in rows if r["backend"] not in CEILING]
    by = {(r["size"], r["backend"]): r for r in rows if not r["code"]}
    before = {(r["size"], r["backend"]): r for r in rows if r["code"]}
    print(f"{'size':11s} {'backend':17s} {'ms/step':>10s} {'tokens/s':>12s} {'GFLOP/s':>8s} {'%ceil':>6s} "
          f"{'vs eager':>9s} {'vs compile':>10s} {'vs ref':>8s}" + (f" {'vs before':>10s}" if before else "")
          + "  rounds x steps")

    def vs(r, peer, digits=2):  # r's speed as a multiple of peer's, or "" where there is no peer
        return f"{r['tokens_per_s'] / peer['tokens_per_s']:.{digits}f}x" if peer else ""

    for r in rows:
        dt = r["backend"][-3:] if r["backend"] != "reference" else None
        ceil = f"{100 * r['gflops'] / ceiling[r['size']][dt]:5.1f}%" if dt in ceiling[r["size"]] else ""
        numpy = r["backend"].startswith(("plain", "fast"))
        vs_torch = vs(r, (numpy or r["backend"].startswith("compile")) and by.get((r["size"], "torch-" + dt)))
        vs_compile = vs(r, numpy and by.get((r["size"], "compile-" + dt)))
        vs_ref = vs(r, r["backend"] != "reference" and by.get((r["size"], "reference")), 0)
        vs_old = vs(r, not r["code"] and before.get((r["size"], r["backend"])))
        name = f"{r['backend']} {r['code']}".strip()
        print(f"{r['size']:11s} {name:17s} {r['ms']:10.3f} {r['tokens_per_s']:12,.0f} {r['gflops']:8.2f} "
              f"{ceil:>6s} {vs_torch:>9s} {vs_compile:>10s} {vs_ref:>8s}" + (f" {vs_old:>10s}" if before else "")
              + f"  {r['rounds']} x {r['steps_per_round']}")
    compiled = [r for r in rows if r["backend"].startswith("compile")]
    if compiled:
        print("\ntorch.compile: the first step, which compiles (not counted in the step times above): "
              + ", ".join(f"{r['size']} {r['first_step_s']:.1f} s" for r in compiled))


def report_tricks(args):
    """Time the tricks in a torch-free worker and print one line each: microseconds per call, plain and tuned; the
    rows."""
    proc, rows = start("tricks", str(args.rounds), args.threads)
    proc.wait()
    print(f"numpy_fast.py's tricks against the plain lines they replace (in brackets: the function of numpy_fast.py"
          f" both run, the plain one with the plain line), float32, median of {args.rounds} rounds,"
          f" {args.threads or 'default'} BLAS thread(s)")
    width = max(23, *(len(r["name"]) for r in rows))
    print(f"{'trick':{width}s} {'shape':16s} {'plain us':>10s} {'tuned us':>10s} {'gain':>7s}")
    for r in rows:
        print(f"{r['name']:{width}s} {r['shape']:16s} {r['plain_us']:10.1f} {r['tuned_us']:10.1f} "
              f"{r['plain_us'] / r['tuned_us']:6.2f}x")
    return rows


TARGETS = [  # (size, what is measured, its peer or "ceiling", at least, what it is)
    ("series-b32", "fast-f32", "torch-f32", 1.5, "series B=32 f32: NumPy fast / PyTorch eager >= 1.5x"),
    ("series-b1", "fast-f32", "torch-f32", 3.0, "series B=1 f32: NumPy fast / PyTorch eager >= 3x"),
    ("large", "fast-f32", "torch-f32", 1.5, "large f32: NumPy fast / PyTorch eager >= 1.5x"),
    ("large", "fast-f32", "ceiling", 0.5, "large f32: NumPy fast >= 50% of the f32 matmul ceiling"),
    ("series-b32", "fast-f32", "ceiling", 0.3, "series B=32 f32: NumPy fast >= 30% of the f32 matmul ceiling"),
    ("series-b32", "fast-f32", "reference", 500, "series B=32 f32: NumPy fast >= 500x the reference"),
]


def targets(rows, ceiling):
    """The project's speed targets, each {target, value, want, met}: value and met are None where this run did not
    measure what the target needs (a size or a backend left out), and why is then in "missing".

    >>> rows = [{"size": "large", "backend": "fast-f32", "code": "", "tokens_per_s": 2e4}]
    >>> [(round(c["value"], 3), c["met"]) for c in targets(rows, {"large": {"f32": 200.0}}) if c["value"] is not None]
    [(0.456, False)]
    """
    by = {(r["size"], r["backend"]): r["tokens_per_s"] for r in rows if not r["code"] and r["backend"] not in CEILING}
    checks = []
    for size, a, b, want, what in TARGETS:
        missing = [name for name in (a, b) if name != "ceiling" and (size, name) not in by]
        if missing:
            checks.append({"target": what, "value": None, "want": want, "met": None,
                           "missing": f"no {' and no '.join(missing)} at {size} in this run"})
            continue
        if b == "ceiling":
            value = by[size, a] * flops_per_token(SIZES[size]) / 1e9 / ceiling[size][a[-3:]]
        else:
            value = by[size, a] / by[size, b]
        checks.append({"target": what, "value": value, "want": want, "met": value >= want})
    return checks


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--sizes", default="series-b1,series-b32,large",
                        help=f"comma-separated, from {', '.join(SIZES)} (default: the three the targets name)")
    parser.add_argument("--rounds", type=positive(int), default=9, help="rounds per size (median over them)")
    parser.add_argument("--reference-rounds", type=int, default=3, help="rounds for the slow reference (0: skip it)")
    parser.add_argument("--round-seconds", type=float, default=0.25, help="timed seconds per backend per round")
    parser.add_argument("--pause", type=float, default=0.2, help="seconds between two workers' turns")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch backends")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip torch.compile of the PyTorch twin (it compiles the twin again at each size)")
    parser.add_argument("--json", metavar="PATH", help="also write the table and targets as JSON")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="BLAS and OpenMP threads of every worker (default: the libraries' own choice)")
    parser.add_argument("--against", metavar="DIR",
                        help="also time each backend of the code in DIR (another checkout of this repository, such as"
                             " the code before a change, made with git worktree or git archive) in the same rounds,"
                             " and report this code's speed as a share of it; sizes of one block and one head only")
    parser.add_argument("--tricks", action="store_true",
                        help="time each trick of numpy_fast.py against the plain line it replaces, instead of steps")
    parser.add_argument("--profile", action="store_true",
                        help="where a float32 step of numpy_fast.py spends its time at each of --sizes, per function"
                             " and per line, instead of timing the backends")
    parser.add_argument("--profile-lines", type=int, default=25, metavar="N", help="lines --profile lists")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--size", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.size)
        return 0
    machine.need("numpy", "python3 -m dev.bench")  # every worker but the reference's, and the ceiling
    sizes = args.sizes.split(",")
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; choose from {list(SIZES)}")
    if args.reference_rounds < 0:
        parser.error("--reference-rounds must be at least 0")
    if args.against and not any(os.path.isfile(os.path.join(args.against, *path)) for path in (("dev", "bench.py"),
                                                                                                ("bench.py",))):
        parser.error(f"--against {args.against}: expected a folder holding another checkout (its dev/bench.py, or"
                     f" the bench.py at the root of a checkout from before the lab had folders)")
    ours = figures_judge({"info", "rows"}, {"command", "tricks"})  # the figures of steps, or of tricks
    problem = args.json and output_problem(args.json, "--json", "a JSON of dev.bench's figures", ours, "bench.json")
    if problem:  # judged before minutes of timing, never after them
        parser.error(problem)
    if args.profile:
        return report_profile(args, sizes)
    command = " ".join(["python3", "-m", "dev.bench", *(argv or sys.argv[1:])])
    figures = {"command": command, "tricks": report_tricks(args)} if args.tricks else report_steps(args, sizes, command)
    if args.json:
        with folder_for(resolved(args.json)):  # (output_problem let a missing folder through: made here)
            write_atomic(resolved(args.json), json.dumps(figures, indent=2))
        print(f"\nwrote {args.json}")
    return 0


def report_steps(args, sizes, command):
    """Time the backends' steps at each size, print the table and the targets, and return the figures for --json."""
    import numpy

    backends = BACKENDS
    torch_here = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0
    if args.no_torch or not torch_here:  # (checked in a throwaway process: this one stays torch-free)
        print("PyTorch: not compared (" + ("--no-torch" if args.no_torch else "torch is not installed") + ")")
        backends = [b for b in BACKENDS if not b.startswith(("torch", "compile"))]
    elif args.no_compile:
        backends = [b for b in BACKENDS if not b.startswith("compile")]

    rows = []
    for size in sizes:
        cfg = SIZES[size]
        print(f"... {size}: V {cfg['V']}, d {cfg['d']}, H {cfg['H']}, L {cfg['L']}, B {cfg['B']}, T {cfg['T']}",
              flush=True)
        rows += bench_size(size, backends, args)
    print()
    ceiling = ceilings(rows)
    report(rows, ceiling)
    ref = [r for r in rows if r["size"] == "series-b1" and r["backend"] == "reference"]
    if ref:
        print(f"\nreference model.py, series size, T = 63: forward + loss + backward {ref[0]['ms']:.1f} ms "
              f"(median of {ref[0]['rounds']})")
    checks = targets(rows, ceiling)
    print(f"\ntargets (medians over {args.rounds} rounds of this run):")  # MET, NOT MET or not measured, each
    for c in checks:
        if c["value"] is None:
            print(f"  not measured  {c['target']}: {c['missing']}")
            continue
        value = f"{100 * c['value']:.0f}%" if c["want"] < 1 else f"{c['value']:.2f}x"
        print(f"  {'MET          ' if c['met'] else 'NOT MET      '} {c['target']}: {value}")
    info = {"python": platform.python_version(), "numpy": numpy.__version__, "machine": platform.machine(),
            "cpus": os.cpu_count(), "command": command}
    return {"info": info, "ceiling_gflops": ceiling, "rows": rows, "targets": checks}


if __name__ == "__main__":
    sys.exit(main())
