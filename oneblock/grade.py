"""The grader: a learner's model.py, step by step in build order, against the lab's model.py on the lab's inputs.

Each step is one function of the build, held to the lab's within TOL; what the grader tells of a wrong one:
docs/build.md, "The grader".

A step runs in a process of its own (grade_step, through `python3 -m oneblock.grade STEP FILE`), so that a function
that never returns is stopped after LIMIT seconds and a learner's crash is a line, never the grader's traceback.

    >>> result = grade_step("layernorm_forward", lab.__file__)
    >>> result["status"]
    'pass'
"""

import contextlib
import copy
import importlib.util
import io
import json
import random
import subprocess
import sys
import traceback
from math import fsum
from pathlib import Path

import model as lab  # the lab's model.py, the answer
from oneblock.mistakes import MISTAKES, mistaken_model

ROOT = Path(__file__).resolve().parent.parent  # where each step's process runs: python3 -m oneblock.grade
STEPS = ["layernorm_forward", "layernorm_backward", "attention_forward", "attention_backward", "forward",
         "loss_and_dlogits", "backward"]  # the build order
TOL = 1e-9  # an entry is right within TOL * max(1, |lab's value|): other orders of the same sums pass
LIMIT = 20  # seconds a step may take, its process's start included (the lab's own steps take milliseconds)
H = 1e-6  # the step of the central differences
SIZES = {"vocab": 11, "d": 4, "hidden": 6, "max_len": 8}  # the lab's inputs: small enough to read, T < max_len
IDS = [3, 1, 4, 1, 5, 9]  # (T,) a token that comes twice: its embedding row collects both positions
TARGETS = [1, 4, 1, 5, 9, 2]  # (T,)
FAILED = {"status": "fail", "tensor": None, "where": None, "got": None, "want": None, "mistake": None,
          "explain": None, "fd": None}  # a grade's fields before anything is known


# ----------------------------------------------------------------------------------------------------------------
# The lab's inputs


def spread(rows, cols, rng):
    """A (rows, cols) matrix of gauss(0, 0.5): numbers of every size and sign, so that no mistake hides.

    >>> [len(row) for row in spread(2, 3, random.Random(0))]
    [3, 3]
    """
    return [[rng.gauss(0.0, 0.5) for _ in range(cols)] for _ in range(rows)]


def lab_params():
    """The lab's parameters at SIZES: matrices of gauss(0, 0.5), gains near 1, biases near 0 (model.py's fresh
    weights are too small for attention to be far from uniform, where several mistakes would barely show)."""
    rng = random.Random(7)
    params = {}
    for name, dims in lab.param_shapes(*SIZES.values()).items():
        if len(dims) == 2:
            params[name] = spread(*dims, rng)  # (dims)
        else:
            params[name] = [(1.0 if name.endswith("_g") else 0.0) + rng.gauss(0.0, 0.2) for _ in range(dims[0])]
    return params


def lab_case():
    """{name: value} of everything the steps read: the parameters, the lab's forward cache and logits, the upstream
    gradients handed to the backward steps."""
    rng, params = random.Random(11), lab_params()
    logits, cache = lab.forward(params, IDS)  # (T, V)
    _, dlogits = lab.loss_and_dlogits(logits, TARGETS)  # (T, V)
    T, d = len(IDS), SIZES["d"]
    return {"params": params, "cache": cache, "logits": logits, "dlogits": dlogits,
            "dy": spread(T, d, rng), "dout": spread(T, d, rng)}  # (T, d) each


def arguments(step, case):
    """The arguments of step on the lab's inputs, as a list (a fresh copy: a step may change what it is given)."""
    p, c = case["params"], case["cache"]
    args = {"layernorm_forward": [c["x1"], p["ln2_g"], p["ln2_b"]],
            "layernorm_backward": [case["dy"], p["ln2_g"], c["ln2"]],
            "attention_forward": [p, c["h1"]],
            "attention_backward": [p, c["att"], case["dout"]],
            "forward": [p, IDS],
            "loss_and_dlogits": [case["logits"], TARGETS],
            "backward": [p, c, case["dlogits"]]}[step]
    return copy.deepcopy(args)


def outputs(step, result):
    """[(tensor's name, value), ...] of what step returned, in the order the lab computes it; a ValueError says
    what is missing from the result (a cache entry the later steps read, a gradient)."""
    try:
        if step == "layernorm_forward":
            out, cache = result
            return [("out", out), ("cache['xhat']", cache["xhat"]), ("cache['std']", cache["std"])]
        if step == "layernorm_backward":
            return list(zip(["dx", "dg", "db"], result, strict=True))
        if step == "attention_forward":
            out, cache = result
            return [*((f"cache[{n!r}]", cache[n]) for n in ("q", "k", "v", "weights", "ctx")), ("out", out)]
        if step == "attention_backward":
            grads, dx = result
            return [*((f"grads[{n!r}]", grads[n]) for n in ("Wo", "Wv", "Wq", "Wk")), ("dx", dx)]
        if step == "forward":
            logits, cache = result
            names = ("x0", "h1", "weights", "x1", "h2", "pre", "act", "x2", "hf")  # in forward's order
            return [*(("cache['att']['weights']", cache["att"]["weights"]) if n == "weights" else
                      (f"cache[{n!r}]", cache[n]) for n in names), ("logits", logits)]
        if step == "loss_and_dlogits":
            loss, dlogits = result
            return [("loss", loss), ("dlogits", dlogits)]
        return [(f"grads[{n!r}]", result[n]) for n in ("b_out", "W_out", "lnf_g", "lnf_b", "b2", "W2", "b1", "W1",
                                                        "ln2_g", "ln2_b", "Wo", "Wv", "Wq", "Wk", "ln1_g", "ln1_b",
                                                        "tok_emb", "pos_emb")]  # last layer first
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"it returned {kind_of(result)}, without {e}: the docstring and the return line in its"
                         f" comments say what it returns") from None


def kind_of(value):
    """A few words for a value of the wrong kind.

    >>> kind_of((1.0, {}))
    'a tuple of 2'
    """
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


# ----------------------------------------------------------------------------------------------------------------
# Comparing


def first_wrong(got, want, where=""):
    """(where, got, want, why) of the first entry of got that is not want within TOL (row by row), or None.

    >>> first_wrong([[1.0, 2.0]], [[1.0, 2.5]])
    ('[0][1]', 2.0, 2.5, 'value')
    >>> first_wrong([1.0], [1.0, 2.0])[3]
    'shape'
    """
    if isinstance(want, list):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return where, shape_of(got), shape_of(want), "shape"
        for i, (g, w) in enumerate(zip(got, want)):
            wrong = first_wrong(g, w, f"{where}[{i}]")
            if wrong:
                return wrong
        return None
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return where, repr(got)[:40], want, "kind"
    if not abs(got - want) <= TOL * max(1.0, abs(want)):
        return where, got, want, "value"
    return None


def shape_of(value):
    """The shape of a nested list, or a few words when it is not one.

    >>> shape_of([[1.0, 2.0]]), shape_of(None)
    ((1, 2), 'a NoneType')
    """
    if isinstance(value, (list, tuple)):
        return lab.shape(list(value)) if value else (0,)
    return kind_of(value)


def compare(got, want):
    """(tensor, where, got, want, why) of the first wrong entry of got's tensors against want's, or None."""
    for (name, g), (_, w) in zip(got, want):
        wrong = first_wrong(g, w)
        if wrong:
            return (name, *wrong)
    return None


# ----------------------------------------------------------------------------------------------------------------
# The learner's file, one step at a time


def learner_module(path):
    """The learner's file imported as a module of its own name (never the lab's `model`), a fresh one each time,
    what it prints as it loads kept off the grader's output."""
    spec = importlib.util.spec_from_file_location("learner_model", path)
    module = importlib.util.module_from_spec(spec)
    with contextlib.redirect_stdout(io.StringIO()):
        spec.loader.exec_module(module)
    return module


FORWARD_OF = {"layernorm_backward": "layernorm_forward", "attention_backward": "attention_forward",
              "backward": "forward", "loss_and_dlogits": "loss_and_dlogits"}  # a gradient step: whose gradient
UPSTREAM = {"layernorm_backward": "dy", "attention_backward": "dout", "backward": "dlogits"}  # the gradient it is given


def nudged(step, module, case, name, index, by):
    """The scalar whose gradient step's output name is, through the learner's own forward, with the input entry at
    index moved by `by`: sum(upstream gradient * output), or for the loss the loss itself."""
    forward = FORWARD_OF[step]
    args = arguments(forward, case)
    if step == "layernorm_backward":  # row: the argument of the forward whose gradient name is
        row = args[["dx", "dg", "db"].index(name)]
    elif step == "attention_backward" and name == "dx":
        row = args[1]
    elif step in ("attention_backward", "backward"):
        row = args[0][name.split("'")[1]]  # (grads['Wq'] -> the parameter Wq)
    else:
        row = args[0]  # (dlogits -> the logits)
    for i in index[:-1]:
        row = row[i]
    row[index[-1]] += by
    out = getattr(module, forward)(*args)[0]
    if step == "loss_and_dlogits":
        return out
    upstream = case[UPSTREAM[step]]  # (T, n)
    return fsum(u * o for u_row, o_row in zip(upstream, out) for u, o in zip(u_row, o_row))


def probes(module):
    """Lines that say what the causality probe and the order test find in the learner's whole model (module as
    written, every step its own): which earlier position moved when a later token changed, and whether, without
    positions, two orders of the same tokens give the same last logits. Empty when the model cannot run yet."""
    params, k = lab_params(), 3  # (the token at position k changes)
    changed = [*IDS[:k], (IDS[k] + 1) % SIZES["vocab"], *IDS[k + 1:]]
    swapped = [IDS[2], *IDS[1:2], IDS[0], *IDS[3:]]  # (the first and the third token trade places)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            a, b = module.forward(params, IDS)[0], module.forward(params, changed)[0]  # (T, V) each
            plain_a, plain_b = module.forward(params, IDS, False)[0], module.forward(params, swapped, False)[0]
    except Exception:  # noqa: BLE001  (a step not written yet, or failing: graded on its own)
        return []
    moved = [t for t in range(k) if a[t] != b[t]]
    lines = [f"causality: changing the token at position {k} moved the logits of position(s)"
             f" {', '.join(map(str, moved))}, before it: a position reads a later one" if moved else
             f"causality: changing the token at position {k} left every earlier position's logits as they were"]
    gap = first_wrong(plain_b[-1], plain_a[-1])
    lines.append("order: without positions, two orders of the same tokens give the same last logits" if gap is None
                 else f"order: without positions, two orders of the same tokens give other last logits (entry"
                      f" {gap[0]}: {gap[1]!r} and {gap[2]!r}): something other than the positions reads the order")
    return lines


def where_raised(error, path):
    """' (line N of FILE)' for the deepest frame of error's traceback in the learner's file, or ''."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == Path(path)]
    return f" (line {frames[-1].lineno} of {path})" if frames else ""


def grade_step(step, path):
    """The grade of one step of the learner's file at path, as a dict: step, status ("pass", "fail", "todo") and
    for a failure tensor, where, got, want, mistake (a catalogue key or None), explain (text), and fd (the finite
    difference of the learner's own forward at that entry, for a step that computes gradients, else None)."""
    result = {"step": step, **FAILED}
    try:
        module = learner_module(path)
    except SyntaxError as e:
        return {**result, "explain": f"{path} does not compile: {e.msg} (line {e.lineno})"}
    except Exception as e:  # noqa: BLE001  (whatever the learner's file raises as it loads is named, not raised)
        return {**result, "explain": f"{path} raised {type(e).__name__}: {e} as it loaded{where_raised(e, path)}"}
    if not callable(getattr(module, step, None)):
        return {**result, "explain": f"{path} has no function {step}"}
    case = lab_case()
    want = outputs(step, getattr(lab, step)(*arguments(step, case)))
    try:
        for other in STEPS:  # every other step the lab's own, so that step is graded alone
            if other != step:
                setattr(module, other, getattr(lab, other))
        with contextlib.redirect_stdout(io.StringIO()):
            got = getattr(module, step)(*arguments(step, case))
    except NotImplementedError:
        return {**result, "status": "todo", "explain": f"{step} is not written yet"}
    except Exception as e:  # noqa: BLE001
        return {**result, "explain": f"{step} raised {type(e).__name__}: {e}{where_raised(e, path)}"}
    try:
        got = outputs(step, got)
    except ValueError as e:
        return {**result, "explain": f"{step}: {e}"}
    if step == "forward":
        result["probes"] = probes(learner_module(path))
    wrong = compare(got, want)
    if wrong is None:
        return {**result, "status": "pass"}
    tensor, where, got_value, want_value, why = wrong
    result.update(tensor=tensor, where=where, got=got_value, want=want_value)
    if why != "value":
        said = {"shape": "has the shape", "kind": "is"}[why]
        return {**result, "explain": f"{tensor}{where} {said} {got_value}; the lab's {want_value}"}
    for key, entry in MISTAKES.items():
        if entry["step"] == step:
            mistaken = outputs(step, getattr(mistaken_model(entry), step)(*arguments(step, case)))
            if compare(got, mistaken) is None:
                result.update(mistake=key, explain=f"{entry['explain']} It breaks: \"{entry['breaks']}\".")
                break
    if step in FORWARD_OF and tensor != "loss":  # the central difference of the learner's own forward there
        try:
            index = [int(i) for i in where.strip("[]").split("][")]
            module = learner_module(path)
            with contextlib.redirect_stdout(io.StringIO()):
                result["fd"] = (nudged(step, module, case, tensor, index, H)
                                - nudged(step, module, case, tensor, index, -H)) / (2 * H)
        except Exception:  # noqa: BLE001  (a forward not written yet, or failing: no finite difference to show)
            result["fd"] = None
    if result["explain"] is None:
        result["explain"] = (f"{tensor}{where} is {got_value!r}; the lab's is {want_value!r}: no mistake of the"
                             f" catalogue gives these numbers")
    return result


# ----------------------------------------------------------------------------------------------------------------
# Every step, each in its own process


def grade(path):
    """The grade of every step of the learner's file, in build order (a list of grade_step's dicts)."""
    grades = []
    for step in STEPS:
        failed = {"step": step, **FAILED}
        try:
            run = subprocess.run([sys.executable, "-m", "oneblock.grade", step, str(path)], cwd=ROOT,
                                 capture_output=True, text=True, timeout=LIMIT)
        except subprocess.TimeoutExpired:
            grades.append({**failed, "explain": f"{step} did not return within {LIMIT} s (a loop that never ends?)"})
            continue
        if run.returncode != 0:
            last = (run.stderr.strip().splitlines() or ["no message"])[-1]
            grades.append({**failed, "explain": f"{step} stopped the grader's process: {last}"})
            continue
        grades.append(json.loads(run.stdout))
    return grades


def main(argv=None):
    """One step's grade as JSON on stdout: `python3 -m oneblock.grade STEP FILE` (grade's process for a step)."""
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2 or args[0] not in STEPS:
        print(f"usage: python3 -m oneblock.grade STEP FILE, STEP one of {', '.join(STEPS)}: one step's process of the"
              f" grader, which python3 -m oneblock.workbook check FILE runs for every step", file=sys.stderr)
        return 2
    step, path = args
    sys.setrecursionlimit(10_000)
    print(json.dumps(grade_step(step, path), allow_nan=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
