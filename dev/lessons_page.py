"""Drive the explorer's lessons view (explorer/lessons.js) in headless Chromium: time every lesson at the settings the
page offers, and draw the picture of one reveal.

    python3 -m dev.lessons_page                    # each lesson, a guess entered and Checked: seconds to its answer
    python3 -m dev.lessons_page --lesson floor     # only these lessons (the flag again for each)
    python3 -m dev.lessons_page --screenshot docs/figures/lessons-reveal.png   # and the picture of one reveal
    python3 -m dev.lessons_page --shot-lesson order --screenshot PATH          # ... of this lesson's reveal

Not a test: it measures and reports. The page is dev/chromium.py's (the untrained seed-3 model); each lesson gets a
guess and Check, exactly as a learner does it, and the time is the page's own, from Check to the reveal (the
lesson's record in localStorage). The lessons that train run with their live settings (docs/lessons.md, "In the
browser") in the page's workers, so the times move with the machine's load, printed beside them; the figures are
docs/lessons.md's last section. The picture is the card of one lesson after its Check. Needs what dev/chromium.py
needs.
"""

import argparse
import os
import sys
import time
from pathlib import Path

from atomic import output_problem
from dev import positive
from dev.chromium import is_png, need_browser, served_page, write_picture
from oneblock import machine

# a guess for each lesson, as a learner types it (a choice by its number); a lesson of the page that is not here
# gets the first choice, or 1
GUESSES = {"tokens": "3", "init-loss": "4.5", "layernorm-variance": "0.95 1", "order": "0 0.001", "causality": "2",
           "finite-difference": "2", "pre-norm": "1", "relu-mlp": "0.5 0.5", "softmax-gradient": "-1",
           "skip-paths": "0.03", "floor": "2", "positions-past-length": "3", "second-block": "1", "scaling": "0.4"}
SHOT_LESSON = "layernorm-variance"  # the reveal docs/figures/lessons-reveal.png shows


# ----------------------------------------------------------------------------------------------------------------
# The page


def run_lesson(page, key, timeout):
    """Enter the lesson's guess, Check, and wait for the reveal: its record {verdict, value, seconds, ...}."""
    card = f"#lesson-{key}"
    kind = page.evaluate("(k) => explorer.modules.lessons.by_key(k).guess[0]", key)
    guess = GUESSES.get(key, "1")
    if kind == "choice":
        page.check(f"{card} input[type=radio][value='{guess}']")
    else:
        page.fill(f"{card} .guess-text", guess)
    page.click(f"{card} button.check")
    page.wait_for_function("(s) => ['revealed', 'skipped'].includes(document.querySelector(s).dataset.state)",
                           arg=card, timeout=timeout * 1000, polling=500)
    return page.evaluate("(k) => JSON.parse(localStorage.getItem(explorer.modules.lessons.STORE))[k]", key)


# ----------------------------------------------------------------------------------------------------------------
# The command line


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--lesson", metavar="KEY", action="append",
                   help="only this lesson (again for more; default: every lesson of the page, in order)")
    p.add_argument("--screenshot", metavar="PATH", help="also write a picture of one lesson's reveal (PNG)")
    p.add_argument("--shot-lesson", metavar="KEY", default=SHOT_LESSON,
                   help="the lesson whose reveal --screenshot pictures (default: %(default)s)")
    p.add_argument("--timeout", type=positive(float), default=600,
                   help="give up on a lesson after this many seconds (default: %(default)s)")
    args = p.parse_args(argv)
    problem = args.screenshot and output_problem(args.screenshot, "--screenshot", "a PNG picture", is_png,
                                                 "lessons-reveal.png")
    if problem:
        p.error(problem)
    need_browser("python3 -m dev.lessons_page")
    if args.screenshot:
        machine.need("PIL", "python3 -m dev.lessons_page --screenshot")
    with served_page(view="#lessons") as (page, version):  # the untrained seed-3 export, at its lessons
        keys = page.evaluate("() => explorer.modules.lessons.LESSONS.map((l) => l.key)")
        wanted = args.lesson or keys
        unknown = [key for key in wanted + ([args.shot_lesson] if args.screenshot else []) if key not in keys]
        if unknown:
            print(f"error: no lesson {unknown[0]!r} in the page; expected one of: {', '.join(keys)}", file=sys.stderr)
            return 2
        if args.screenshot and args.shot_lesson not in wanted:
            wanted = [*wanted, args.shot_lesson]
        print(f"the explorer's lessons in headless Chromium {version}, the seed-3 weights; {os.cpu_count()} CPUs,"
              f" load average {os.getloadavg()[0]:.1f} at the start")
        print(f"{'lesson':<24}{'guess':>8}  {'verdict':<8}{'seconds':>9}  answer")
        started = time.perf_counter()
        for key in wanted:
            record = run_lesson(page, key, args.timeout)
            answer = record.get("skipped") or record["value"]
            seconds = record.get("seconds")
            print(f"{key:<24}{record['text']:>8}  {record.get('verdict', 'skipped'):<8}"
                  f"{'' if seconds is None else f'{seconds:9.2f}'}  {answer}")
        print(f"all {len(wanted)} in {time.perf_counter() - started:.1f} s; load average {os.getloadavg()[0]:.1f} at"
              f" the end")
        if args.screenshot:
            write_picture(args.screenshot, page.locator(f"#lesson-{args.shot_lesson}").screenshot())  # (scrolled to)
            print(f"wrote {args.screenshot} ({Path(args.screenshot).stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
