"""Build it yourself (oneblock/workbook.py, grade.py, mistakes.py): the grader passes the lab's model.py at every
step, names each catalogue mistake at its step, says "not written yet" for a blank, and names in one line a file
that does not compile, a step that raises, returns the wrong shape or never returns; the workbook keeps every
signature and docstring and, filled in from the lab, passes; find-the-bug plants a mistake and judges a guess.
In-process where the subject is a function; the command line once each, as a learner runs it."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from oneblock import grade, mistakes, workbook
from oneblock.mistakes import MISTAKES

LAB = mistakes.LAB_MODEL.read_text(encoding="utf-8")
DB = "    db = column_sums(dy)  # (n,)"  # a line of layernorm_backward


def written(tmp_path, text, name="model.py"):
    """text written to tmp_path/name, as a learner's file; its path as a string."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def functions(text):
    """{name: the ast node} of the top-level functions of text."""
    return {node.name: node for node in ast.parse(text).body if isinstance(node, ast.FunctionDef)}


def command(capsys, *args):
    """python3 -m oneblock.workbook args, its main() in this process (tests/test_readme.py runs the pages' commands
    as a learner does): (its exit status, argparse's refusals included, stdout, stderr)."""
    try:
        status = workbook.main(list(map(str, args)))
    except SystemExit as e:
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


# ----------------------------------------------------------------------------------------------------------------
# The grader


def test_the_catalogue_holds_the_mistakes_the_build_is_known_for():
    assert {"variance_n_minus_1", "eps_outside_sqrt", "layernorm_backward_no_mean_terms", "dg_without_xhat",
            "no_scale_forward", "no_scale_backward", "mask_reads_later", "softmax_backward_no_mean",
            "skip_gradient_forgotten", "relu_gradient_everywhere", "positions_shifted", "loss_grad_not_divided",
            "weight_transposed"} <= set(MISTAKES)
    for key, entry in MISTAKES.items():
        assert entry["step"] in grade.STEPS and entry["explain"] and entry["breaks"], key


@pytest.mark.parametrize("key", sorted(MISTAKES))
def test_each_catalogue_mistake_is_named_at_its_step_and_only_there(key, tmp_path):
    """The planted file fails at the mistake's step, with the mistake named, the first wrong entry placed, and for
    a gradient step the finite difference of the (right) forward equal to the lab's value; every other step passes."""
    entry = MISTAKES[key]
    path = written(tmp_path, mistakes.planted(LAB, entry))
    for step in grade.STEPS:
        result = grade.grade_step(step, path)
        if step != entry["step"]:
            assert result["status"] == "pass", (key, step, result)
            continue
        assert result["status"] == "fail" and result["mistake"] == key, result
        assert result["tensor"] and result["where"].startswith("[") and result["got"] != result["want"]
        assert entry["explain"] in result["explain"] and entry["breaks"] in result["explain"]
        if step in grade.FORWARD_OF and result["tensor"] != "loss":
            assert result["fd"] == pytest.approx(result["want"], rel=1e-6, abs=1e-8), result


def test_a_planted_line_that_is_not_in_its_function_exactly_once_is_refused():
    with pytest.raises(ValueError, match=r"the line 'scale = 1.0' is in attention_forward 0 times; expected once"):
        mistakes.planted(LAB, mistakes.mistake("attention_forward", [("    scale = 1.0", "    scale = 2.0")], "", ""))


def test_a_mistake_outside_the_catalogue_is_still_placed(tmp_path):
    text = LAB.replace(DB, "    db = [2.0 * v for v in column_sums(dy)]  # (n,)")
    result = grade.grade_step("layernorm_backward", written(tmp_path, text))
    assert result["status"] == "fail" and result["mistake"] is None
    assert (result["tensor"], result["where"]) == ("db", "[0]") and result["got"] == 2.0 * result["want"]
    assert "no mistake of the catalogue gives these numbers" in result["explain"]


@pytest.mark.parametrize("change, said", [
    (("    return dx, dg, db", "    return dx, dg"), "layernorm_backward: it returned a tuple of 2, without"),
    (("        dx.append([(ui - mean_u - xi * mean_ux) / s for ui, xi in zip(u, xh)])  # (n,)",
      "        dx.append([(ui - mean_u - xi * mean_ux) / s for ui, xi in zip(u, xh)][1:])  # (n,)"),
     "dx[0] has the shape (3,); the lab's (4,)"),
    ((DB, "    db = column_sums(dy)[0] / 0  # (n,)"),
     f"layernorm_backward raised ZeroDivisionError: float division by zero (line {LAB.split(chr(10)).index(DB) + 1}"
     f" of"),
])
def test_a_step_that_returns_the_wrong_kind_or_raises_is_named_in_one_line(change, said, tmp_path):
    result = grade.grade_step("layernorm_backward", written(tmp_path, LAB.replace(*change)))
    assert result["status"] == "fail" and said in result["explain"] and "\n" not in result["explain"], result


def test_a_step_process_given_no_step_of_the_build_is_its_usage_in_one_line(capsys):
    for argv in (["--help"], ["no-such-step", "model.py"]):
        assert grade.main(argv) == 2
        said = capsys.readouterr().err
        assert said.startswith("usage: python3 -m oneblock.grade STEP FILE, STEP one of ") and said.count("\n") == 1


def test_a_file_that_does_not_compile_is_one_line_at_every_step(tmp_path):
    path = written(tmp_path, LAB.replace("def forward(params, ids, use_positions=True):", "def forward(params, ids"))
    result = grade.grade_step("layernorm_forward", path)
    assert result["status"] == "fail" and result["explain"].startswith(f"{path} does not compile: ")


def test_a_file_that_prints_as_it_loads_leaves_the_grades_json_alone(tmp_path, capsys):
    path = written(tmp_path, 'print("loading")\n' + mistakes.planted(LAB, MISTAKES["dg_without_xhat"]))
    forward, wrong = grade.grade_step("forward", path), grade.grade_step("layernorm_backward", path)
    assert forward["status"] == "pass" and len(forward["probes"]) == 2 and wrong["fd"] is not None
    assert capsys.readouterr().out == ""  # (forward's probes and the finite difference load the file again)


def test_a_step_that_never_returns_is_stopped_and_the_others_are_graded(tmp_path, monkeypatch):
    monkeypatch.setattr(grade, "LIMIT", 3)
    text = LAB.replace("    T, vocab = len(logits), len(logits[0]) if logits else 0",
                       "    while True:\n        pass")
    grades = grade.grade(written(tmp_path, text))
    assert [g["status"] for g in grades] == ["pass"] * 5 + ["fail", "pass"]
    assert grades[5]["explain"] == "loss_and_dlogits did not return within 3 s (a loop that never ends?)"


def test_the_probes_find_a_mask_that_reads_later_and_an_order_read_without_positions(tmp_path):
    leaky = grade.learner_module(written(tmp_path, mistakes.planted(LAB, MISTAKES["mask_reads_later"])))
    assert grade.probes(leaky)[0].startswith("causality: changing the token at position 3 moved the logits of"
                                             " position(s) 2, before it")
    ordered = LAB.replace("    x0 = [list(params[\"tok_emb\"][i]) for i in ids]  # (T, d)",
                          "    x0 = [[v * (1 + t) for v in params[\"tok_emb\"][i]] for t, i in enumerate(ids)]")
    assert grade.probes(grade.learner_module(written(tmp_path, ordered, "ordered.py")))[1].startswith(
        "order: without positions, two orders of the same tokens give other last logits")
    assert grade.probes(grade.learner_module(str(mistakes.LAB_MODEL))) == [
        "causality: changing the token at position 3 left every earlier position's logits as they were",
        "order: without positions, two orders of the same tokens give the same last logits"]


# ----------------------------------------------------------------------------------------------------------------
# The workbook


@pytest.mark.parametrize("start", grade.STEPS)
def test_the_workbook_blanks_the_steps_from_its_start_keeping_signatures_and_docstrings(start, tmp_path):
    text = workbook.workbook(start)
    mine, lab = functions(text), functions(LAB)
    assert list(mine) == list(lab)  # every function, in order
    path = written(tmp_path, text)
    for number, step in enumerate(grade.STEPS):
        assert ast.dump(mine[step].args) == ast.dump(lab[step].args)
        assert ast.get_docstring(mine[step]) == ast.get_docstring(lab[step])
        want = "todo" if number >= grade.STEPS.index(start) else "pass"
        assert grade.grade_step(step, path)["status"] == want, step


def test_a_workbook_filled_in_from_the_lab_passes_every_step():
    """It is the lab's model.py again, which passes every step (its check exits 0: the learner's path below)."""
    text, lab_lines, lab = workbook.workbook(), LAB.split("\n"), functions(LAB)
    for step in reversed(grade.STEPS):  # (last first: the line numbers of the earlier ones hold)
        node, lines = functions(text)[step], text.split("\n")
        filled = lab_lines[lab[step].lineno - 1:lab[step].end_lineno]
        text = "\n".join(lines[:node.lineno - 1] + filled + lines[node.end_lineno:])
    assert text == LAB


def test_the_build_is_standard_library_only():
    for module in (grade, mistakes, workbook):
        for node in ast.walk(ast.parse(Path(module.__file__).read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert name.split(".")[0] in sys.stdlib_module_names or name in (
                    "model", "atomic", "oneblock.grade", "oneblock.mistakes"), (module.__name__, name)


# ----------------------------------------------------------------------------------------------------------------
# The command line


def test_the_learners_path_write_check_then_a_planted_bug_and_a_guess(tmp_path, capsys):
    mine = tmp_path / "mine"
    status, out, _ = command(capsys, "write", mine, "--from", "backward")
    assert status == 0 and out.startswith(f"wrote {mine / 'model.py'}: fill in its blank functions")
    status, _, err = command(capsys, "write", mine)
    assert status == 2 and err == (f"error: {mine / 'model.py'} exists: your work is never written over (choose"
                                   f" another folder, or move that file away)\n")
    status, out, _ = command(capsys, "check", mine / "model.py")
    assert status == 1 and out.splitlines()[-1].startswith("6 of 7 steps pass; next: backward")
    graded = json.loads(command(capsys, "check", mine / "model.py", "--json")[1])
    assert [g["step"] for g in graded["steps"]] == grade.STEPS
    assert {"step", "status", "tensor", "where", "got", "want", "mistake", "explain"} <= set(graded["steps"][0])
    assert [g["status"] for g in graded["steps"]] == ["pass"] * 6 + ["todo"]
    assert command(capsys, "check", mistakes.LAB_MODEL)[0] == 0

    hunt = tmp_path / "hunt"
    assert command(capsys, "bug", hunt, "--seed", "4")[0] == 0
    _, key = workbook.bug_file(4)
    tests = subprocess.run([sys.executable, "-m", "unittest", "test_model.py"], cwd=hunt, capture_output=True,
                           text=True, timeout=300)
    assert tests.returncode == 1  # (the lab's own checks, run beside the planted file, find something wrong)
    status, _, err = command(capsys, "check", hunt / "model.py")
    assert status == 2 and "is a find-the-bug file: the grader would name its mistake" in err
    wrong = next(step for step in grade.STEPS if step != MISTAKES[key]["step"])
    status, out, _ = command(capsys, "guess", hunt / "model.py", wrong)
    assert status == 1 and out.startswith(f"not that one: the mistake is in {MISTAKES[key]['step']} ({key})")
    status, out, _ = command(capsys, "guess", hunt / "model.py", MISTAKES[key]["step"])
    assert status == 0 and out.startswith(f"right: the mistake is in {MISTAKES[key]['step']}")
