"""Time the explorer's live training run in headless Chromium, beside train.py's NumPy path on the same settings.

    python3 -m dev.bench_explorer                # the page's default run: 2000 steps of 8 x 64 tokens, then NumPy
    python3 -m dev.bench_explorer --steps 700    # a shorter run (enough to pass a validation loss of 0.6)
    python3 -m dev.bench_explorer --json PATH    # also write the figures as JSON
    python3 -m dev.bench_explorer --screenshot docs/figures/explorer.png   # and the picture of the page after it

Not a test: it measures and reports. The page run is what a learner gets from the Train panel's Start button: fresh
seed-3 weights, train.js in a Web Worker, plain float64 sums, validation on the 300 held-out stories every 100 steps.
The NumPy runs are train.py's loop (oneblock/training.py's train) on the same settings, seed and batches, in float64 and
in train.py's default float32, on one BLAS thread, in this process after the browser has closed. For each run: training
tokens per second (the steps alone, as train.py counts them), the wall time until the validation loss first falls below
--target (0.6 nats/token by default: the explorer's aim is to get there within 60 s on a 2-core machine), and the
validation loss at the end. The machine's load average is printed with the figures, because on a shared machine they
move with it.

Needs what the browser tests need: Playwright (tests/requirements.txt) and a system Chromium; and NumPy.
"""

import argparse
import io
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from atomic import write_atomic
from oneblock import data as data_files, machine, training
from oneblock.export import export_site, read_weights
from oneblock.server import make_server
from oneblock.settings import Settings, checked

PAGE_DEFAULTS = {"steps": 2000, "batch": 8, "seq_len": 64, "lr": 0.01, "min_lr": 0.001, "warmup": 100,
                 "eval_every": 100, "seed": 3}  # explorer/train.js DEFAULTS and the Train panel's seed


# ----------------------------------------------------------------------------------------------------------------
# The page's run in Chromium


def page_run(steps, batch, timeout, screenshot=None):
    """The Train panel's default run with steps and batch: {"vals": [[step, val, seconds]], "tokens_per_s",
    "wall", "browser"}. screenshot: a path for a picture of the whole page after the run, with a greedy sample and
    the gradient check shown."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        export_site(tmp, *read_weights(Path(tmp) / "none.safetensors", explicit=False))
        server = make_server(tmp, 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=machine.find_chromium(), args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"http://127.0.0.1:{server.server_port}/index.html")
                page.wait_for_function("window.ready === true")
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
                version = browser.version.split(".")[0]
                if screenshot and run["done"]:
                    show_off(page, screenshot)
                browser.close()
        finally:
            server.shutdown()
            server.server_close()
    if not run["done"]:
        raise RuntimeError(f"the page's run did not finish: {run['message']}")
    return {"vals": run["vals"], "tokens_per_s": run["tokens_per_s"], "wall": wall, "browser": f"Chromium {version}"}


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
    write_atomic(path, palette_png(page.screenshot(full_page=True)))


def palette_png(raw):
    """A PNG with a 256-colour palette: as sharp for a page of flat colours and text, at about a third of the bytes.
    (Pillow comes with matplotlib, which tests/requirements.txt pins.)"""
    from PIL import Image

    out = io.BytesIO()
    image = Image.open(io.BytesIO(raw)).convert("RGB")
    palette = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    palette.save(out, "PNG", optimize=True)
    return out.getvalue()


# ----------------------------------------------------------------------------------------------------------------
# train.py's NumPy path on the same settings


def numpy_run(steps, batch, dtype):
    """train.py's training with the page's settings: {"vals": [[step, val, seconds]], "tokens_per_s", "wall"}."""
    s = PAGE_DEFAULTS | {"steps": steps, "batch": batch}
    settings = checked(Settings(steps=s["steps"], batch=s["batch"], seq_len=s["seq_len"], lr=s["lr"],
                                min_lr=s["min_lr"], warmup=min(s["warmup"], steps), eval_every=s["eval_every"],
                                seed=s["seed"], dtype=dtype, quiet=True))
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
    p = argparse.ArgumentParser(description="Time the explorer's training in headless Chromium beside train.py's"
                                            " NumPy path on the same settings.", allow_abbrev=False)
    p.add_argument("--steps", type=int, default=PAGE_DEFAULTS["steps"],
                   help="optimiser steps (default: the page's %(default)s)")
    p.add_argument("--batch", type=int, default=PAGE_DEFAULTS["batch"],
                   help="windows of 64 tokens per step (default: the page's %(default)s)")
    p.add_argument("--target", type=float, default=0.6,
                   help="report the time until the validation loss first falls below this (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=900, help="give up on the page's run after this many seconds"
                                                              " (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    p.add_argument("--screenshot", metavar="PATH", help="also write a picture of the whole page after its run (PNG)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch < 1:
        p.error(f"--steps and --batch must be at least 1, got {args.steps} and {args.batch}")
    machine.need("numpy", "python3 -m dev.bench_explorer")  # for train.py's runs beside the page's
    machine.need("playwright", "python3 -m dev.bench_explorer")
    if machine.find_chromium() is None:
        print("error: no Chromium found (chromium, chromium-browser or google-chrome on PATH)", file=sys.stderr)
        return 2

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{args.steps} steps of {args.batch} x 64 tokens, lr 0.01 -> 0.001 after 100 warm-up steps, seed 3,"
          f" validation on 300 stories every 100 steps; {os.cpu_count()} CPUs, load average {load:.1f} at the start")
    try:
        runs = {"page": page_run(args.steps, args.batch, args.timeout, args.screenshot)}
        runs["numpy-float64"] = numpy_run(args.steps, args.batch, "float64")
        runs["numpy-float32"] = numpy_run(args.steps, args.batch, "float32")
    except RuntimeError as e:  # a run that diverged or did not finish
        print(f"error: {e}", file=sys.stderr)
        return 1

    print(f"{'run':<32} {'tokens/s':>9}   {'time to val < ' + format(args.target, 'g'):<22} {'val end':>8}"
          f" {'wall':>9}")
    print(row(f"page ({runs['page']['browser']}, f64)", runs["page"], args.target))
    print(row("numpy float64 (train.py)", runs["numpy-float64"], args.target))
    print(row("numpy float32 (train.py)", runs["numpy-float32"], args.target))
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
    if args.json:
        write_atomic(args.json, json.dumps({"settings": PAGE_DEFAULTS | {"steps": args.steps, "batch": args.batch},
                                            "load_average": load, "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
