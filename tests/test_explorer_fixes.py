"""Three things the explorer page got wrong, each checked in a real headless Chromium (driven by Playwright, as
tests/test_explorer.py drives it): the position-rows heatmap of a learned model stayed on screen after loading a
model whose positions add no rows (rope, none), under the words that say there is none; on the attention map the
outline stayed on the chosen row while the readout followed the mouse; and the second-block experiment's summary
set one block's accuracy at its latest step beside two blocks' at the step they passed 90%.

The page is explore.py --export's copy (the untrained seed-3 model, learned positions), served by the explorer's own
server; the other models are train.py checkpoints of two steps. Outside CI the tests skip with a one-line reason
when Chromium or Playwright is missing; under CI=true that is a failure (tests/conftest.py's browser fixture)."""

import subprocess
import sys
from pathlib import Path

import pytest

from run_helpers import served

ROOT = Path(__file__).resolve().parent.parent
OUTLINE = (216, 27, 96)  # draw.js's outline of a heatmap row, #d81b60


# ----------------------------------------------------------------------------------------------------------------
# The served page, checkpoints of every scheme, and pages


@pytest.fixture(scope="module")
def site_url(tmp_path_factory):
    """The address of explore.py --export's folder (no checkpoint: the seed-3 initial weights), served."""
    folder = tmp_path_factory.mktemp("explorer-fixes")
    proc = subprocess.run([sys.executable, str(ROOT / "explore.py"), "--export", str(folder / "site")],
                          capture_output=True, text=True, cwd=folder, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with served(folder / "site") as url:
        yield url


@pytest.fixture(scope="module")
def scheme_ckpts(tmp_path_factory):
    """{scheme: a train.py checkpoint of 2 steps with those positions}, for rope, none and sinusoidal."""
    folder = tmp_path_factory.mktemp("explorer-fixes-ckpts")
    paths = {}
    for scheme in ("rope", "none", "sinusoidal"):
        paths[scheme] = folder / f"{scheme}.safetensors"
        subprocess.run([sys.executable, str(ROOT / "train.py"), "--out", str(paths[scheme]), "--steps", "2",
                        "--batch", "2", "--val-stories", "20", "--eval-every", "2", "--positions", scheme,
                        "--quiet"], check=True, capture_output=True, cwd=folder, timeout=300)
    return paths


def open_page(browser, url, init_script=None):
    """A new page of url, loaded and ready (window.ready), and the list its console and page errors go to."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("console", lambda m: m.type == "error" and errors.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    if init_script:
        page.add_init_script(init_script)
    page.goto(f"{url}/index.html")
    page.wait_for_function("window.ready === true")
    return page, errors


# ----------------------------------------------------------------------------------------------------------------
# The position rows: a heatmap only for a model that has them


def shown(page, selector):
    """Whether the element takes room on the screen: its computed display is not none and it has a box."""
    return page.evaluate("(s) => { const el = document.querySelector(s);"
                         " return getComputedStyle(el).display !== 'none' && el.getBoundingClientRect().height > 0; }",
                         selector)


def test_no_position_heatmap_stays_on_screen_for_a_model_without_position_rows(browser, site_url, scheme_ckpts):
    """Learned positions: the heatmap of their rows is shown. Load a rope model: the words say it adds no rows, and
    the heatmap (the learned model's, drawn before) is not displayed; sinusoidal shows a heatmap again, and no
    positions hides it again. Every hidden element of the page is not displayed, whatever its rules say."""
    page, errors = open_page(browser, site_url)
    assert "learned position rows" in page.inner_text("#position-note")
    assert shown(page, "#position-similarity")
    expected = {"rope": ("Rotary positions add no rows", False), "sinusoidal": ("fixed sinusoid table", True),
                "none": ("adds nothing to say where a token is", False)}
    for scheme, (words, heatmap) in expected.items():
        page.set_input_files("#weights-file", str(scheme_ckpts[scheme]))
        page.wait_for_function("(n) => document.querySelector('#load-message').textContent.startsWith(`Loaded ${n}`)",
                               arg=scheme_ckpts[scheme].name)
        assert words in page.inner_text("#position-note") and shown(page, "#position-note"), scheme
        assert page.get_attribute("#position-similarity", "hidden") == (None if heatmap else ""), scheme
        assert shown(page, "#position-similarity") == heatmap, (scheme, "the position heatmap is shown" if not heatmap
                                                                else "the position heatmap is not shown")
    displayed = page.evaluate("() => [...document.querySelectorAll('[hidden]')].filter((el) =>"
                              " getComputedStyle(el).display !== 'none').map((el) => el.id || el.tagName)")
    assert displayed == []
    page.close()
    assert errors == []


# ----------------------------------------------------------------------------------------------------------------
# The attention map: the outline follows the row the readout reads

# the box of the outline's pixels on the attention map, in CSS pixels of the canvas ({x0, y0, x1, y1}, ends
# excluded), or null when none is drawn
OUTLINE_BOX = """([r, g, b]) => {
  const canvas = document.querySelector("#attention-maps canvas");
  const ratio = canvas.width / canvas.getBoundingClientRect().width;
  const { data, width, height } = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
  let box = null;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = 4 * (y * width + x);
      if (Math.abs(data[i] - r) + Math.abs(data[i + 1] - g) + Math.abs(data[i + 2] - b) > 6) continue;
      box ??= { x0: x, y0: y, x1: x + 1, y1: y + 1 };
      box = { x0: Math.min(box.x0, x), y0: Math.min(box.y0, y), x1: Math.max(box.x1, x + 1), y1: y + 1 };
    }
  }
  return box && Object.fromEntries(Object.entries(box).map(([k, v]) => [k, v / ratio]));
}"""


def outline_box(page):
    return page.evaluate(OUTLINE_BOX, list(OUTLINE))


def test_the_attention_outline_follows_the_hovered_row_and_returns_to_the_chosen_one(browser, site_url):
    """The outline is drawn around the chosen row (the last, at first). Hovering row 2 and then row 5: the readout
    reads that row and the outline is around it, and only it; the mouse leaves: both are back on the chosen row.
    Where the rows lie is read from the pixels of the first outline (a row's outline is one cell and 2 pixels of
    line each side tall)."""
    page, errors = open_page(browser, site_url)
    rows = int(page.get_attribute("#attention-maps canvas", "data-rows"))
    chosen = rows - 1
    assert rows > 8 and f"Position {chosen} " in page.inner_text("#attention-readout")
    first = outline_box(page)
    assert first is not None
    cell = first["y1"] - first["y0"] - 4
    top = first["y0"] + 2 - chosen * cell  # the first row's top edge
    assert cell >= 9, first
    page.locator("#attention-maps canvas").scroll_into_view_if_needed()
    rect = page.locator("#attention-maps canvas").bounding_box()

    def around(row):
        """The outline's box around row, in the first one's columns."""
        return {**first, "y0": top + row * cell - 2, "y1": top + (row + 1) * cell + 2}

    for row in (2, 5):
        page.mouse.move(rect["x"] + first["x0"] + 2 + cell / 2, rect["y"] + top + (row + 0.5) * cell)
        page.wait_for_function("(n) => document.querySelector('#attention-readout').textContent.startsWith(n)",
                               arg=f"Position {row} ")
        assert outline_box(page) == around(row), f"the outline is not around the hovered row {row}"
        assert page.get_attribute("#attention-maps canvas", "data-highlight") == str(row)
    page.mouse.move(5, 5)  # off the map
    page.wait_for_function("(n) => document.querySelector('#attention-readout').textContent.startsWith(n)",
                           arg=f"Position {chosen} ")
    assert outline_box(page) == first == around(chosen)
    assert page.get_attribute("#attention-maps canvas", "data-highlight") == str(chosen)
    page.close()
    assert errors == []


# ----------------------------------------------------------------------------------------------------------------
# The second-block experiment's summary: both models at the same step

# workers that train nothing: each keeps what the page sends it, and the test answers for it (window.fake_workers)
FAKE_WORKERS = """
window.fake_workers = [];
window.Worker = class {
  constructor(url) {
    this.url = String(url);
    this.sent = [];
    this.terminated = false;
    window.fake_workers.push(this);
  }
  postMessage(msg) { this.sent.push(msg); }
  terminate() { this.terminated = true; }
};
"""

# an evaluation of the induction task as worker.js posts it, for the model of the worker at index i of the fake ones
ANSWER = """([i, step, accuracy]) => {
  const w = window.fake_workers[i], blocks = w.sent[0].config.blocks;
  const map = { rows: 2, cols: 2, values: Float64Array.from([1, 0, 0.5, 0.5]) };
  const measures = { copy_accuracy: accuracy, copy_loss: 2.5, first_period_loss: 3.0,
    scores: Array.from({ length: blocks }, () => [{ induction: 0.2, previous_token: 0.1 }]) };
  w.onmessage({ data: { run: 1, type: "eval", step, seconds: step / 10, measures, tokens: [1, 2],
    period: 4, weights: Array.from({ length: blocks }, () => [map]) } });
}"""


def test_the_second_block_summary_reads_one_block_at_the_step_two_blocks_passed(browser, site_url):
    """The two models train in workers of their own, each at its own pace. One block measured at steps 25 and 50
    (20% then 30%) before two blocks pass 90% at step 25: the summary says one block was at 20.0% at that step.
    Restarted, two blocks pass at step 75 before one block gets there: the summary says one block has not reached
    step 75 yet, and once it is measured there (25%), gives that figure, not a later one (40% at step 100)."""
    page, errors = open_page(browser, site_url, FAKE_WORKERS)
    exp = "explorer.modules.experiments"

    def start():
        """Start, and the indexes of the one-block and the two-block model's workers among the fake ones."""
        before = page.evaluate("() => window.fake_workers.length")
        page.click("#depth-start")
        blocks = page.evaluate("(n) => window.fake_workers.slice(n).map((w) => w.sent[0].config.blocks)", before)
        assert sorted(blocks) == [1, 2], blocks
        return before + blocks.index(1), before + blocks.index(2)

    def answer(worker, step, accuracy):
        page.evaluate(ANSWER, [worker, step, accuracy])

    def summary_says(words):
        page.wait_for_function("(w) => document.querySelector('#depth-summary').textContent.includes(w)", arg=words)
        return page.inner_text("#depth-summary")

    one, two = start()
    answer(one, 25, 0.2)
    answer(one, 50, 0.3)  # one block is ahead
    answer(two, 25, 0.95)
    said = summary_says("Two blocks passed 90% copy accuracy at step 25")
    assert "while one block was at 20.0% at that step." in said, said
    assert page.evaluate(f"() => {exp}.runs.depth.passed.one_block") == 0.2

    page.click("#depth-stop")
    one, two = start()
    for step, accuracy in ((25, 0.5), (50, 0.8), (75, 0.92)):
        answer(two, step, accuracy)
    answer(one, 25, 0.2)
    answer(one, 50, 0.22)  # one block is behind
    said = summary_says("Two blocks passed 90% copy accuracy at step 75")
    assert said.endswith("; one block has not yet reached step 75."), said
    answer(one, 75, 0.25)
    answer(one, 100, 0.4)
    said = summary_says("while one block")
    assert said.endswith("while one block was at 25.0% at that step."), said
    passed = page.evaluate(f"() => {exp}.runs.depth.passed")
    assert (passed["step"], passed["one_block"]) == (75, 0.25), passed
    page.click("#depth-stop")
    page.close()
    assert errors == []
