"""dev/bench.py --tricks times numpy_fast.py's own code: each row's tuned side runs the function of numpy_fast.py
that the row names, its plain side does the same work without the trick (the same numbers, to float32 rounding),
and an edit to a trick in a copy of numpy_fast.py shows in what the benchmark runs of that copy. Nothing here is
timed: what a row runs is counted by the benchmark's line tracer, the same on every machine."""

import importlib.util
import inspect
import re
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from dev import bench  # noqa: E402
from oneblock import numpy_fast  # noqa: E402

OWN = {  # the rows of the tricks that are functions (or methods) of their own: the function each times
    "column sums": "column_sums", "weight gradient": "weight_grad", "large: weight gradient": "weight_grad",
    "token rows": "token_rows_sum", "token rows B 1": "token_rows_sum", "parameter check": "Workspace.check",
    "workspace made once": "Workspace.loss_and_grads",
}
SWITCHED = {  # rows whose plain side runs the same function, with the trick switched off by a constant or argument
    "loss layout (loss_and_dlogits)", "large: loss blocks (loss_and_dlogits)",
    "large: loss threads (loss_and_dlogits)",
}
TIMED_WHERE_USED = {"joined": {"layernorm_forward", "add_bias"}}  # a trick timed in the functions that use it


@pytest.fixture(scope="module")
def rows():
    """The benchmark's rows for numpy_fast.py itself, one turn of one call each (the figures are not read)."""
    return bench.time_tricks(1, numpy_fast, turn_seconds=0.0)


def named_function(row_name):
    """The function of numpy_fast.py a row says it times: in brackets at the end of its name, or its own."""
    found = re.search(r"\(([\w.]+)\)$", row_name)
    return found.group(1) if found else OWN[row_name]


def ran(calls, name):
    """Whether the function name (qualified, or a method's own name) is among calls {qualified name: calls}."""
    return any(q == name or q.endswith("." + name) for q in calls)


def trick_functions():
    """The qualified names of numpy_fast.py's functions and methods whose source holds a `trick:` marker."""
    found = set()
    for name, obj in vars(numpy_fast).items():
        if getattr(obj, "__module__", None) != numpy_fast.__name__:
            continue
        members = [(name, obj)] if inspect.isfunction(obj) else [
            (f"{name}.{m}", f) for m, f in vars(obj).items() if inspect.isfunction(f)] if inspect.isclass(obj) else []
        found |= {qualname for qualname, fn in members if "trick:" in inspect.getsource(fn)}
    return found


# ----------------------------------------------------------------------------------------------------------------
# What each row runs


def test_every_row_runs_the_numpy_fast_function_it_names_and_its_plain_side_does_not(rows):
    assert len(rows) >= 23 and len({r["name"] for r in rows}) == len(rows)
    for r in rows:
        function = named_function(r["name"])
        assert ran(r["calls"], function) and r["lines"] > 0, (r["name"], r["calls"])
        # the plain side: a plain line, or the function compiled anew with it, outside numpy_fast.py's file; only
        # where the trick is switched off by a constant or argument does it run the same function
        assert ran(r["plain_calls"], function) == (r["name"] in SWITCHED), (r["name"], r["plain_calls"])


def test_every_function_with_a_trick_has_a_row_and_every_row_numpy_fast_cites_exists(rows):
    timed = {named_function(r["name"]) for r in rows}
    for qualname in trick_functions():
        where = TIMED_WHERE_USED.get(qualname, {qualname})
        assert any(ran(where, t) for t in timed), qualname
    text = re.sub(r"\n\s*(#\s*)?", " ", Path(numpy_fast.__file__).read_text(encoding="utf-8"))
    cited = re.findall(r"--tricks: ([^)]*)\)", text)
    assert len(cited) >= 15
    names = {r["name"].split(" (")[0] for r in rows}
    assert [c for c in cited if c not in names] == []


def snapshot(value):
    """A copy of what a side returned (arrays, in tuples too), before the other side writes the same arrays."""
    if isinstance(value, tuple):
        return tuple(snapshot(v) for v in value)
    if isinstance(value, dict):
        return {name: snapshot(v) for name, v in value.items()}
    return value.copy() if isinstance(value, np.ndarray) else value


def assert_same(plain, tuned, name):
    """The same numbers to float32 rounding: within 1e-4 of the larger of 1 and the largest magnitude."""
    assert type(plain) is type(tuned), name
    if isinstance(plain, tuple):
        for a, b in zip(plain, tuned, strict=True):
            assert_same(a, b, name)
    elif isinstance(plain, dict):
        assert plain.keys() == tuned.keys(), name
        for key in plain:
            assert_same(plain[key], tuned[key], f"{name}: {key}")
    elif isinstance(plain, np.ndarray):
        assert plain.shape == tuned.shape, name
        scale = max(1.0, float(np.abs(tuned).max()))
        assert float(np.abs(plain.astype(np.float64) - tuned).max()) <= 1e-4 * scale, name
    elif isinstance(plain, float):
        assert abs(plain - tuned) <= 1e-4 * max(1.0, abs(tuned)), name
    else:
        assert plain == tuned, name


def test_both_sides_of_every_row_compute_the_same_numbers():
    for name, _, plain, tuned in bench.trick_cases():
        assert_same(snapshot(plain()), snapshot(tuned()), name)


# ----------------------------------------------------------------------------------------------------------------
# An edited trick, in a copy of numpy_fast.py


def load_copy(path, source):
    """source written to path and imported as a module of its own (it imports the lab as numpy_fast.py does)."""
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_edit_to_a_trick_in_a_copy_of_numpy_fast_shows_in_every_row_that_runs_it(rows, tmp_path):
    source = Path(numpy_fast.__file__).read_text(encoding="utf-8")
    trick = "    return np.matmul(ones, x, out=out)\n"  # column_sums: one product with a vector of ones
    assert source.count(trick) == 1
    edited = load_copy(tmp_path / "numpy_fast_edited.py", source.replace(
        trick, "    np.matmul(ones, x, out=out)\n    return np.add(out, 0.0, out=out)  # an extra pass\n"))
    seen = bench.time_tricks(1, edited, turn_seconds=0.0)
    assert [r["name"] for r in seen] == [r["name"] for r in rows]
    changed = 0
    for before, after in zip(rows, seen):
        assert after["calls"] == before["calls"], before["name"]
        # one line more for each call of column_sums: every row runs the copy's code, none the original's
        assert after["lines"] == before["lines"] + before["calls"].get("column_sums", 0), before["name"]
        changed += after["lines"] != before["lines"]
    assert next(r for r in seen if r["name"] == "column sums")["lines"] == 2
    assert changed >= 5  # column sums, the rows of block_forward, attention_forward, Workspace.forward, ...


def test_a_trick_whose_line_has_gone_stops_its_row_with_the_function_named(tmp_path):
    source = Path(numpy_fast.__file__).read_text(encoding="utf-8")
    line = "np.maximum(pre, ws.zeros_NH"  # the relu trick's line in block_forward
    assert source.count(line) == 1
    edited = load_copy(tmp_path / "numpy_fast_relu.py", source.replace(line, "np.fmax(pre, ws.zeros_NH"))
    with pytest.raises(LookupError, match=r"numpy_fast_relu\.block_forward has 0 lines with 'np\.maximum\(pre, ws"):
        bench.trick_cases(edited)
