"""The explorer's JavaScript as code: its files' lines and where they name the position schemes, every module loaded
as an ES module in a real headless Chromium, and model.js's model_config as oneblock/config.py's ModelConfig where the
page meets a config (config_to_json: tests/test_one_config.py), down to the checkpoint the page writes."""

import dataclasses
import json
import random
import re

from oneblock import config
from oneblock.config import ModelConfig
from run_helpers import ROOT, served

EXPLORER = ROOT / "explorer"
MODULES = sorted(p.name for p in EXPLORER.glob("*.js"))  # bpe.js, checkpoint.js, ...


# ----------------------------------------------------------------------------------------------------------------
# The files as text


def test_every_line_of_the_explorers_javascript_fits_in_120_characters():
    long = [f"{name}:{n} ({len(line)} characters)" for name in MODULES
            for n, line in enumerate((EXPLORER / name).read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > 120]
    assert len(MODULES) >= 15 and long == [], long


def test_the_position_schemes_are_listed_once_in_model_js_and_imported_everywhere_else():
    """The one list of schemes in JavaScript is model.js's SCHEMES, config.SCHEMES in the same order; no other file
    writes the four names out as a list (experiments.js's POSITIONS.schemes and page.js's picker read SCHEMES)."""
    listing = re.compile(r"""["']learned["'],\s*["']none["'],\s*["']sinusoidal["'],\s*["']rope["']""")
    found = {name: len(listing.findall((EXPLORER / name).read_text(encoding="utf-8")))
             for name in [*MODULES, "index.html"]}
    assert {name: n for name, n in found.items() if n} == {"model.js": 1}
    model_js = (EXPLORER / "model.js").read_text(encoding="utf-8")
    assert f"export const SCHEMES = Object.freeze({json.dumps(list(config.SCHEMES))});" in model_js
    for name in ("experiments.js", "page.js", "checkpoint.js"):
        imports = re.search(r'import \{([^}]*)\} from "\./model\.js"', (EXPLORER / name).read_text(encoding="utf-8"))
        assert imports and "SCHEMES" in imports.group(1), name


# ----------------------------------------------------------------------------------------------------------------
# Every module, loaded as an ES module

LOAD = """async (name) => {
  try {
    await import(`./${name}`);
    return null;
  } catch (e) {
    return `${e.name}: ${e.message}`;
  }
}"""


def test_every_module_of_the_explorer_loads_as_an_es_module_and_the_page_without_data_says_how_to_get_it(browser):
    """Each module is imported by a page at the folder's address, index.html without its own script, so that page.js
    finds the page it draws; an uncaught error of the page while a module loads counts as that module's. Without
    data/: the page opened without explore.py, or with data/ of an earlier format."""
    html = re.sub(r'\s*<script type="module" src="page\.js"></script>', "",
                  (EXPLORER / "index.html").read_text(encoding="utf-8"))
    assert "<script" not in html  # the page has one script, page.js: here every module is imported by hand
    got = {}
    with served(EXPLORER) as url:
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        page.route(f"{url}/modules.html", lambda route: route.fulfill(status=200, content_type="text/html",
                                                                      body=html))
        page.route(f"{url}/data/**", lambda route: route.fulfill(status=404))  # (as if explore.py never ran here)
        try:
            page.goto(f"{url}/modules.html")
            for name in MODULES:
                before = len(errors)
                problem = page.evaluate(LOAD, name)
                if problem is None and name == "page.js":
                    page.wait_for_function("window.ready === true", timeout=30_000)
                got[name] = problem or (" ".join(errors[before:]) if errors[before:] else None)
            said = page.inner_text("#page-message")
        finally:
            page.close()
    assert {name: why for name, why in got.items() if why} == {}
    assert "Run python3 explore.py" in said and "data/manifest.json (HTTP 404)" in said, said
    # an export of an earlier format (the page's files updated, data/ not exported again): the same message
    with served(EXPLORER) as url:
        page = browser.new_page()
        page.route(f"{url}/data/manifest.json", lambda route: route.fulfill(
            status=200, content_type="application/json", body='{"format": "one-block explorer data v1"}'))
        try:
            page.goto(f"{url}/index.html")
            page.wait_for_function("window.ready === true", timeout=30_000)
            said = page.inner_text("#page-message")
        finally:
            page.close()
    assert ('data/manifest.json is an export of format "one-block explorer data v1", not "one-block explorer data'
            ' v2". Run python3 explore.py') in said, said


# ----------------------------------------------------------------------------------------------------------------
# model.js's config is config.py's ModelConfig


def python_checked(fields):
    """"ok", or ModelConfig.checked's message, for a config of these fields."""
    try:
        ModelConfig(**fields).checked()
    except ValueError as e:
        return str(e)
    return "ok"


CHECKED_JS = """(cases) => cases.map((fields) => {
  try {
    model.checked(model.model_config(fields));
    return "ok";
  } catch (e) {
    return e.message;
  }
})"""

SIZES = {"vocab": 96, "d": 16, "hidden": 64, "max_len": 64}
CHECKED_CASES = [
    SIZES,
    {**SIZES, "blocks": 2, "heads": 4, "positions": "rope"},
    {"vocab": 100, "d": 8, "hidden": 32, "max_len": 48, "heads": 2, "positions": "sinusoidal"},
    {**SIZES, "blocks": 3, "heads": 16, "positions": "none"},
    {**SIZES, "positions": "sinusoidal"},  # one block and one head, of a scheme model.py lacks
    {**SIZES, "heads": 3},  # does not divide d
    {**SIZES, "d": 15, "hidden": 60, "positions": "rope"},  # an odd width to turn in pairs
    {**SIZES, "d": 6, "heads": 2, "positions": "rope"},  # heads of an odd width
    {**SIZES, "heads": 32},
    {**SIZES, "heads": 0},
]


def test_the_js_config_is_checked_with_model_configs_messages(modules_page):
    """The sizes the page checks (a config whose scheme the learner picks, whose sizes a checked file gave)."""
    want = [python_checked(fields) for fields in CHECKED_CASES]
    assert modules_page.evaluate(CHECKED_JS, CHECKED_CASES) == want
    assert want.count("ok") == 5 and len(set(want)) == len(want) - 4  # every bad case its own message


IMPLIED_JS = """(cases) => cases.map((fields) => {
  const config = model.model_config(fields);
  return {shapes: [...model.each_param(config)],
          count: model.parameter_count(config), grown: model.is_grown(config),
          seed_problem: model.seed_problem(config), frozen: Object.isFrozen(config), fields: Object.entries(config)};
})"""


def test_the_js_config_implies_what_model_config_implies(modules_page):
    """The parameters' names, shapes and count, and whether model.py runs it (seed_problem), for every good config;
    the config itself frozen, with ModelConfig's fields in order. (The JSON the page writes for a config, and reads
    back: tests/test_one_config.py, on every config.)"""
    good = [fields for fields in CHECKED_CASES if python_checked(fields) == "ok"]
    got = modules_page.evaluate(IMPLIED_JS, good)
    for fields, js in zip(good, got, strict=True):
        cfg = ModelConfig(**fields)
        assert [(name, tuple(shape)) for name, shape in js["shapes"]] == list(cfg.param_shapes().items())
        assert js["count"] == cfg.parameter_count() and js["grown"] == cfg.grown
        assert js["seed_problem"] == cfg.seed_problem()
        assert js["frozen"] and [tuple(item) for item in js["fields"]] == list(dataclasses.asdict(cfg).items())
    assert {js["seed_problem"] is None for js in got} == {True, False}  # model.py runs one, and not another
    assert any("positions 'sinusoidal'" in (js["seed_problem"] or "") for js in got)  # (one block, another scheme)


FROM_JSON_JS = """(cases) => cases.map(([text, grown]) => {
  try {
    const config = model.config_from_json(ckpt.read_json(text, "config", model.JSON_KEYS), grown);
    return {config: Object.entries(config), frozen: Object.isFrozen(config)};
  } catch (e) {
    return {error: true};
  }
})"""

ONE = '"vocab": 96, "d": 16, "hidden": 64, "max_len": 64'
FROM_JSON_CASES = [
    (f'{{{ONE}, "use_positions": true}}', None),  # from before the schemes: the switch says learned
    (f'{{{ONE}, "use_positions": false}}', False),  # ... and none
    (f'{{{ONE}, "use_positions": false, "positions": "sinusoidal"}}', None),
    (f'{{{ONE}, "blocks": 2, "heads": 4, "use_positions": false, "positions": "rope"}}', True),
    (f'{{{ONE}, "blocks": 2, "heads": 4, "use_positions": false, "positions": "rope"}}', None),
    (f'{{{ONE}, "blocks": 2, "heads": 4, "use_positions": false, "positions": "rope"}}', False),  # not version 1
    (f'{{{ONE}, "heads": 2, "use_positions": true}}', True),  # version 2 without blocks
    (f'{{{ONE}, "heads": 2, "use_positions": true}}', None),
    ('[1, 2]', None),
    ('"config"', None),
    ("null", None),
    ("3.5", None),
    ('{"vocab": 96, "layers": 2}', None),
    ('{"' + "k" * 200 + '": 1}', None),
    ('{"vocab": 96, "d": "16"}', None),
    ('{"vocab": 96, "d": 16.0, "hidden": 64, "max_len": 64, "use_positions": true}', None),
    ('{"vocab": 0, "d": 16, "hidden": 64, "max_len": 64, "use_positions": true}', None),
    ('{"vocab": true, "d": 16, "hidden": 64, "max_len": 64, "use_positions": true}', None),
    ('{"vocab": 96, "d": 16, "max_len": 64, "use_positions": true}', None),
    (f'{{{ONE}, "blocks": 0, "use_positions": true}}', None),
    (f'{{{ONE}}}', None),
    (f'{{{ONE}, "use_positions": "yes"}}', None),
    (f'{{{ONE}, "use_positions": false, "positions": "rotary"}}', None),
    (f'{{{ONE}, "use_positions": false, "positions": 3}}', None),
    (f'{{{ONE}, "use_positions": true, "positions": "none"}}', None),
    (f'{{{ONE}, "use_positions": false, "positions": "learned"}}', None),
]


def test_the_js_config_reads_a_checkpoints_json_as_model_config_from_json_does(modules_page):
    """The same configs from the same JSON (a file's JSON read with Python's ints and floats: checkpoint.js's
    read_json), and a refusal of every JSON Python refuses, with grown true (versions 2 and 3), false (version 1) or
    null (the page's words are its own)."""
    got = modules_page.evaluate(FROM_JSON_JS, FROM_JSON_CASES)
    for (text, grown), js in zip(FROM_JSON_CASES, got, strict=True):
        try:
            cfg = ModelConfig.from_json(json.loads(text), grown)
            want = {"config": [list(item) for item in dataclasses.asdict(cfg).items()], "frozen": True}
        except ValueError:
            want = {"error": True}
        assert js == want, text
    read = [js for js in got if "config" in js]
    assert len(read) == 6 and {dict(js["config"])["positions"] for js in read} == {"learned", "none", "sinusoidal",
                                                                                    "rope"}


CHECK_PARAMS_JS = """(fields) => {
  const config = model.model_config(fields), p = model.init_params(config, 3);
  const { Wq, ...without } = p;
  const cases = [p, { ...p, W1: model.matrix(4, 9) }, { ...p, b1: model.matrix(8, 1) },
    { ...p, extra: new Float64Array(1) }, without, { ...p, "block1.W2": { rows: 8, cols: 4, data: [0] } }];
  return cases.map((params) => {
    try {
      model.check_params(params, config);
      return null;
    } catch (e) {
      return e.message;
    }
  });
}"""


def test_a_js_parameter_dict_that_does_not_fit_its_config_is_refused_naming_the_tensor(modules_page):
    """What forward and backward hold their parameters to (numpy_model.check_params's rule; the words are the
    page's): every tensor of the config's, of its shape, a matrix's numbers a Float64Array of them all, and no other
    tensor."""
    got = modules_page.evaluate(CHECK_PARAMS_JS, dataclasses.asdict(ModelConfig(96, 4, 8, 8, blocks=2)))
    assert got == [None, "parameter W1 is not a tensor of shape [4, 8]", "parameter b1 is not a tensor of shape [8]",
                   "the parameters hold tensors that a model of 2 blocks x 1 head does not have",
                   "parameter Wq is not a tensor of shape [4, 4]",
                   "parameter block1.W2 is not a tensor of shape [8, 4]"]


# ----------------------------------------------------------------------------------------------------------------
# The page's checkpoint writer, read by checkpoint.py

WRITE_JS = """([fields, rng_words, names]) => {
  const config = model.model_config(fields), params = model.init_params(config, 3);
  const zeros = Object.fromEntries(Object.entries(params).map(([name, t]) => [name,
    t instanceof Float64Array ? new Float64Array(t.length) : model.matrix(t.rows, t.cols)]));
  const run = { backend: "explorer", dtype: "float64", seed: 3, steps: 10 };
  const training = { ...run, positions: config.positions, blocks: config.blocks, heads: config.heads };
  return Array.from(ckpt.checkpoint_bytes({ params, moments: [zeros, zeros], step: 0, rng_words, config, training },
    { tokenizer_sha256: "0".repeat(64), checkpoint: names }));
}"""


def test_the_pages_checkpoint_records_the_model_once_as_checkpoint_py_does(modules_page):
    """A file the page writes (its Download button's checkpoint_bytes): a one-block model as version 1, with positions
    but no blocks or heads in its training, as before models could grow."""
    from oneblock import checkpoint, export

    rng_words = list(random.Random(3).getstate()[1])
    names = {name.lower(): getattr(checkpoint, name) for name in export.PAGE_CHECKPOINT}  # as manifest.json's
    run = {"backend": "explorer", "dtype": "float64", "seed": 3, "steps": 10}
    for cfg, version, training in ((ModelConfig(96, 4, 8, 8, blocks=2, heads=2, positions="rope"), "3", run),
                                   (ModelConfig(96, 4, 8, 8, positions="none"), "1", {**run, "positions": "none"})):
        raw = bytes(modules_page.evaluate(WRITE_JS, [dataclasses.asdict(cfg), rng_words, names]))
        ckpt = checkpoint.load_bytes(raw, "explorer.safetensors")
        assert (ckpt["metadata"]["format_version"], ckpt["config"], ckpt["training"]) == (version, cfg, training)
