"""The lessons' first ten (oneblock/lessons.py), the path of every lesson, and their command line (python3 -m
experiments.lessons), each lesson driven with scripted input, each answer equal to what this test computes on its
own with model.py for the same weights (exactly, where the lab is exact). Standard library only, but for the scaling
lesson's and the trained answers' tests."""

import ast
import io
import json
import math
import random
import re
import sys

import pytest

import bpe
import model
from experiments import lessons as command
from oneblock import checkpoint, lessons
from oneblock.config import ModelConfig
from run_helpers import ROOT, run

TOK = bpe.Tokenizer.load(ROOT / "tokenizer.json")
SEED = model.init_params(96, 16, 64, 64, 3)  # the seed's series model, drawn here on its own
STORY = (ROOT / "corpus.txt").read_text(encoding="utf-8").splitlines(keepends=True)[0]
TRACE = json.loads((ROOT / "block-trace.json").read_text(encoding="utf-8"))
LAB = lessons.build_lab()
EVERY = lessons.LESSONS + lessons.numpy_lessons()[0]  # the path: the ten, then those NumPy and SciPy make possible
KEYS = ["tokens", "init-loss", "layernorm-variance", "order", "causality", "finite-difference", "pre-norm", "relu-mlp",
        "softmax-gradient", "skip-paths"]


def run_ask(lesson, *lines, lab=LAB):
    """ask() with these lines as the learner's input, then the end of input: (its record, everything it wrote, the
    prompts included, as one text)."""
    said, queue = [], list(lines)

    def read(prompt):
        said.append(prompt)
        if not queue:
            raise EOFError
        return queue.pop(0)

    record = lessons.ask(lesson, lab, read=read, write=said.append)
    return record, "\n".join(said)


def lessons_main(monkeypatch, capsys, *args, stdin=""):
    """experiments.lessons' main with args, its input the lines of stdin: (its status, stdout, stderr)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    status = command.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


# ----------------------------------------------------------------------------------------------------------------
# Each answer, computed here on its own


def expected_init_loss(params=SEED):
    ids = TOK.encode(STORY)
    return model.sequence_loss(params, ids[:-1], ids[1:])


def expected_layernorm_variance():
    """The mean variance of ln1's rows before the gain: x0 built here, normalised by model.layernorm_forward with
    gain 1 and bias 0 (the seed's own gain and bias), its variance as a plain two-pass sum."""
    ids = TOK.encode(STORY)[:-1]
    x0 = [[e + p for e, p in zip(SEED["tok_emb"][i], SEED["pos_emb"][t])] for t, i in enumerate(ids)]
    out, _ = model.layernorm_forward(x0, [1.0] * 16, [0.0] * 16)
    variances = []
    for row in out:
        mean = math.fsum(row) / len(row)
        variances.append(math.fsum((v - mean) ** 2 for v in row) / len(row))
    return math.fsum(variances) / len(variances)


def expected_fd_errors():
    params = model.init_params(96, 16, 64, 64, 3)
    ids = TOK.encode(STORY)[:9]
    x, y = ids[:-1], ids[1:]
    logits, cache = model.forward(params, x)
    grad = model.backward(params, cache, model.loss_and_dlogits(logits, y)[1])["W_out"][0][y[0]]
    errors = []
    for e in range(2, 11):
        h = 10.0 ** -e
        saved = params["W_out"][0][y[0]]
        params["W_out"][0][y[0]] = saved + h
        up = model.sequence_loss(params, x, y)
        params["W_out"][0][y[0]] = saved - h
        down = model.sequence_loss(params, x, y)
        params["W_out"][0][y[0]] = saved
        errors.append(abs((up - down) / (2 * h) - grad))
    return errors


def test_each_answer_is_what_model_py_computes_for_the_same_weights():
    answers = {lesson.key: lesson.answer(LAB) for lesson in lessons.LESSONS}
    assert LAB.params == SEED  # the answers leave the weights as they were
    for answer in answers.values():  # each answer in the shape ask reads
        assert set(answer) == {"value", "shown", "bounds"} and answer["shown"] and answer["bounds"]
    assert answers["tokens"]["value"] == len(TOK.encode(" garden")) == 4
    assert answers["init-loss"]["value"] == expected_init_loss() == TRACE["initial_loss"]  # the trace's own figure
    assert answers["layernorm-variance"]["value"] == expected_layernorm_variance()
    assert 0.9 < answers["layernorm-variance"]["value"] < 1.0  # just below 1: EPS
    shown = "\n".join(answers["layernorm-variance"]["shown"])
    tiny = float(re.search(r"times smaller, the output variance is (\S+)", shown).group(1))
    assert tiny < 1e-3  # with smaller embeddings, EPS rules: layer norm no longer normalises
    assert (lessons.ORDER_A, lessons.ORDER_B) == (TRACE["order_test"]["a"], TRACE["order_test"]["b"])
    a, b = TOK.encode(TRACE["order_test"]["a"]), TOK.encode(TRACE["order_test"]["b"])
    gaps = []
    for use in (False, True):  # the two sentences' last logits, without and with positions
        la, lb = model.forward(SEED, a, use)[0][-1], model.forward(SEED, b, use)[0][-1]
        gaps.append(max(abs(x - y) for x, y in zip(la, lb)))
    assert answers["order"]["value"] == tuple(gaps)
    assert answers["order"]["value"][0] == 0.0 and answers["order"]["value"][1] > 0.0  # exact: 0.0, and a gap
    ids = TOK.encode(STORY)[:12]
    changed = list(ids)
    changed[5] = (ids[5] + 1) % 96  # one token changed: only its position and those after it move
    before, after = model.forward(SEED, ids)[0], model.forward(SEED, changed)[0]
    assert [t for t in range(12) if before[t] != after[t]] == list(range(5, 12))
    assert answers["causality"]["value"] == "position k and after"
    errors = expected_fd_errors()
    least = errors.index(min(errors))
    assert 0 < least < len(errors) - 1 and errors[0] > 100 * min(errors) < errors[-1] / 100  # falls, then rises
    assert answers["finite-difference"]["value"] == "falls then rises"
    for h, err in zip(lessons.STEPS, errors):  # every error the lesson shows is the one computed here
        assert f"h = {h:.0e}: " in "\n".join(answers["finite-difference"]["shown"])
        assert f"error {err:.2e}" in "\n".join(answers["finite-difference"]["shown"])


def test_the_block_lessons_backward_steps_are_model_pys_backward():
    """The gradients the lessons on the block's parts follow, with the skip paths, are backward's own: the gradient
    at x0 is what pos_emb's rows get, and ReLU's is what b1's sums; without the skip paths it is another, smaller."""
    run = lessons.story_pass(LAB)
    params, x, y, cache, dlogits = run.params, run.x, run.y, run.cache, run.dlogits
    grads = model.backward(params, cache, dlogits)
    dx2 = lessons.stream_gradient(run)
    assert lessons.sublayers_backward(params, cache, dx2, skips=True) == grads["pos_emb"][:len(x)]
    assert model.column_sums(lessons.relu_gradient(params, cache, dx2)) == grads["b1"]
    without = lessons.sublayers_backward(params, cache, dx2, skips=False)
    assert 0 < lessons.size(without) < lessons.size(grads["pos_emb"]) / 10
    softmax = lessons.SOFTMAX_GRADIENT.answer(LAB)
    assert softmax["value"] == len(y) * dlogits[0][y[0]] and -1 < softmax["value"] < -0.98  # about 1/96 - 1
    central = float(softmax["shown"][-1].rsplit(" ", 1)[1])
    assert abs(central - softmax["value"]) < 1e-6  # the loss's own slope, to the digits shown
    share = lessons.RELU_MLP.answer(LAB)["value"]
    assert share[0] == share[1] and 0.4 < share[0] < 0.6
    assert 1.0 < lessons.PRE_NORM.answer(LAB)["value"] < 1.01  # layer norm takes the scale away, but for EPS


# ----------------------------------------------------------------------------------------------------------------
# Each lesson driven with scripted input: a bad guess asked again, a right one, a wrong one (the ten and the scaling
# lesson; the lessons that train are driven in test_lessons_trained.py)

RIGHT = {"tokens": "4", "init-loss": "4.56", "layernorm-variance": "0.95 1", "order": "0 0.001",
         "causality": "2", "finite-difference": "falls then rises", "pre-norm": "1", "relu-mlp": "0.5 0.5",
         "softmax-gradient": "-0.99", "skip-paths": "0.02", "scaling": "0.43"}
WRONG = {"tokens": "10", "init-loss": "1", "layernorm-variance": "0.2 0.3", "order": "0.5 0.5",
         "causality": "all positions", "finite-difference": "1", "pre-norm": "10", "relu-mlp": "0.5 0",
         "softmax-gradient": "0.99", "skip-paths": "1",
         "scaling": "0.4912"}  # the floor itself: the truth is not what the usual fit finds
BAD = {"tokens": "many", "init-loss": "", "layernorm-variance": "1 0.5", "order": "0",
       "causality": "5", "finite-difference": "sideways", "pre-norm": "ten", "relu-mlp": "0.5",
       "softmax-gradient": "-", "skip-paths": "1/36", "scaling": "lots"}


@pytest.mark.parametrize("key", KEYS + ["scaling"])
def test_a_bad_guess_is_named_and_asked_again_then_the_right_one_is_right_and_a_wrong_one_off(key):
    if key == "scaling":
        pytest.importorskip("numpy", reason="the scaling lesson needs NumPy")
        pytest.importorskip("scipy", reason="the scaling lesson fits with SciPy")
    lesson = lessons.by_key(key, EVERY)
    record, said = run_ask(lesson, BAD[key], RIGHT[key])
    assert record["verdict"] == "right", said
    assert said.count("your guess (") == 2, said  # asked again after the bad one
    with pytest.raises(ValueError) as bad:
        lessons.parse_guess(lesson.guess, BAD[key])
    assert repr(BAD[key]) in str(bad.value) and f"not a guess: {bad.value}. Try again." in said  # named
    said_words = lessons.words(lesson, LAB)
    assert said_words["question"] in said and said_words["explain"] in said and f"source: {lesson.source}" in said
    assert record["value"] == lesson.answer(LAB)["value"]
    assert said.index("your guess (") < said.index("the answer: ")  # the guess first, then the answer
    record, said = run_ask(lesson, WRONG[key])
    assert record["verdict"] == "off" and "verdict: off" in said, said


def test_q_and_the_end_of_input_stop_the_lesson_before_the_answer():
    for lines in (("q",), ("Q",), (), ("many", "q")):
        record, said = run_ask(lessons.TOKENS, *lines)
        assert record is None and "the answer: " not in said


def test_a_choice_is_taken_by_its_words_in_any_case_and_other_words_are_named():
    """(By its number: parse_guess's doctest, and RIGHT's causality guess above.)"""
    assert lessons.parse_guess(lessons.CAUSALITY.guess, " Position K and after ") == "position k and after"
    with pytest.raises(ValueError, match="'k' is not one of the choices; expected 1 to 4"):
        lessons.parse_guess(lessons.CAUSALITY.guess, "k")


# ----------------------------------------------------------------------------------------------------------------
# The lessons as a path: the ten, the lessons that train and the scaling lesson, where NumPy and SciPy are installed

AFTER_THE_TEN = ["floor", "positions-past-length", "second-block", "scaling"]
IMPORT = lessons.importlib.import_module  # (the real one, for the fakes below)


def without(monkeypatch, module, name):
    """Make importing module a ModuleNotFoundError of name: the module itself, or a package it imports."""
    def fake(asked):
        if asked == module:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return IMPORT(asked)

    monkeypatch.setattr(lessons.importlib, "import_module", fake)


def test_every_lesson_of_the_path_in_order_each_well_formed():
    more, why = lessons.numpy_lessons()
    assert [lesson.key for lesson in EVERY] == KEYS + AFTER_THE_TEN[:len(more)] and len(more) in (0, 3, 4)
    assert (why is None) == (len(more) == 4)
    for lesson in EVERY:
        assert isinstance(lesson, lessons.Lesson)
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", lesson.key) and "\n" not in lesson.title
        assert lesson.guess[0] in ("number", "range", "pair", "choice")
        assert all(len(line) <= 120 for line in (lesson.question + "\n" + lesson.explain).splitlines()), lesson.key
        if lesson not in lessons.LESSONS:  # (NumPy) each says what it costs, and that a busy machine takes longer
            assert all(says in flat(lesson.explain) for says in ("2-vCPU machine", "longer on a busy one")), lesson.key


def test_every_source_names_a_file_and_functions_that_are_there():
    for lesson in EVERY:
        for part in lesson.source.split("; "):
            file, names = part.split(": ", 1)
            tree = ast.parse((ROOT / file).read_text(encoding="utf-8"))
            defined = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
            for name in re.sub(r"\([^)]*\)", "", names).split(","):
                assert name.strip().split(".")[-1] in defined, (lesson.key, file, name)


def test_a_missing_module_or_package_leaves_its_lessons_out_saying_why_and_a_broken_one_raises(monkeypatch):
    for name, says in (("experiments.lessons_trained", "lessons_trained.py is not there"),
                       ("numpy", "NumPy is not installed")):
        without(monkeypatch, "experiments.lessons_trained", name)
        assert lessons.numpy_lessons()[0] == [] and says in lessons.numpy_lessons()[1]
    without(monkeypatch, "experiments.lessons_trained", "scipy")  # not what may be missing: a bug
    with pytest.raises(ModuleNotFoundError):
        lessons.numpy_lessons()
    pytest.importorskip("numpy", reason="the scaling lesson comes after the lessons that train, which need NumPy")
    for name, why in (("scipy", "SciPy is not installed"),
                      ("experiments.lessons_scaling", "experiments/lessons_scaling.py is not there")):
        without(monkeypatch, "experiments.lessons_scaling", name)
        more, said = lessons.numpy_lessons()
        assert [lesson.key for lesson in more] == AFTER_THE_TEN[:3]
        assert said == f"the scaling lesson is left out: {why}"
    without(monkeypatch, "experiments.lessons_scaling", "matplotlib")  # not what may be missing: a bug
    with pytest.raises(ModuleNotFoundError):
        lessons.numpy_lessons()


def test_a_lesson_asked_for_without_numpy_is_refused_naming_the_package(monkeypatch, capsys):
    """Before: "no lesson 'floor'", as if there were none of that name."""
    without(monkeypatch, "experiments.lessons_trained", "numpy")
    assert command.main(["--lesson", "floor"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no lesson 'floor'; expected one of: tokens,") and err.count("\n") == 1, err
    assert "(the lessons that train are left out: NumPy is not installed" in err


# ----------------------------------------------------------------------------------------------------------------
# Checkpoints: a trained one's weights, and one model.py cannot run


def write_checkpoint(path, config, seed):
    """A checkpoint of config with freshly drawn weights (seed), in float64, zero moments."""
    params = config.init_params(seed)
    tensors = {name: ("F64", model.shape(t), checkpoint.flat(t)) for name, t in params.items()}
    zeros = {name: ("F64", shape, [0.0] * len(values)) for name, (_, shape, values) in tensors.items()}
    checkpoint.save_checkpoint(path, tensors, (zeros, zeros), step=1, rng=random.Random(0), config=config,
                               training={"steps": 10, "lr": 0.01},
                               tokenizer_sha256=checkpoint.sha256_file(ROOT / "tokenizer.json"))
    return params


def test_a_checkpoints_weights_are_the_ones_the_answers_read(tmp_path, monkeypatch, capsys):
    params = write_checkpoint(tmp_path / "other.safetensors", ModelConfig(96, 16, 64, 64), seed=7)
    lab = lessons.build_lab(tmp_path / "other.safetensors")
    assert lab.params == params and lab.ckpt_path == str(tmp_path / "other.safetensors")
    assert lessons.INIT_LOSS.answer(lab)["value"] == expected_init_loss(params) != expected_init_loss()
    assert lessons.ORDER.answer(lab)["value"][0] == 0.0
    status, out, err = lessons_main(monkeypatch, capsys, "--ckpt", str(tmp_path / "other.safetensors"), "--lesson",
                                    "init-loss", "--guess", "4.5")  # and the command line's --ckpt
    assert status == 0, err
    assert f"loss {expected_init_loss(params):.6f} over" in out and "other.safetensors" in out


def test_a_checkpoint_model_py_cannot_run_skips_the_lessons_saying_why(tmp_path):
    write_checkpoint(tmp_path / "two.safetensors", ModelConfig(96, 8, 32, 16, blocks=2), seed=3)
    lab = lessons.build_lab(tmp_path / "two.safetensors")
    record, said = run_ask(lessons.ORDER, "0 1", lab=lab)
    assert "2 blocks x 1 head" in record["skipped"] and "model.py" in record["skipped"] and "skipped: " in said
    assert run_ask(lessons.TOKENS, "4", lab=lab)[0]["verdict"] == "right"  # the tokenizer's lesson still runs


# ----------------------------------------------------------------------------------------------------------------
# The command line, with scripted input: its main() in this process, typed to through stdin; one subprocess run, of
# the refusals, as a learner's terminal sees them


def test_the_whole_path_with_right_guesses_and_q_or_the_end_of_input_stopping_it(monkeypatch, capsys):
    status, out, err = lessons_main(monkeypatch, capsys, stdin="\n".join(RIGHT[key] for key in KEYS) + "\n")
    assert status == 0 and err == "", err
    assert out.count("verdict: right") == 10
    for n, key in enumerate(KEYS, 1):
        assert f"lesson {n} of " in out and f": {key} ==" in out
    for stdin in ("4\nq\n", "4\n4.5\n"):  # (q and the end of input at the first lesson: ask's test above)
        status, out, err = lessons_main(monkeypatch, capsys, stdin=stdin)
        assert status == 0 and err == "" and "stopped" in out, (stdin, err)
        assert out.count("verdict") == stdin.count("\n") - stdin.endswith("q\n"), (stdin, out)


def test_one_lesson_by_its_key_with_a_guess_given_or_typed_and_the_list(monkeypatch, capsys):
    status, out, _ = lessons_main(monkeypatch, capsys, "--lesson", "causality", stdin="2\n")
    assert status == 0 and "lesson 1 of 1: causality" in out and "verdict: right" in out
    status, out, _ = lessons_main(monkeypatch, capsys, "--lesson", "order", "--guess", "0 0.001")
    assert status == 0 and "verdict: right" in out and "stopped" not in out
    assert "\n".join(lessons.answer_lines(lessons.ORDER.answer(LAB))) in out  # every figure, as the lesson's
    status, out, _ = lessons_main(monkeypatch, capsys, "--list")
    listed = out.splitlines()
    assert status == 0 and len(listed) >= len(EVERY)
    for n, lesson in enumerate(EVERY, 1):
        assert listed[n - 1].startswith(f"{n:2d}. {lesson.key} ") and lesson.title in listed[n - 1], listed
        assert listed[n - 1].endswith(" (NumPy)") == (lesson not in lessons.LESSONS), listed  # the ones after the ten


@pytest.mark.parametrize("args, says", [
    (["--lesson", "tokens", "--guess", "many"], "'many' is not a number"),
    (["--guess", "4"], "--guess goes with --lesson KEY"),
    (["--ckpt", "out/no-such.safetensors"], "no checkpoint at out/no-such.safetensors"),
])
def test_a_bad_argument_is_refused_in_one_line_with_status_2(monkeypatch, capsys, args, says):
    status, out, err = lessons_main(monkeypatch, capsys, *args)
    assert status == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and says in err, err


def test_bad_arguments_are_refused_in_one_line_with_status_2():
    """The same, as a learner's terminal sees it: python3 -m experiments.lessons in a process of its own."""
    done = run("-m experiments.lessons", "--lesson", "nope", cwd=ROOT, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: no lesson 'nope'; expected one of: tokens,") and done.stderr.count("\n") == 1


# ----------------------------------------------------------------------------------------------------------------
# docs/lessons.md: each question, its answer folded, the explanation and the source, as the lessons compute them


def page_sections():
    """{key: the text of its section} of docs/lessons.md."""
    text = (ROOT / "docs" / "lessons.md").read_text(encoding="utf-8")
    parts = re.split(r"^## \d+\. .*\(`([a-z-]+)`\)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def flat(text):
    return " ".join(text.split())


def section_of(lesson, lab, lines):
    """The folded answer's text of lesson's section of docs/lessons.md, the section checked: its question and command
    in the open, its answer's first line (of lines) not; its explanation and a link to each file its source names in
    the fold."""
    before, folded = page_sections()[lesson.key].split("<details><summary>Answer</summary>", 1)
    said = lessons.words(lesson, lab)
    assert flat(said["question"]) in flat(before), lesson.key
    assert f"`python3 -m experiments.lessons --lesson {lesson.key}`" in flat(before), lesson.key
    assert lines[0] not in before  # folded: the answer is not in the open
    assert flat(said["explain"]) in flat(folded) and "</details>" in folded, lesson.key
    for file in re.findall(r"([\w/]+\.py): ", lesson.source):
        assert f"[{file}](../{file})" in folded, (lesson.key, file)
    return folded


def test_the_page_folds_each_answer_as_the_lessons_compute_it():
    for lesson in lessons.LESSONS:
        lines = lessons.answer_lines(lesson.answer(LAB))
        folded = section_of(lesson, LAB, lines)
        block = re.search(r"```text\n(.*?)\n```", folded, flags=re.S).group(1)
        assert block.splitlines() == lines, lesson.key  # every figure, as python3 -m experiments.lessons prints it


def test_the_page_has_a_section_for_every_lesson_of_the_path_in_its_order():
    assert list(page_sections()) == [lesson.key for lesson in EVERY]


# The lessons that train: the page folds one machine's output, labelled with its NumPy, kernels and threads, held to
# the bounds of docs/lessons.md's last section (MOVES, plus one unit of a figure's last digit; the times only in
# their place). About 12 s.

MOVES = {  # lesson -> [(a pattern of an answer line, with a group for each figure that moves, how far each moved)]
    "floor": [(r"above the floor by (\d+\.\d+)", (0.0566,)),
              (r"a fresh run of \d+ steps, .*: validation loss (\d+\.\d+)$", (0.0566,))],
    "positions-past-length": [
        (r"none: reads it; loss (\S+) at positions 0-63, (\S+) at 64-100, (\S+) at 100$", (0.013, 0.023, 0.014)),
        (r"sinusoidal: reads it; loss (\S+) at positions 0-63, (\S+) at 64-100, (\S+) at 100$", (0.0, 0.013, 0.039)),
        (r"rope: reads it; loss (\S+) at positions 0-63, (\S+) at 64-100, (\S+) at 100$", (0.011, 0.022, 0.049)),
        (r"\(learned at positions 0-63, in windows of 64: loss (\S+)\)$", (0.008,))],
    "second-block": [
        (r"one block: copies (\S+)% .*; copy loss (\S+) nats \(first period (\S+)\)", (0.4, 0.007, 0.002)),
        (r"two blocks: copies (\S+)% .*; copy loss (\S+) nats \(first period (\S+)\)", (2.9, 0.252, 0.033)),
        (r"two blocks minus one: \+(\S+) points", (3.2,))],
}
SECONDS = r"(\d+\.\d+) s\b"  # a time in an answer line: "trained here in 0.9 s", "(7.3 s for both)"


def figures_that_move(key, line):
    """(the line with each figure that moves and each time as ~, [(figure, how far it may move; None: a time)]).

    >>> figures_that_move("floor", "  above the floor by 0.2805 nats per token, in 0.9 s")
    ('  above the floor by ~ nats per token, in ~ s', [('0.2805', 0.0566), ('0.9', None)])
    """
    spans = [(m.start(g), m.end(g), tol) for pattern, tols in MOVES[key] for m in [re.search(pattern, line)] if m
             for g, tol in enumerate(tols, 1)]
    spans += [(m.start(1), m.end(1), None) for m in re.finditer(SECONDS, line)]
    spans.sort()
    found = [(line[a:b], tol) for a, b, tol in spans]
    for a, b, _ in reversed(spans):
        line = line[:a] + "~" + line[b:]
    return line, found


def test_the_page_folds_the_answers_that_train_as_this_machine_prints_them_within_the_kernels_spread(monkeypatch,
                                                                                                     capsys):
    """Each runs the command its label names, main() in this process (tests/test_readme.py leaves it to this test)."""
    pytest.importorskip("numpy", reason="the lessons that train need NumPy")
    pytest.importorskip("threadpoolctl", reason="the lessons that train set their BLAS threads with threadpoolctl")
    from experiments import lessons_trained
    from oneblock import machine

    for lesson in lessons_trained.LESSONS:
        label = re.search(r"This machine's output: `python3 -m experiments.lessons --lesson (\S+) --guess (\S+)` on"
                          r" the shared 2-vCPU AMD EPYC, computed with (NumPy \S+, OpenBLAS \w+ kernels, 1 thread)\.",
                          flat(page_sections()[lesson.key]))
        assert label and label.group(1) == lesson.key, lesson.key
        status, out, err = lessons_main(monkeypatch, capsys, "--lesson", lesson.key, "--guess", label.group(2))
        said = out.splitlines()  # (trained here, with the lesson's own settings, as the label's command trains)
        guessed = next(n for n, line in enumerate(said) if line.startswith("your guess: "))
        verdict = next(n for n, line in enumerate(said) if line.startswith("verdict: "))
        assert status == 0 and err == "" and said[verdict].startswith("verdict: right ("), (lesson.key, err)
        lines = said[guessed + 1:verdict]  # the answer's lines (the guess the label names is the answer)
        folded = section_of(lesson, LAB, lines)
        assert label.group(0) in flat(folded), lesson.key  # (the label, in the fold with its output)
        block = re.search(r"```text\n(.*?)\n```", folded, flags=re.S).group(1).splitlines()
        assert len(block) == len(lines), (lesson.key, block, lines)
        same_kernels = label.group(3) == machine.blas(1)
        for shown, computed in zip(block, lines):
            (text, figures), (want_text, want) = figures_that_move(lesson.key, shown), figures_that_move(lesson.key,
                                                                                                           computed)
            assert text == want_text, (lesson.key, shown, computed)  # every word and every figure that cannot move
            for (figure, tol), (value, _) in zip(figures, want):
                if tol is None:
                    assert float(figure) > 0, shown  # a time: the machine's, at its load
                elif same_kernels:
                    assert figure == value, (lesson.key, shown, computed)  # the same bits on the same kernels
                else:
                    last = 10.0 ** -len(figure.partition(".")[2])  # one unit of the printed last digit
                    assert abs(float(figure) - float(value)) <= tol + last, (lesson.key, shown, computed)
