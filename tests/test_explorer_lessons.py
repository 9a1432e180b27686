"""The explorer's lessons view (explorer/lessons.js), driven end to end in a real headless Chromium (Playwright)
against the Python's lessons on the same weights: docs/explorer.md, "How it is checked". The page is an export of the
untrained seed-3 model, served by the explorer's own server."""

import json
import random
import re
from contextlib import ExitStack

import pytest

from oneblock import export
from oneblock import lessons as py_lessons
from run_helpers import ROOT, served

TEST_STEPS = 40  # the steps of each trained lesson here, through ?lesson-steps
# a guess for each lesson of oneblock/lessons.py and experiments/lessons_trained.py, in their order
GUESSES = {"tokens": "3", "init-loss": "4.5", "layernorm-variance": "0.95 1", "order": "0 0.001", "causality": "2",
           "finite-difference": "2", "pre-norm": "1", "relu-mlp": "0.5 0.6", "softmax-gradient": "-0.8",
           "skip-paths": "0.3", "floor": "2", "positions-past-length": "3", "second-block": "2"}
MODEL_AND_TRAINED = list(GUESSES)


# ----------------------------------------------------------------------------------------------------------------
# The served page, and pages of it


@pytest.fixture(scope="module")
def site_url(tmp_path_factory):
    """The address of an export of the untrained seed-3 model, served."""
    folder = tmp_path_factory.mktemp("explorer-lessons") / "site"
    export.export_site(folder, *export.read_weights(folder.parent / "no-such.safetensors", explicit=False))
    with served(folder) as url:
        yield url


@pytest.fixture(scope="module")
def page_url(site_url):
    """The page conftest's reader shares among the tests that only read it: the export as a learner first opens it."""
    return f"{site_url}/index.html"


@pytest.fixture
def learner(pages, site_url):
    """learner(where): a new page of conftest's pages, as a learner first opens it, of where: a page of the served
    export (its index.html unless named), or the folder of another export, served until the test ends."""
    with ExitStack() as servers:
        def opener(where="index.html"):
            if not isinstance(where, str):  # a folder: its index.html, served
                where = f"{servers.enter_context(served(where))}/index.html"
            return pages(where if "://" in where else f"{site_url}/{where}")

        yield opener


def enter_guess(page, key, text):
    """Type text into the lesson's guess box, or pick its choice of that number."""
    kind = page.evaluate("(k) => explorer.modules.lessons.by_key(k).guess[0]", key)
    if kind == "choice":
        page.check(f"#lesson-{key} input[type=radio][value='{text}']")
    else:
        page.fill(f"#lesson-{key} .guess-text", text)


def check(page, key, timeout=120_000):
    """Click the lesson's Check and wait for its reveal: {state, verdict, value, guess} as the page shows them."""
    card = f"#lesson-{key}"
    page.click(f"{card} button.check")
    page.wait_for_function("(s) => ['revealed', 'skipped'].includes(document.querySelector(s).dataset.state)",
                           arg=card, timeout=timeout)
    return read_card(page, key)


def read_card(page, key):
    return page.evaluate("""(s) => {
      const card = document.querySelector(s), value = card.querySelector('.answer-value');
      return {state: card.dataset.state, verdict: card.dataset.verdict, value: value && JSON.parse(value.dataset.value),
              guess: card.querySelector('.guess-value')?.textContent ?? null,
              locked: [...card.querySelectorAll('.guess input')].every((i) => i.disabled),
              text: card.querySelector('.reveal').innerText};
    }""", f"#lesson-{key}")


def answer_of(page, key):
    """The whole answer of the lesson's last Check in the page (with the numbers the reveal does not keep)."""
    return page.evaluate("(k) => explorer.modules.lessons.last_answers[k]", key)


def flow(text):
    return re.sub(r"\n\s*", " ", text)


# ----------------------------------------------------------------------------------------------------------------
# The list: the command line's lessons, questions and guesses


def page_values(lesson, depth):
    """The values the page fills a lesson's slots with: its tokenizer's (the seed's), and its own runs': the Python's
    (trains), but the second block's, which are the page's experiment's (DEPTH)."""
    runs = {"second-block": {"steps": depth["steps"], "batch": depth["batch"], "lr": f"{depth['lr']:g}"}}
    return {**py_lessons.facts(py_lessons.build_lab().tokenizer), **(lesson.trains or {}), **runs.get(lesson.key, {})}


def test_the_pages_lessons_are_the_exports_words_filled_with_its_own_numbers(reader):
    """In the command line's order; the second block's live run is the page's experiment's (experiments.js DEPTH),
    and without ?lesson-steps no word says fewer steps (with it: the test of the trained lessons)."""
    page = reader
    got = page.evaluate("() => explorer.modules.lessons.LESSONS.map((l) => ({key: l.key, title: l.title,"
                        " question: l.question, explain: l.explain, guess: l.guess, describe: l.describe,"
                        " rule: l.rule, source: l.source, numbers: l.numbers, trains: l.trains}))")
    depth = page.evaluate("() => explorer.modules.experiments.DEPTH")
    runs = {"second-block": {key: depth[key] for key in ("steps", "batch", "lr", "seed")}}
    want = [{"key": lesson.key, "title": lesson.title, "question": lesson.question.format(**page_values(lesson, depth)),
             "explain": lesson.explain.format(**page_values(lesson, depth)),
             "guess": [lesson.guess[0], *([list(lesson.guess[1])] if len(lesson.guess) > 1 else [])],
             "describe": py_lessons.describe_guess(lesson.guess), "rule": lesson.judge.rule, "source": lesson.source,
             "numbers": lesson.numbers, "trains": runs.get(lesson.key, lesson.trains)}
            for lesson in py_lessons.LESSONS + py_lessons.numpy_lessons()[0]]
    assert got == want and [lesson["key"] for lesson in got[:13]] == MODEL_AND_TRAINED
    assert "{" not in "".join(lesson["question"] + lesson["explain"] for lesson in got)  # every slot filled
    second = got[MODEL_AND_TRAINED.index("second-block")]
    assert "The runs here train 800 steps of 32 sequences each, lr 0.005" in " ".join(second["explain"].split())
    assert "lesson-steps" not in page.inner_text("#lessons")
    shown = page.locator("#lesson-list > li").all()
    assert [li.get_attribute("data-key") for li in shown] == [lesson["key"] for lesson in got]
    for li, lesson in zip(shown, got):
        assert li.locator(".question").inner_text() == flow(lesson["question"])
    link = page.locator("#lessons-link").bounding_box()
    assert link is not None and 0 <= link["y"] and link["y"] + link["height"] <= 900  # seen without scrolling
    page.click("#lessons-link")
    page.wait_for_function("() => Math.abs(document.querySelector('#lessons').getBoundingClientRect().top) < 5")


def exported(tmp_path, change):
    """An export of the seed's weights whose data/lessons.json change(data) rewrote (change returns the new data,
    or bytes to write as they are)."""
    site = tmp_path / "site"
    export.export_site(site, *export.read_weights(tmp_path / "no-such.safetensors", explicit=False))
    path = site / "data" / "lessons.json"
    data = change(json.loads(path.read_text(encoding="utf-8")))
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return site


def test_the_page_fills_the_exports_templates_with_the_numbers_of_its_tokenizer(learner, tmp_path):
    """A template the export wrote, filled in the page: the slots are the page's tokenizer's numbers, in Python's
    formats; a slot the page has no value for is refused in one line naming it, and the other panels work on."""
    def question(template):
        def change(data):
            data["lessons"][1]["question"] = template
            return data
        return change

    page = learner(exported(tmp_path / "a", question("V {vocab}, ln V {ln_vocab:.4f}, {merges} merges {{x}}")))
    assert page.inner_text("#lesson-init-loss .question") == "V 96, ln V 4.5643, 70 merges {x}"
    page = learner(exported(tmp_path / "b", question("the {width} of it")))
    said = page.inner_text("#lessons-message")
    assert "The lessons could not load: the words name {width}, which the page has no value for" in said
    assert page.locator("#lesson-list > li").count() == 0 and page.inner_text("#model-status") != ""


# ----------------------------------------------------------------------------------------------------------------
# Reading a guess, the judges and the numbers, against oneblock/lessons.py


def python_parse(guess, text):
    try:
        value = py_lessons.parse_guess(guess, text)
    except ValueError as e:
        return {"error": str(e)}
    return {"value": list(value) if isinstance(value, tuple) else value}


PARSE_CASES = [
    (("number",), ["4", " 4 ", "1e-3", "-2.5", ".5", "5.", "1_000", "abc", "", "inf", "-nan", "0x10", "1e", "4 5"]),
    (("range",), ["0.9 1", "0.9, 1", "1 0.9", "1", "1 2 3", "a b", "0 inf", "2 2"]),
    (py_lessons.by_key("order").guess, ["0 0.001", "0.001 0", "0", "x 1"]),  # a pair
    (py_lessons.by_key("causality").guess, ["2", "4", "0", "5", "Position K and after", "k and after", "02", "-1"]),
]


def test_a_guess_is_read_and_refused_as_parse_guess_reads_and_refuses_it(modules_page):
    """The same value, or the same message word for word, for good and bad input of every kind."""
    for guess, texts in PARSE_CASES:
        want = [python_parse(guess, text) for text in texts]
        got = modules_page.evaluate("""([guess, describe, texts]) => texts.map((text) => {
          try { return {value: lessons.parse_guess({guess, describe}, text)}; } catch (e) { return {error: e.message}; }
        })""", [[guess[0], *([list(guess[1])] if len(guess) > 1 else [])], py_lessons.describe_guess(guess), texts])
        assert got == want, guess
        assert any("error" in w for w in want) and any("value" in w for w in want)


JUDGE_CASES = {
    "tokens": ([4], [4, 3, 5, 2, 4.5]),
    "init-loss": ([4.56], [4.52, 4.1, 1.0, 5.06, 4.61]),
    "layernorm-variance": ([0.985], [[0.95, 1.0], [0.0, 1.0], [0.99, 1.0], [0.5, 0.6], [0.9, 0.95]]),
    "order": ([[0.0, 0.00066]], [[0.0, 0.001], [0.0, 0.005], [0.001, 0.001], [1e-12, 0.0007], [0.0, 0.0]]),
    "causality": (["position k and after"], ["position k and after", "all positions"]),
    "positions-past-length": (["every scheme but learned", "all four"],
                              ["every scheme but learned", "all four", "learned only", "no scheme"]),
    "second-block": (["two blocks copy far better"], ["two blocks copy far better", "about the same"]),
}


def test_every_judge_gives_the_python_judges_verdict(modules_page):
    by_key = {lesson.key: lesson for lesson in py_lessons.LESSONS + py_lessons.numpy_lessons()[0]}
    seen = set()
    for key, (answers, guesses) in JUDGE_CASES.items():
        for value in answers:
            want = [by_key[key].judge(tuple(g) if isinstance(g, list) else g,
                                      {"value": tuple(value) if isinstance(value, list) else value}) for g in guesses]
            got = modules_page.evaluate("([spec, v, gs]) => gs.map((g) => lessons.judge_of(spec)(g, {value: v}))",
                                        [by_key[key].judge.spec, value, guesses])
            assert got == want, (key, value)
            seen.update(want)
    assert seen == {"right", "close", "off"}


FORMATS = [(x, spec) for x in (0.0, 4.0, 0.000659043, 0.0006590429381321261, 1.49e-7, -0.004349, 7.614e-05, 1234567.0,
                               0.9846683798056824, 1e-10, 100.0, 2.5e16, 3.5e16, 0.5, 0.125, -0.375, 2.5)
           for spec in ("g", ".7g", ".3g", ".1g", ".2g", ".6f", "+.6f", ".4f", ".2f", ".0f", ".3e", ".2e", ".0e",
                        "+.15e")]  # (2.5e16, 0.125, -0.375, 2.5: exact ties, which Python rounds to even)


def test_numbers_are_written_as_pythons_format_writes_them(modules_page):
    got = modules_page.evaluate("(cases) => cases.map(([x, s]) => lessons.py_format(x, s))", FORMATS)
    assert got == [format(x, spec) for x, spec in FORMATS]
    ints = [(n, spec) for n in (0, 5, 11, -3, 123) for spec in ("d", "2d", "4d")]  # (causality's positions)
    assert modules_page.evaluate("(cases) => cases.map(([x, s]) => lessons.py_format(x, s))", ints) == [
        format(n, spec) for n, spec in ints]
    shows = [0.0, 4.0, 0.000659043, [0.0, 0.0006590429381321261], "only k"]
    assert modules_page.evaluate("(vs) => vs.map(lessons.show)", shows) == [
        py_lessons.show(tuple(v) if isinstance(v, list) else v) for v in shows]


# ----------------------------------------------------------------------------------------------------------------
# The ten lessons of model.py, each end to end in the page, against oneblock/lessons.py on the same weights


def test_the_ten_model_lessons_in_the_page_answer_as_model_py_does(learner):
    """A guess entered, Check, the reveal read: the verdict is the Python judge's on the Python answer, and each
    answer is model.py's on the seed's weights: bit for bit where the sums are exact, as the module says; and a
    reveal's code is read from the served file."""
    lab = py_lessons.build_lab()
    page = learner()
    for lesson in py_lessons.LESSONS:
        enter_guess(page, lesson.key, GUESSES[lesson.key])
        shown = check(page, lesson.key)
        want = lesson.answer(lab)
        guess = py_lessons.parse_guess(lesson.guess, GUESSES[lesson.key])
        assert shown["state"] == "revealed" and shown["locked"], lesson.key
        assert shown["verdict"] == lesson.judge(guess, want), lesson.key
        assert shown["guess"] == py_lessons.show(guess)
        assert flow(py_lessons.words(lesson, lab)["explain"]) in shown["text"] and lesson.source in shown["text"]
        page_lines = page.inner_text(f"#lesson-{lesson.key} pre.shown").splitlines()
        assert len(page_lines) == len(want["shown"]), lesson.key
        value, wanted = shown["value"], want["value"]
        if lesson.key in ("tokens", "causality", "layernorm-variance", "relu-mlp"):
            assert (tuple(value) if isinstance(value, list) else value) == wanted, lesson.key  # exact: counts, a set
            # of positions, IEEE operations and exact sums
            assert page_lines == want["shown"], lesson.key  # and so every line the terminal shows
        elif lesson.key in ("init-loss", "pre-norm", "softmax-gradient", "skip-paths"):  # exp: V8's and C's
            assert value == pytest.approx(wanted, rel=1e-13, abs=0), lesson.key
            assert page_lines == want["shown"], lesson.key  # (the digits shown, the same)
        elif lesson.key == "order":
            assert value[0] == wanted[0] == 0.0  # bit-exact, on every machine
            assert value[1] == pytest.approx(wanted[1], rel=1e-13, abs=0) and value[1] > 0
        else:  # finite-difference: the same lines but for the round-off's last digits
            assert value == wanted == "falls then rises"
            assert page_lines[:2] == want["shown"][:2] and page_lines[-1] == want["shown"][-1]
    verdicts = {lesson.key: read_card(page, lesson.key)["verdict"] for lesson in py_lessons.LESSONS}
    assert set(verdicts.values()) == {"right", "close", "off"}, verdicts  # the guesses above get different verdicts

    # the numbers behind the finite-difference shape, and the layer norm's, from the answer functions themselves
    fd = answer_of(page, "finite-difference")
    want = py_lessons.FINITE_DIFFERENCE.answer(lab)
    py_errors = [float(line.split("error ")[1]) for line in want["shown"] if line.strip().startswith("h = ")]
    for h, got, printed in zip(py_lessons.STEPS, fd["errors"], py_errors):
        if h >= 1e-4:  # truncation rules: the same to the 3 digits printed, and far finer
            assert got == pytest.approx(printed, rel=6e-3), h
        else:  # round-off: within a factor of 10
            assert printed / 10 <= got <= printed * 10, h

    # the reveal's "In this page": the function's own lines of the served model.js, with their numbers
    details = page.locator("#lesson-layernorm-variance details").first
    details.locator("summary").click(position={"x": 4, "y": 4})  # (its start: not the link in it)
    page.wait_for_function("() => document.querySelector('#lesson-layernorm-variance pre.code').textContent")
    code = details.locator("pre.code").inner_text().splitlines()
    lines = (ROOT / "explorer" / "model.js").read_text(encoding="utf-8").splitlines()
    start = next(n for n, line in enumerate(lines, 1) if line.startswith("export function layernorm_forward("))
    assert code[0].split(None, 1) == [str(start), lines[start - 1]] and code[-1].split() == [str(start + len(code) - 1),
                                                                                             "}"]
    assert f"lines {start} to {start + len(code) - 1}" in details.locator("summary").inner_text()
    assert details.locator("a").get_attribute("href") == "model.js"


# ----------------------------------------------------------------------------------------------------------------
# A bad guess, and the learner's progress


def test_a_bad_guess_is_refused_naming_it_and_check_waits_for_a_good_one(learner):
    page = learner()
    button = "#lesson-{} button.check"
    assert page.is_disabled(button.format("init-loss"))  # nothing entered yet
    for key, bad, good in (("init-loss", "four", "4.5"), ("layernorm-variance", "1 0.9", "0.9 1"),
                           ("order", "0", "0 0.001")):
        lesson = py_lessons.by_key(key)
        enter_guess(page, key, bad)
        message = page.inner_text(f"#lesson-{key} .message")
        with pytest.raises(ValueError) as refused:
            py_lessons.parse_guess(lesson.guess, bad)
        assert str(refused.value) in message and "expected" in message, message
        assert page.is_disabled(button.format(key))
        page.press(f"#lesson-{key} .guess-text", "Enter")  # Enter does nothing either
        assert page.get_attribute(f"#lesson-{key}", "data-state") == "idle"
        enter_guess(page, key, good)
        assert page.locator(f"#lesson-{key} .message").is_hidden() and page.is_enabled(button.format(key))
    assert page.is_disabled(button.format("causality"))  # a choice: waits for one to be picked
    enter_guess(page, "causality", "1")
    assert page.is_enabled(button.format("causality"))


def test_progress_survives_a_reload_and_the_clear_button_forgets_it(learner):
    page = learner()
    enter_guess(page, "tokens", "4")
    first = check(page, "tokens")
    enter_guess(page, "causality", "3")
    second = check(page, "causality")
    assert (first["verdict"], second["verdict"]) == ("right", "off")
    page.reload()
    page.wait_for_function("window.ready === true")
    for key, before in (("tokens", first), ("causality", second)):
        after = read_card(page, key)
        assert {k: after[k] for k in ("state", "verdict", "value", "guess", "locked")} == {
            k: before[k] for k in ("state", "verdict", "value", "guess", "locked")}, key
        assert "Kept from before" in after["text"]
    assert page.input_value("#lesson-tokens .guess-text") == "4"
    assert page.is_checked("#lesson-causality input[value='3']")
    assert page.get_attribute("#lesson-order", "data-state") == "idle"
    assert "Restored 2 of your lessons" in page.inner_text("#lessons-message")

    page.click("#lessons-clear")
    assert page.evaluate("(k) => localStorage.getItem(k)", "oneblock-lessons-v1") is None
    for key in ("tokens", "causality"):
        assert page.get_attribute(f"#lesson-{key}", "data-state") == "idle"
        assert page.locator(f"#lesson-{key} .reveal").is_hidden() and page.is_enabled(f"#lesson-{key} .guess-text"
                                                                                      if key == "tokens" else
                                                                                      f"#lesson-{key} input[value='3']")
    page.reload()
    page.wait_for_function("window.ready === true")
    assert page.get_attribute("#lesson-tokens", "data-state") == "idle"
    assert page.input_value("#lesson-tokens .guess-text") == ""


DAMAGES = ("when", "shown", "seconds")  # a kept record's field: missing, or of another type


def test_a_tampered_record_is_dropped_saying_so_and_the_page_starts(learner):
    """Before: one kept record with its when, shown or seconds missing or of another type stopped the page's
    start-up (no lesson card, panels not drawn, the clear button dead). Now it is dropped with a note, and the
    others are restored."""
    page = learner()
    for key, guess in (("tokens", "4"), ("init-loss", "4.5")):
        enter_guess(page, key, guess)
        check(page, key)
    for field in DAMAGES:
        page.evaluate("""([store, field]) => {
          const kept = JSON.parse(localStorage.getItem(store));
          kept.tokens = JSON.parse(sessionStorage.getItem('tokens') ?? 'null') ?? kept.tokens;  // (the good one)
          sessionStorage.setItem('tokens', JSON.stringify(kept.tokens));
          if (field === 'when') delete kept.tokens.when;
          else kept.tokens[field] = field === 'shown' ? 7 : 'a while';
          localStorage.setItem(store, JSON.stringify(kept));
        }""", ["oneblock-lessons-v1", field])
        page.reload()
        page.wait_for_function("window.ready === true", timeout=10_000)
        said = page.inner_text("#lessons-message")
        assert "Restored 1 of your lessons" in said and "Dropped 1 kept record that this page did not write" \
            " ('tokens')" in said, field
        assert page.get_attribute("#lesson-tokens", "data-state") == "idle", field
        assert page.get_attribute("#lesson-init-loss", "data-state") == "revealed", field
        assert page.locator("#lesson-list > li").count() == len(py_lessons.LESSONS + py_lessons.numpy_lessons()[0])
        assert page.inner_text("#model-status") != "No model loaded."
    page.click("#lessons-clear")
    assert page.evaluate("(k) => localStorage.getItem(k)", "oneblock-lessons-v1") is None
    assert page.get_attribute("#lesson-init-loss", "data-state") == "idle"


# ----------------------------------------------------------------------------------------------------------------
# The three lessons that train, in the page's workers, against the NumPy float64 library at the same settings


def python_positions(steps, data):
    from experiments.lessons_trained import PAST_POSITION, reads_past
    from experiments.positions import windows
    from oneblock import training
    from oneblock.config import SCHEMES
    from oneblock.settings import Settings, checked, model_config

    got = {}
    for scheme in SCHEMES:
        run = training.train(Settings(steps=steps, eval_every=steps, positions=scheme, dtype="float64", quiet=True),
                             data=data)
        config = model_config(checked(Settings(positions=scheme)), data.vocab)
        ids, targets = windows(data.tok, data.val_texts, PAST_POSITION + 1)
        got[scheme] = reads_past(run.state["params"], config, ids, targets)
    return got


def python_copy(steps, depth):
    """experiments/induction.py's train_induction at the page's DEPTH settings, in float64: each size's copy
    measures on the worker's test sequences."""
    from experiments.induction import VOCAB, WINDOW, induction_config, induction_measures, periodic
    from oneblock import training
    from oneblock.settings import Settings, checked, model_config

    test = periodic(random.Random(1002), depth["test_count"])
    out = {}
    for blocks in depth["blocks"]:
        s = checked(Settings(steps=steps, batch=depth["batch"], seq_len=WINDOW, lr=depth["lr"],
                             min_lr=depth["lr"] / 10, blocks=blocks, heads=depth["heads"], seed=depth["seed"],
                             dtype="float64"))
        init, loss_and_grads, _ = training.model_functions(s, model_config(s, VOCAB))
        state = training.fresh_state(init, s.seed)
        with training.use_threads(s):
            while state["step"] < steps:
                ids, targets, _ = periodic(state["rng"], s.batch)
                training.step(state, ids, targets, loss_and_grads, s)
            out[blocks] = induction_measures(state["params"], induction_config((blocks, 1)), test)[0]
    return out


def test_the_three_trained_lessons_train_in_the_page_as_numpy_float64_does(learner):
    """Each with TEST_STEPS steps (the test hook, which each of the three names): the reveal's choice is the one the
    Python's numbers make, and the numbers agree within 1e-9 relative."""
    from experiments.lessons_trained import copy_choice, page_val_loss, scheme_choice
    from oneblock import training
    from oneblock.settings import Settings

    page = learner(f"index.html?lesson-steps={TEST_STEPS}")
    assert page.locator("#lessons .lesson p.small", has_text=f"?lesson-steps={TEST_STEPS}),").count() == 3
    for key in ("floor", "positions-past-length", "second-block"):
        enter_guess(page, key, GUESSES[key])
        assert check(page, key, timeout=300_000)["state"] == "revealed", key
    answers = page.evaluate("() => JSON.parse(localStorage.getItem('oneblock-lessons-v1'))")
    stats = {key: answer_of(page, key) for key in ("floor", "positions-past-length", "second-block")}

    run = training.train(Settings(steps=TEST_STEPS, eval_every=TEST_STEPS, dtype="float64", quiet=True))
    floor = stats["floor"]
    assert floor["steps"] == TEST_STEPS and floor["val_floor"] == run.data.val_floor
    assert floor["val_loss"] == pytest.approx(run.val_loss, rel=1e-9, abs=0)
    assert answers["floor"]["value"] == ("no" if run.val_loss > run.data.val_floor else "yes")
    lab = py_lessons.build_lab()
    assert floor["page_val_loss"] == pytest.approx(page_val_loss(lab, run.data)[0], rel=1e-12, abs=0)
    lines = answers["floor"]["shown"]  # the export's templates, filled with the page's numbers
    assert lines[2].startswith(f"a fresh run of {TEST_STEPS} steps, trained here in ") and len(lines) == 5
    assert lines[3] == f"above the floor by {floor['gap']:.4f} nats per token" and floor['gap'] > 0
    assert lines[4].startswith(f"the page's model (the seed's weights): validation loss {floor['page_val_loss']:.4f}")

    want = python_positions(TEST_STEPS, run.data)
    got = stats["positions-past-length"]["runs"]
    for scheme, reading in want.items():
        if "refused" in reading:
            assert got[scheme]["refused"] == reading["refused"], scheme
        else:
            for part in ("before", "after", "at"):
                assert got[scheme][part] == pytest.approx(reading[part], rel=1e-9, abs=0), (scheme, part)
    reads = {scheme for scheme, reading in want.items() if "refused" not in reading}
    assert answers["positions-past-length"]["value"] == scheme_choice(reads) == "every scheme but learned"
    lines = answers["positions-past-length"]["shown"]  # the export's templates, filled with the page's numbers
    refusal = want["learned"]["refused"]
    assert f"learned: refused: {refusal}" in lines and lines[-1] == ("the page's model (the seed's weights, learned"
                                                                     f" positions): refused: {refusal}")
    none = got["none"]
    assert lines[2] == (f"none: reads it; loss {none['before']:.3f} at positions 0-63, {none['after']:.3f} at 64-100,"
                        f" {none['at']:.3f} at 100") and len(lines) == 7

    depth = page.evaluate("() => explorer.modules.experiments.DEPTH")
    copies = python_copy(TEST_STEPS, depth)
    got = stats["second-block"]["measures"]
    for blocks, name in ((1, "one"), (2, "two")):
        assert got[name]["copy_accuracy"] == copies[blocks]["copy_accuracy"], blocks
        assert got[name]["copy_loss"] == pytest.approx(copies[blocks]["copy_loss"], rel=1e-9, abs=0), blocks
    assert answers["second-block"]["value"] == copy_choice(copies[1]["copy_accuracy"], copies[2]["copy_accuracy"])
    lines = answers["second-block"]["shown"]  # the export's templates, filled with the page's numbers
    assert lines[0].startswith(f"{depth['test_count']} fresh test sequences, each a segment of 4 to 16 tokens")
    for line, name, blocks in zip(lines[1:3], ("one block", "two blocks"), (1, 2)):
        assert line.startswith(f"{name}: copies {100 * copies[blocks]['copy_accuracy']:.1f}% of the copyable tokens")
        assert re.search(r"; trained in \d+\.\d s$", line), line
    assert lines[3].startswith("two blocks minus one: ") and len(lines) == 4


# ----------------------------------------------------------------------------------------------------------------
# 10. scaling: the answer the export fitted, shown; a damaged or oversized export refused


def test_the_scaling_lesson_in_the_page_shows_the_answer_the_terminal_computes(learner):
    """The guess, Check, and the answer experiments/lessons_scaling.py computes from the same record, line for
    line, with the same verdict."""
    pytest.importorskip("scipy")
    from experiments.lessons_scaling import SCALING

    page = learner()
    enter_guess(page, "scaling", "0.43")
    card = check(page, "scaling")
    ours = SCALING.answer(None)
    assert card["state"] == "revealed" and card["verdict"] == SCALING.judge(0.43, ours) == "right"
    assert card["value"] == ours["value"] and answer_of(page, "scaling")["shown"] == ours["shown"]


def test_a_crafted_export_is_refused_in_a_line_and_freezes_nothing(learner, tmp_path):
    """Before: a crafted 1.6 MB data/scaling.json (120 x 120 cells) froze the tab for 38 s on the scaling lesson's
    Check, which fitted it. Now the page fits nothing, and refuses each crafted part in a line, at once."""
    big = exported(tmp_path / "big", lambda data: json.dumps({**data, "pad": "x" * 1_600_000}).encode())
    page = learner(big)  # (ready at once: the file is not read)
    said = page.inner_text("#lessons-message")
    assert said.startswith("The lessons could not load: data/lessons.json is 16") and "more than the" in said
    assert page.locator("#lesson-list > li").count() == 0 and page.is_enabled("#lessons-clear")
    long = exported(tmp_path / "long", lambda data: {**data, "scaling": {**data["scaling"], "shown": ["x"] * 5000}})
    page = learner(long)
    enter_guess(page, "scaling", "0.43")
    page.click("#lesson-scaling button.check")
    page.wait_for_function("() => !document.querySelector('#lesson-scaling .message').hidden", timeout=5_000)
    said = page.inner_text("#lesson-scaling .message")
    assert "data/lessons.json holds no scaling answer the page can show (expected a number, at most 64" in said
    # a lesson's answer templates of too many lines, a run of a billion steps (never trained), a list of 5000 steps
    # (never differenced), a number the answer reads missing (not on Check): each refused as the page loads, in a line
    for key, field, change, why in (
            ("init-loss", "shown", lambda shown: ["{loss}"] * 5000, "its shown is not a list of at most 64 texts"),
            ("floor", "trains", lambda run: {**run, "steps": 10**9},
             "its trains is not a run of train.py's steps, batch, lr and seed"),
            ("finite-difference", "numbers", lambda numbers: {**numbers, "steps": [1e-2] * 5000},
             "its numbers are not numbers, texts or lists of them, with each of: T, steps"),
            ("positions-past-length", "numbers", lambda numbers: {"trained": 64},
             "its numbers are not numbers, texts or lists of them, with each of: trained, past")):
        page = learner(exported(tmp_path / key, lambda data: {**data, "lessons": [
            {**words, field: change(words[field])} if words["key"] == key else words for words in data["lessons"]]}))
        said = page.inner_text("#lessons-message")
        assert said.startswith(f"The lessons could not load: lesson {key} of data/lessons.json: {why}"), said
        assert page.locator("#lesson-list > li").count() == 0
    reasons = exported(tmp_path / "reasons", lambda data: {**data, "skips": {**data["skips"], "short": 5}})
    page = learner(reasons)  # a reason a lesson cannot answer that is not a text: refused as the page loads
    said = page.inner_text("#lessons-message")
    assert said.startswith("The lessons could not load: data/lessons.json: its skips has no text 'short' of at most"
                           " 4000 characters")
    assert page.locator("#lesson-list > li").count() == 0
