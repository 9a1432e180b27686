"""Predict, then check: the lab's lessons in the terminal, each answered live (docs/lessons.md, "Running them").

    python3 -m experiments.lessons [--list] [--lesson KEY [--guess TEXT]] [--ckpt PATH]

q, or the end of input, stops (status 0); a bad --lesson, --ckpt or --guess is one line on stderr, "error: ...",
with status 2.
"""

import argparse
import sys

from oneblock import lessons


def scripted(text):
    """A read function that gives text once (writing it after the prompt, as a terminal would show it), then the end
    of input.

    >>> read = scripted("4")
    >>> read("your guess: ")
    your guess: 4
    '4'
    """
    answers = [text]

    def read(prompt):
        if not answers:
            raise EOFError
        print(prompt + text)
        return answers.pop()

    return read


def main(argv=None):
    p = argparse.ArgumentParser(description="Predict, then check: the lessons of the lab, each answered live.",
                                allow_abbrev=False)
    p.add_argument("--lesson", metavar="KEY", help="only this lesson (--list shows the keys)")
    p.add_argument("--list", action="store_true", help="list the lessons, key and title, and exit")
    p.add_argument("--ckpt", metavar="PATH", help="answer with this trained checkpoint's weights (default: the"
                                                  " seed's, model.init_params(96, 16, 64, 64, 3))")
    p.add_argument("--guess", metavar="TEXT", help="with --lesson: the guess, as you would type it, so that nothing"
                                                   " is asked")
    args = p.parse_args(argv)
    more, why_not = lessons.numpy_lessons()
    every = lessons.LESSONS + more
    if args.list:
        width = max(len(lesson.key) for lesson in every)
        for n, lesson in enumerate(every, 1):
            print(f"{n:2d}. {lesson.key:{width}s}  {lesson.title}" + (" (NumPy)" if n > len(lessons.LESSONS) else ""))
        if why_not:
            print(why_not)
        return 0
    try:
        chosen = [lessons.by_key(args.lesson, every)] if args.lesson is not None else every
        if args.guess is not None:
            if args.lesson is None:
                raise ValueError("--guess goes with --lesson KEY: one lesson, one guess")
            lessons.parse_guess(chosen[0].guess, args.guess)  # (a bad guess is refused here, not asked again)
        lab = lessons.build_lab(args.ckpt)
    except ValueError as e:
        gone = f" ({why_not})" if why_not and str(e).startswith("no lesson ") else ""  # (it may be one of those)
        print(f"error: {e}{gone}", file=sys.stderr)
        return 2
    read = input if args.guess is None else scripted(args.guess)
    try:
        for n, lesson in enumerate(chosen, 1):
            print(f"\n== lesson {n} of {len(chosen)}: {lesson.key} ==")
            if lessons.ask(lesson, lab, read=read) is None:
                print("\nstopped; run python3 -m experiments.lessons --lesson KEY to take up one lesson again")
                return 0
    except KeyboardInterrupt:
        print("\nstopped (Ctrl-C)")
        return 130
    if why_not and args.lesson is None:
        print(f"\n{why_not}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
