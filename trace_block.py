"""The recorded trace of what the model does: shapes, the starting loss, layer norm, word order, the gradient check.

    python3 trace_block.py            print the trace as JSON
    python3 trace_block.py --write    rewrite block-trace.json (atomically)
    python3 trace_block.py --check    exit 1 with a one-line reason when block-trace.json is missing or out of date
    python3 trace_block.py --verbose  also print the gradient check tensor by tensor, largest error first, and exit 1
                                      when a gradient disagrees with its central difference (NOT OK)

A trace whose gradient check fails is never written: it would record a wrong backward pass as the truth.

Standard library only. Every number comes from exact-rounded sums, so the trace is byte-identical on every Python.
"""

import argparse
import json
import math
import sys
from pathlib import Path

import model
from atomic import write_atomic
from bpe import Tokenizer, first_difference

HERE = Path(__file__).resolve().parent
TRACE_FILE = HERE / "block-trace.json"
SERIES = {"d": 16, "hidden": 64, "max_len": 64, "seed": 3}  # the model the series uses
TINY = {"d": 4, "hidden": 8, "max_len": 8, "seed": 3}  # a small copy, for checking every gradient numerically
ORDER_A = "now mia gives the hat to leo."  # the same tokens as ORDER_B, the two names swapped
ORDER_B = "now leo gives the hat to mia."
STEP = 1e-6  # central-difference step of the gradient check
PLACES = 7  # the gradient check's largest error is recorded rounded to 7 places: it must round to 0.0 (below 5e-8)


# ----------------------------------------------------------------------------------------------------------------
# The pieces of the trace


def build(tok, cfg):
    """Fresh parameters for the tokenizer's vocabulary and a config like SERIES.

    >>> model.count_params(build(Tokenizer.load(HERE / "tokenizer.json"), TINY))
    1060
    """
    return model.init_params(vocab=len(tok.vocab), **cfg)


def gradient_errors(params, x, y):
    """Largest |central difference - backward| for each tensor, over every one of its numbers.

    >>> p = build(Tokenizer.load(HERE / "tokenizer.json"), TINY)
    >>> errors = gradient_errors(p, [1, 2, 3], [2, 3, 4])
    >>> list(errors) == list(p), max(errors.values()) < 1e-7
    (True, True)
    """
    logits, cache = model.forward(params, x)
    _, dlogits = model.loss_and_dlogits(logits, y)
    grads = model.backward(params, cache, dlogits)
    errors = {}
    for name, tensor in params.items():
        rows = tensor if isinstance(tensor[0], list) else [tensor]  # a vector is checked as one row
        grad_rows = grads[name] if isinstance(tensor[0], list) else [grads[name]]
        worst = 0.0
        for row, grad_row in zip(rows, grad_rows):
            for j, saved in enumerate(row):
                row[j] = saved + STEP
                up = model.sequence_loss(params, x, y)
                row[j] = saved - STEP
                down = model.sequence_loss(params, x, y)
                row[j] = saved
                worst = max(worst, abs((up - down) / (2 * STEP) - grad_row[j]))
        errors[name] = worst
    return errors


def position_gaps(params, tok, use_positions):
    """The largest logit difference between ORDER_A and ORDER_B at each position, rounded to 4 places."""
    a, b = (model.forward(params, tok.encode(text), use_positions)[0] for text in (ORDER_A, ORDER_B))  # (T, V) each
    return [round(max(abs(x - y) for x, y in zip(ra, rb)), 4) for ra, rb in zip(a, b)]


def last_logits_gap(params, tok, use_positions):
    """The largest logit difference between ORDER_A and ORDER_B at the last position, not rounded."""
    a, b = (model.forward(params, tok.encode(text), use_positions)[0][-1] for text in (ORDER_A, ORDER_B))  # (V,)
    return max(abs(x - y) for x, y in zip(a, b))


# ----------------------------------------------------------------------------------------------------------------
# The whole trace


def trace(verbose=False):
    """Everything block-trace.json records, as a dict. verbose prints the gradient check by tensor to stderr."""
    tok = Tokenizer.load(HERE / "tokenizer.json")
    with open(HERE / "corpus.txt", encoding="utf-8") as f:
        story = f.readline()
    ids = tok.encode(story)
    x, y = ids[:-1], ids[1:]  # predict each next token of the story

    params = build(tok, SERIES)
    logits, cache = model.forward(params, x)
    loss, _ = model.loss_and_dlogits(logits, y)
    row0 = cache["h1"][0]  # the first row after the first layer norm
    row0_mean = math.fsum(row0) / len(row0)

    tiny = build(tok, TINY)
    n = TINY["max_len"]
    errors = gradient_errors(tiny, ids[:n], ids[1 : n + 1])
    if verbose:
        print(f"gradient check, {model.count_params(tiny)} parameters, step {STEP}:", file=sys.stderr)
        for name, err in sorted(errors.items(), key=lambda kv: -kv[1]):
            print(f"  {name:8s} {str(model.shape(tiny[name])):10s} max |numeric - backward| = {err:.3e}"
                  f"{'  NOT OK' if round(err, PLACES) else ''}", file=sys.stderr)
        back = list(reversed(list(errors)))  # the tensors in the order the backward pass meets them, loss first
        wrong = [name for name in back if round(errors[name], PLACES)]
        if wrong:
            right = back[:back.index(wrong[0])]
            print(f"NOT OK: {len(wrong)} of {len(errors)} tensors' gradients disagree with their central differences"
                  f" (by 5e-8 or more). Going back from the loss, {', '.join(right) or 'no tensor'} come out right"
                  f" and {wrong[0]} is the first wrong: the mistake is in the backward pass between them, where"
                  f" {wrong[0]}'s layer gets its gradient", file=sys.stderr)

    return {
        "story": story,
        "story_tokens": tok.tokens(story),
        "series_config": SERIES,
        "vocab_size": len(tok.vocab),
        "parameter_count": model.count_params(params),
        "parameters_by_tensor": {name: {"shape": list(model.shape(t)), "count": model.count_params({name: t})}
                                 for name, t in params.items()},
        "shapes": {
            "x0": list(model.shape(cache["x0"])),
            "attention_weights": list(model.shape(cache["att"]["weights"])),
            "mlp_hidden": list(model.shape(cache["act"])),
            "logits": list(model.shape(logits)),
        },
        "initial_loss": loss,
        "uniform_loss": math.log(len(tok.vocab)),
        "layernorm_row0": {"mean": row0_mean, "variance": math.fsum((v - row0_mean) ** 2 for v in row0) / len(row0)},
        "order_test": {
            "a": ORDER_A,
            "b": ORDER_B,
            "tokens_a": tok.tokens(ORDER_A),
            "tokens_b": tok.tokens(ORDER_B),
            "last_logit_gap_without_positions": last_logits_gap(params, tok, use_positions=False),
            "last_logit_gap_with_positions": last_logits_gap(params, tok, use_positions=True),
            "gaps_by_position_without_positions": position_gaps(params, tok, use_positions=False),
            "gaps_by_position_with_positions": position_gaps(params, tok, use_positions=True),
        },
        "gradient_check": {
            "config": TINY,
            "parameters_checked": model.count_params(tiny),
            "step": STEP,
            "max_error_rounded": round(max(errors.values()), PLACES),
        },
    }


# ----------------------------------------------------------------------------------------------------------------
# Writing and checking the record


def to_json(value, indent=0):
    """JSON with one key per line, except that a list of plain values, or a short dict, stays on one line.

    >>> print(to_json({"a": [1, 2], "b": {"c": "x"}, "d": {"e": {"f": 1}}}))
    {
      "a": [1, 2],
      "b": {"c": "x"},
      "d": {
        "e": {"f": 1}
      }
    }
    """
    pad = "  " * (indent + 1)
    flat = json.dumps(value)
    if isinstance(value, dict) and not any(isinstance(v, dict) for v in value.values()) and len(flat) <= 80:
        return flat
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {to_json(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(pad + to_json(v, indent + 1) for v in value) + "\n" + "  " * indent + "]"
    return flat


def check(text):
    """None when block-trace.json holds exactly text, else a one-line reason."""
    if not TRACE_FILE.exists():
        return f"{TRACE_FILE.name} is missing; run python3 trace_block.py --write"
    recorded = TRACE_FILE.read_text(encoding="utf-8")
    if recorded == text:
        return None
    try:
        diff = first_difference(json.loads(recorded), json.loads(text))
    except ValueError:
        return f"{TRACE_FILE.name} is not valid JSON (truncated or edited?); run python3 trace_block.py --write"
    if not diff:
        return f"{TRACE_FILE.name} is out of date (its formatting differs); run python3 trace_block.py --write"
    return (f"{TRACE_FILE.name} does not match this model.py (recorded: {diff} now):"
            f" unless you changed the model on purpose, the model is wrong; python3 trace_block.py --verbose shows"
            f" which gradients disagree with finite differences, and python3 -m oneblock.workbook check model.py"
            f" (in the lab's folder) places the first wrong number. A change made on purpose is recorded with"
            f" python3 trace_block.py --write")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Trace the one-block transformer and record or check the trace.",
                                     allow_abbrev=False)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="rewrite block-trace.json with the current trace")
    group.add_argument("--check", action="store_true", help="exit 1 if block-trace.json is missing or out of date")
    parser.add_argument("--verbose", action="store_true", help="print the gradient check tensor by tensor")
    args = parser.parse_args(argv)

    try:
        text = to_json(trace(verbose=args.verbose)) + "\n"
    except (OSError, ValueError) as e:  # a missing or broken corpus.txt or tokenizer.json
        print(f"cannot make the trace: {e}", file=sys.stderr)
        return 1
    failed = json.loads(text)["gradient_check"]["max_error_rounded"]
    if args.write and failed:
        print(f"not written: the gradient check fails (largest error {failed}, rounded to {PLACES} places; it must"
              f" be 0.0), so the backward pass is wrong; python3 trace_block.py --verbose shows where", file=sys.stderr)
        return 1
    if args.write:
        write_atomic(TRACE_FILE, text)
        print(f"wrote {TRACE_FILE.name}")
    elif args.check:
        reason = check(text)
        if reason:
            print(reason, file=sys.stderr)
            return 1
        print(f"{TRACE_FILE.name} is up to date")
    else:
        sys.stdout.write(text)
    return 1 if args.verbose and failed else 0


if __name__ == "__main__":
    sys.exit(main())
