"""Time the explorer's live training run in headless Chromium, beside train.py's NumPy path on the same settings, and
the page's second-block experiment.

    python3 -m dev.bench_explorer                # the page's default run: 2000 steps of 8 x 64 tokens, then NumPy
    python3 -m dev.bench_explorer --steps 700    # a shorter run (enough to pass a validation loss of 0.6)
    python3 -m dev.bench_explorer --against REV --rounds 3   # and the page of git revision REV, in turns
    python3 -m dev.bench_explorer --json PATH    # also write the figures as JSON
    python3 -m dev.bench_explorer --screenshot docs/figures/explorer.png   # and the picture of the page after it
    python3 -m dev.bench_explorer --depth-screenshot docs/figures/explorer-depth.png   # and of the experiment
    python3 -m dev.bench_explorer --tricks       # only explorer/fast.js's tricks, each against its plain line

Not a test: it measures and reports, with the machine's load average (the figures move with it). The page run is
the Train panel's Start (train.js in a Web Worker, float64); the NumPy runs are train.py's loop on the same settings,
seed and batches, in float64 and float32, on one BLAS thread; tokens per second count the steps alone, as train.py
does. Then the second-block experiment's Start (explorer/experiments.js DEPTH). The aims (validation below --target
within 60 s; two blocks past 90% copy accuracy within 120 s) and the figures: docs/developers.md, "How fast the
explorer trains". --against REV is a git revision of this repository, or a folder holding a checkout of it (its
explorer/ files are served with this version's data).

Needs what dev/chromium.py needs, NumPy, and git for --against REV.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from atomic import folder_for, output_problem, resolved, write_atomic
from dev import figures_judge, load_average, positive
from dev.chromium import is_png, need_browser, served_page, write_picture
from oneblock import data as data_files, machine, training
from oneblock.data import ROOT
from oneblock.export import PAGE_SUFFIXES
from oneblock.settings import Settings, checked

PAGE_DEFAULTS = {"steps": 2000, "batch": 8, "seq_len": 64, "lr": 0.01, "min_lr": 0.001, "warmup": 100,
                 "eval_every": 100, "seed": 3}  # explorer/train.js DEFAULTS and the Train panel's seed


# ----------------------------------------------------------------------------------------------------------------
# The page's run in Chromium


def page_run(steps, batch, timeout, screenshot=None, page_files=None):
    """The Train panel's default run with steps and batch: {"vals": [[step, val, seconds]], "tokens_per_s",
    "wall", "browser"}. screenshot: a path for a picture of the whole page after the run, with a greedy sample and
    the gradient check shown. page_files: another version's page (see served_page)."""
    with served_page(page_files) as (page, version):
        page.fill("#train-steps", str(steps))
        page.fill("#train-batch", str(batch))
        started = time.perf_counter()
        page.click("#train-start")
        page.wait_for_function("explorer.state.training?.done === true || explorer.state.training?.ended",
                               timeout=timeout * 1000, polling=250)
        wall = time.perf_counter() - started
        run = page.evaluate("() => { const r = explorer.state.training;"
                            " return {vals: r.vals, tokens_per_s: r.tokens_per_s, done: !!r.done,"
                            " message: document.querySelector('#train-message').textContent}; }")
        if screenshot and run["done"]:
            show_off(page, screenshot)
    if not run["done"]:
        raise RuntimeError(f"the page's run did not finish: {run['message']}")
    return {"vals": run["vals"], "tokens_per_s": run["tokens_per_s"], "wall": wall, "browser": f"Chromium {version}"}


def depth_run(steps, timeout, screenshot=None):
    """The second-block experiment's Start (with steps, if given, in place of its own): {"settings", "passed" (the
    step and the seconds after Start at which two blocks first passed 90% copy accuracy, and one block's accuracy
    then; or None), "final" ({blocks: copy accuracy at the end}), "best_one_block", "tokens_per_s" ({blocks: ...}),
    "evals" ({blocks: [[step, copy accuracy, copy loss, seconds], ...]}), "scores" ({blocks: each head's scores at the
    end}), "maps" ({blocks: the attention maps drawn}), "summary" (the panel's line), "wall"}. screenshot: a path for
    a picture of the experiment's panel after the run."""
    with served_page() as (page, version):
        if steps is not None:
            page.fill("#depth-steps", str(steps))
        started = time.perf_counter()
        page.click("#depth-start")
        page.wait_for_function("explorer.modules.experiments.runs.depth?.ended === true", timeout=timeout * 1000,
                               polling=500)
        wall = time.perf_counter() - started
        run = page.evaluate("() => { const {runs, DEPTH} = explorer.modules.experiments, r = runs.depth;"
                            " return {settings: {...DEPTH, ...r.fields}, passed: r.passed,"
                            " message: document.querySelector('#depth-message').textContent,"
                            " summary: document.querySelector('#depth-summary').textContent,"
                            " models: r.models.map((m) => ({blocks: m.blocks, done: m.done, evals: m.evals,"
                            " tokens_per_s: m.tokens_per_s, scores: m.latest?.measures.scores, maps:"
                            " document.querySelectorAll(`#depth-model-${m.blocks} .maps canvas`).length}))}; }")
        if screenshot:  # (a locator's screenshot scrolls it into view first)
            write_picture(screenshot, page.locator("#depth-panel").screenshot())
    if not all(m["done"] for m in run["models"]):
        raise RuntimeError(f"the second-block experiment did not finish: {run['message']}")
    by_blocks = {m["blocks"]: m for m in run["models"]}
    return {"settings": run["settings"], "passed": run["passed"], "browser": f"Chromium {version}",
            "final": {b: m["evals"][-1][1] for b, m in by_blocks.items()},
            "best_one_block": max(e[1] for e in by_blocks[1]["evals"]),
            "tokens_per_s": {b: m["tokens_per_s"] for b, m in by_blocks.items()},
            "evals": {b: m["evals"] for b, m in by_blocks.items()},
            "scores": {b: m["scores"] for b, m in by_blocks.items()},
            "maps": {b: m["maps"] for b, m in by_blocks.items()}, "summary": run["summary"], "wall": wall}


TIME_TRICKS = """(rounds) => {  // {trick: [us per call of the plain line, of the trick]}: medians, in turns
  const {fast, model, random} = explorer.modules;
  const rng = new random.Random(0);
  const filled = (n) => Float64Array.from({length: n}, () => rng.gauss(0.0, 1.0));
  const T = 64, d = 16, V = 96;
  const hf = filled(T * d), w_out = filled(d * V), O = new Float64Array(T * V); // (T, d), (d, V), (T, V)
  const q = filled(T * d), k = filled(T * d), e = new Float64Array(T); // (T, d) each, (T,)
  const w = filled(T * T), ctx = new Float64Array(T * d); // (T, T), (T, d)
  const config = model.model_config({vocab: V, d, hidden: 64, max_len: T}); // one block, one head, learned
  const params = model.init_params(config, 3);
  const ids = Array.from({length: T + 1}, (_, i) => (i * 37 + 11) % V);
  const pool = {buffers: []};
  const window = () => model.loss_and_grads(params, ids.slice(0, -1), ids.slice(1), config, model.PLAIN);
  const cases = {
    // the logits of a window: hf (T, d) times W_out (d, V), as model.matmul calls it
    products: [(f) => f(hf, d, 1, w_out, 1, V, O, T, V, d), fast.PLAIN_LINES.products, fast.TRICKS.products],
    // one head's scores, every row i: q_i against the keys j <= i, as attention_forward calls it
    rows_dots: [(f) => { for (let i = 0; i < T; i++) f(q, i * d, k, 0, d, i + 1, d, e); },
                fast.PLAIN_LINES.rows_dots, fast.TRICKS.rows_dots],
    // one head's context, every row i: the weights of row i times the values j <= i
    weighted_rows: [(f) => { for (let i = 0; i < T; i++) f(w, i * T, 1, i + 1, k, 0, d, d, ctx, i * d); },
                    fast.PLAIN_LINES.weighted_rows, fast.TRICKS.weighted_rows],
    // a window's forward and backward pass, its matrices made fresh or taken from the pool
    pool: [(f) => f(), window, () => fast.reusing(pool, window)],
  };
  const out = {};
  for (const [name, [call, plain, trick]] of Object.entries(cases)) {
    const times = {plain: [], trick: []};
    for (let r = 0; r < rounds; r++) {
      for (const [kind, f] of [["plain", plain], ["trick", trick]]) {
        let n = 0;
        const t0 = performance.now();
        while (performance.now() - t0 < 100) {
          call(f);
          n += 1;
        }
        times[kind].push(1000 * (performance.now() - t0) / n);
      }
    }
    const median = (xs) => xs.slice().sort((a, b) => a - b)[(xs.length - 1) >> 1];
    out[name] = [median(times.plain), median(times.trick)];
  }
  return out;
}"""


def page_of(against):
    """{name: bytes} of the explorer page of against: a folder holding a checkout of this repository, or a git
    revision of it. A ValueError says why neither works."""
    folder = Path(against) / "explorer"
    if folder.is_dir():
        return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix in PAGE_SUFFIXES}
    try:
        names = subprocess.run(["git", "ls-tree", "--name-only", f"{against}:explorer"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout.split()
        return {name: subprocess.run(["git", "show", f"{against}:explorer/{name}"], cwd=ROOT, check=True,
                                     capture_output=True).stdout
                for name in names if Path(name).suffix in PAGE_SUFFIXES}
    except (OSError, subprocess.CalledProcessError) as e:
        why = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) else str(e)
        raise ValueError(f"--against {against!r} is neither a folder holding a checkout of this repository (with"
                         f" explorer/ in it) nor a git revision of it ({why})") from None


def show_off(page, path):
    """Fill the panels a reader looks at first (a greedy sample, the gradient check), then picture the whole page."""
    page.fill("#sample-prompt", "mia has a")
    page.fill("#sample-temperature", "0")
    page.fill("#sample-tokens", "60")
    page.click("#sample-go")
    page.wait_for_function("document.querySelector('#sample-out').dataset.done === 'true'", timeout=120_000)
    page.click("#check-go")
    page.wait_for_function("document.querySelector('#check-status').textContent.includes('numbers checked')",
                           timeout=120_000)
    page.click("#chips .chip[data-position='25']")  # "... now leo has the": the colour, said 24 tokens earlier?
    write_picture(path, page.screenshot(full_page=True))


# ----------------------------------------------------------------------------------------------------------------
# train.py's NumPy path on the same settings


def numpy_run(steps, batch, dtype):
    """train.py's training with the page's settings: {"vals": [[step, val, seconds]], "tokens_per_s", "wall"}."""
    s = PAGE_DEFAULTS | {"steps": steps, "batch": batch, "warmup": min(PAGE_DEFAULTS["warmup"], steps)}
    settings = checked(Settings(**s, dtype=dtype, quiet=True))  # (PAGE_DEFAULTS's names are Settings' own)
    data = data_files.prepare(settings)  # (read before the clock starts, as the page has its data before it trains)
    times = []  # when each validation loss line was reported
    started = time.perf_counter()
    result = training.train(settings, data, report=lambda line: times.append(time.perf_counter() - started))
    wall = time.perf_counter() - started
    if result.failure:
        raise RuntimeError(result.failure[0])
    vals = [[h["step"], h["val"], t] for h, t in zip(result.history, times)]  # full precision, not the printed line
    return {"vals": vals, "tokens_per_s": steps * batch * s["seq_len"] / result.train_seconds, "wall": wall}


# ----------------------------------------------------------------------------------------------------------------
# The report


def time_to(vals, target):
    """(seconds, step) of the first validation loss below target, or None.

    >>> time_to([[0, 4.5, 0.2], [100, 0.9, 3.0], [200, 0.55, 6.5]], 0.6)
    (6.5, 200)
    """
    return next(((sec, step) for step, val, sec in vals if val < target), None)


def row(name, run, target):
    hit = time_to(run["vals"], target)
    reached = f"{hit[0]:7.1f} s (step {hit[1]})" if hit else "     not reached"
    return (f"{name:<32} {run['tokens_per_s']:>9,.0f}   {reached:<22} {run['vals'][-1][1]:>8.4f} {run['wall']:>7.1f} s")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--steps", type=positive(int), default=PAGE_DEFAULTS["steps"],
                   help="optimiser steps (default: the page's %(default)s)")
    p.add_argument("--batch", type=positive(int), default=PAGE_DEFAULTS["batch"],
                   help="windows of 64 tokens per step (default: the page's %(default)s)")
    p.add_argument("--target", type=float, default=0.6,
                   help="report the time until the validation loss first falls below this (default: %(default)s)")
    p.add_argument("--against", metavar="REV",
                   help="also run the page of REV (a git revision of this repository, or a folder holding a checkout"
                        " of it), in turns with this one, and compare their tokens per second")
    p.add_argument("--rounds", type=positive(int), default=1,
                   help="page runs of each version, in turns, whose median tokens per second is reported (default:"
                        " %(default)s)")
    p.add_argument("--depth-steps", type=positive(int), default=None,
                   help="steps of the second-block experiment (default: the page's, explorer/experiments.js DEPTH)")
    p.add_argument("--timeout", type=positive(float), default=900,
                   help="give up on a page's run after this many seconds (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    p.add_argument("--screenshot", metavar="PATH", help="also write a picture of the whole page after its run (PNG)")
    p.add_argument("--depth-screenshot", metavar="PATH",
                   help="also write a picture of the second-block experiment after its run (PNG)")
    p.add_argument("--tricks", action="store_true",
                   help="only time explorer/fast.js's tricks against the plain lines they replace, in the page")
    args = p.parse_args(argv)
    outputs = (("--json", args.json, "a JSON of dev.bench_explorer's figures", figures_judge({"settings", "runs"}),
                "bench.json"),
               ("--screenshot", args.screenshot, "a PNG picture", is_png, "explorer.png"),
               ("--depth-screenshot", args.depth_screenshot, "a PNG picture", is_png, "explorer-depth.png"))
    for flag, path, *kind in outputs:  # judged before minutes of page runs, never after them
        problem = path and output_problem(path, flag, *kind)
        if problem:
            p.error(problem)
    machine.need("numpy", "python3 -m dev.bench_explorer")  # for train.py's runs beside the page's
    need_browser("python3 -m dev.bench_explorer")
    load = (load_average() or [float("nan")])[0]
    if args.tricks:
        with served_page() as (page, version):  # rounds of 0.1 s each, the two sides on the same inputs
            gains = page.evaluate(TIME_TRICKS, args.rounds if args.rounds > 1 else 7)
        print(f"explorer/fast.js's tricks against the plain lines they replace, in Chromium {version}, microseconds"
              f" per call, medians; {os.cpu_count()} CPUs, load average {load:.1f}")
        for name, (plain, trick) in gains.items():
            print(f"{name:<16} plain {plain:>9.1f}   trick {trick:>9.1f}   {plain / trick:.2f}x")
        return 0
    try:
        before = page_of(args.against) if args.against is not None else None
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    print(f"{args.steps} steps of {args.batch} x 64 tokens, lr 0.01 -> 0.001 after 100 warm-up steps, seed 3,"
          f" validation on 300 stories every 100 steps; {os.cpu_count()} CPUs, load average {load:.1f} at the start")
    try:
        pages, befores = [], []
        for n in range(args.rounds):
            if before is not None:
                befores.append(page_run(args.steps, args.batch, args.timeout, page_files=before))
                print(f"round {n + 1}: page of {args.against}: {befores[-1]['tokens_per_s']:,.0f} tokens/s",
                      file=sys.stderr, flush=True)
            last = n == args.rounds - 1
            pages.append(page_run(args.steps, args.batch, args.timeout, args.screenshot if last else None))
            print(f"round {n + 1}: this page: {pages[-1]['tokens_per_s']:,.0f} tokens/s", file=sys.stderr, flush=True)
        runs = {"page": median_run(pages)}
        if before is not None:
            runs["before"] = median_run(befores)
        runs["numpy-float64"] = numpy_run(args.steps, args.batch, "float64")
        runs["numpy-float32"] = numpy_run(args.steps, args.batch, "float32")
        depth = depth_run(args.depth_steps, args.timeout, args.depth_screenshot)
    except RuntimeError as e:  # a run that diverged or did not finish
        print(f"error: {e}", file=sys.stderr)
        return 1

    print(f"{'run':<32} {'tokens/s':>9}   {'time to val < ' + format(args.target, 'g'):<22} {'val end':>8}"
          f" {'wall':>9}")
    print(row(f"page ({runs['page']['browser']}, f64)", runs["page"], args.target))
    if before is not None:
        print(row(f"page of {args.against}"[:32], runs["before"], args.target))
    print(row("numpy float64 (train.py)", runs["numpy-float64"], args.target))
    print(row("numpy float32 (train.py)", runs["numpy-float32"], args.target))
    if before is not None:
        print(f"this page against the page of {args.against}, {args.rounds} runs each in turns: median"
              f" {runs['page']['tokens_per_s']:,.0f} against {runs['before']['tokens_per_s']:,.0f} tokens/s, "
              f"{runs['page']['tokens_per_s'] / runs['before']['tokens_per_s']:.2f}x (each run:"
              f" {speeds(pages)} against {speeds(befores)})")
    pairs = list(zip(runs["page"]["vals"], runs["numpy-float64"]["vals"]))
    close = [a[0] for a, b in pairs if abs(a[1] - b[1]) <= 1e-6 * b[1]]
    together = close[-1] if close == [a[0] for a, _ in pairs[:len(close)]] and close else None
    print(f"page vs numpy float64, the same weights and batches: validation losses agree to 1e-6 relative up to step"
          f" {together}; after that, rounding differences grow as training goes on and the runs end"
          f" {abs(pairs[-1][0][1] - pairs[-1][1][1]):.4f} apart")
    print(f"the page trains at {runs['page']['tokens_per_s'] / runs['numpy-float64']['tokens_per_s']:.3f}x the"
          f" speed of NumPy float64 and {runs['page']['tokens_per_s'] / runs['numpy-float32']['tokens_per_s']:.3f}x"
          f" that of float32")
    hit = time_to(runs["page"]["vals"], args.target)
    verdict = "met" if hit and hit[0] <= 60 else "NOT met"
    print(f"aim, the page's default run below {args.target:g} nats/token within 60 s: {verdict}"
          + (f" ({hit[0]:.1f} s)" if hit else ""))
    print(depth_report(depth))
    if args.json:
        figures = {"settings": PAGE_DEFAULTS | {"steps": args.steps, "batch": args.batch}, "load_average": load,
                   "runs": runs, "rounds": {"page": pages, "before": befores}, "against": args.against, "depth": depth}
        with folder_for(resolved(args.json)):  # (output_problem let a missing folder through: made here)
            write_atomic(resolved(args.json), json.dumps(figures, indent=2) + "\n")
    return 0


def speeds(runs):
    """The runs' tokens per second, in the order they ran.

    >>> speeds([{"tokens_per_s": 21607.4}, {"tokens_per_s": 1e5}])
    '21,607, 100,000'
    """
    return ", ".join(f"{r['tokens_per_s']:,.0f}" for r in runs)


def median_run(runs):
    """The run of median tokens per second (of an even number, the slower of the middle two).

    >>> median_run([{"tokens_per_s": 3}, {"tokens_per_s": 1}, {"tokens_per_s": 2}])
    {'tokens_per_s': 2}
    """
    ranked = sorted(runs, key=lambda r: r["tokens_per_s"])
    return ranked[(len(ranked) - 1) // 2]


def heads_words(scores):
    """Each head's induction and previous-token scores, [[{...} for each head] for each block], in words.

    >>> heads_words([[{"induction": 0.5, "previous_token": 0.25}, {"induction": 0.0, "previous_token": 1.0}]])
    'block 1 head 1 0.50 / 0.25, block 1 head 2 0.00 / 1.00'
    """
    return ", ".join(f"block {b + 1} head {h + 1} {x['induction']:.2f} / {x['previous_token']:.2f}"
                     for b, block in enumerate(scores) for h, x in enumerate(block))


def depth_report(depth):
    """The second-block experiment's lines of the report.

    >>> print(depth_report({"settings": {"steps": 800, "batch": 32, "lr": 0.005, "seed": 3}, "passed": {"step": 450,
    ...     "seconds": 31.6, "one_block": 0.228}, "final": {1: 0.225, 2: 0.999}, "best_one_block": 0.23,
    ...     "tokens_per_s": {1: 55864, 2: 34950}, "wall": 55.3, "scores": {1: [[{"induction": 0.224,
    ...     "previous_token": 0.029}]], 2: [[{"induction": 0.091, "previous_token": 0.254}], [{"induction": 0.971,
    ...     "previous_token": 0.02}]]}}))
    second-block experiment, 800 steps of 32 periodic sequences, lr 0.005, seed 3, one worker per model
      two blocks passed 90% copy accuracy at step 450, 31.6 s after Start (one block then 22.8%)
      at the end: two blocks 99.9%, one block 22.5% (its best 23.0%); 55,864 and 34,950 tokens/s; whole run 55.3 s
      head scores at the end, induction / previous token: one block: block 1 head 1 0.22 / 0.03; two blocks:
      block 1 head 1 0.09 / 0.25, block 2 head 1 0.97 / 0.02
    aim, two blocks above 90% and one block below 40% within 120 s: met
    """
    s = depth["settings"]
    passed = depth["passed"]
    head = (f"second-block experiment, {s['steps']} steps of {s['batch']} periodic sequences, lr {s['lr']:g}, seed"
            f" {s['seed']}, one worker per model\n  ")
    when = (f"two blocks passed 90% copy accuracy at step {passed['step']}, {passed['seconds']:.1f} s after Start (one"
            f" block then {100 * passed['one_block']:.1f}%)" if passed else "two blocks did not pass 90% copy accuracy")
    final, speed = depth["final"], depth["tokens_per_s"]
    one, two = final[1], final[2]
    met = passed is not None and passed["seconds"] <= 120 and depth["best_one_block"] < 0.4
    return (f"{head}{when}\n  at the end: two blocks {100 * two:.1f}%, one block {100 * one:.1f}% (its best"
            f" {100 * depth['best_one_block']:.1f}%); {speed[1]:,.0f} and {speed[2]:,.0f} tokens/s; whole"
            f" run {depth['wall']:.1f} s\n  head scores at the end, induction / previous token: one block:"
            f" {heads_words(depth['scores'][1])}; two blocks:\n  {heads_words(depth['scores'][2])}"
            f"\naim, two blocks above 90% and one block below 40% within 120 s:"
            f" {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
