"""Build it yourself: the learner's copies of model.py (the workbook, the find-the-bug folder) and the command line
that writes them and has them graded (oneblock/grade.py). Standard library only, like the seed's lab it grades.
Its commands (write, check, bug, guess) and what a blank function keeps: docs/build.md. Exit status: 0 when every
step passes (check) or the guess is right (guess), 1 when not, 2 for bad arguments. A blank body ends in a line that
raises NotImplementedError, which the grader reads as "not written yet".

    >>> text = workbook("loss_and_dlogits")
    >>> "def loss_and_dlogits(logits, targets):" in text, "dlogits.append([pi / T for pi in p])" in text
    (True, False)
    >>> "x1 = add(x0, a)  # (T, d) skip path 1" in text  # (forward comes before: the lab's, filled in)
    True
"""

import argparse
import ast
import io
import json
import os
import random
import sys
import tokenize
from pathlib import Path

from atomic import write_new
from oneblock.grade import FORWARD_OF, STEPS, TOL, grade
from oneblock.mistakes import LAB_MODEL, MISTAKES, planted

BUG_MARK = "# find the bug: "  # the first line of a find-the-bug file, which check does not grade


# ----------------------------------------------------------------------------------------------------------------
# The workbook


def plain(node):
    """True for an expression of names, constants, tuples and dicts only: a return line that gives nothing away.

    >>> plain(ast.parse("out, {'xhat': xhat}", mode="eval").body), plain(ast.parse("a + b", mode="eval").body)
    (True, False)
    """
    return all(isinstance(n, (ast.Name, ast.Constant, ast.Tuple, ast.Dict, ast.Load, ast.expr_context))
               for n in ast.walk(node))


def trailing_comments(source):
    """{line number: the comment that ends it} of source's lines that hold code and then a comment.

    >>> trailing_comments("x = 1  # one\\n# alone\\n")
    {1: 'one'}
    """
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.line[:token.start[1]].strip():
            comments[token.start[0]] = token.string.lstrip("#").strip()
    return comments


def blank(lines, node, number, comments):
    """The lines of function node (model.py's, as lines) with its body blanked as the module says: step `number`."""
    first_body = node.body[1].lineno  # (body[0] is the docstring, kept)
    indent = " " * node.body[1].col_offset
    said = {}  # {line number: the comment lines that stand for that line}
    for statement in node.body[1:]:
        if isinstance(statement, (ast.Return, ast.Assign)) and statement.value is not None and plain(statement.value):
            for n in range(statement.lineno, statement.end_lineno + 1):  # (what to return: the names later steps read)
                said[n] = [f"{indent}# {lines[n - 1][len(indent):]}"]
        elif statement.end_lineno in comments:
            names = "return" if isinstance(statement, ast.Return) else ", ".join(
                ast.unparse(target).strip("()") for target in getattr(statement, "targets", []))  # (none for a call)
            if names:
                said[statement.lineno] = [f"{indent}# {names}: {comments[statement.end_lineno]}"]
    body = []
    for n in range(first_body, node.end_lineno + 1):
        if lines[n - 1].strip().startswith("#"):
            body.append(lines[n - 1])  # (a formula or a heading: kept as it is)
        body += said.get(n, [])
    body.append(f"{indent}raise NotImplementedError(\"step {number} of {len(STEPS)}: write {node.name}\")")
    return lines[node.lineno - 1:first_body - 1] + body


def workbook(start=STEPS[0]):
    """The lab's model.py with the build's functions from step start on blanked, the earlier ones the lab's.

    >>> "raise NotImplementedError" in workbook("backward")
    True
    """
    source = LAB_MODEL.read_text(encoding="utf-8")
    lines = source.split("\n")
    functions = {node.name: node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}
    comments = trailing_comments(source)
    out, last = [], 0  # (the lines written, and the last line of model.py copied so far)
    first = STEPS.index(start)  # (a step of STEPS: the command line's choices)
    for number, step in enumerate(STEPS[first:], first + 1):
        node = functions[step]
        out += lines[last:node.lineno - 1] + blank(lines, node, number, comments)
        last = node.end_lineno
    return "\n".join(out + lines[last:])


# ----------------------------------------------------------------------------------------------------------------
# Find the bug


SEED_LAB = ["trace_block.py", "test_model.py", "bpe.py", "make_corpus.py", "atomic.py", "block-trace.json",
            "tokenizer.json", "corpus.txt"]  # copied beside the planted model.py: the lab's own checks run there


def bug_file(seed):
    """(text, key): the lab's model.py with a catalogue mistake planted, chosen by seed, and a first line that says
    the file is a find-the-bug exercise (its key is not written: the learner names the function that holds it).

    >>> text, key = bug_file(0)
    >>> text.startswith(BUG_MARK), key in MISTAKES
    (True, True)
    """
    key = random.Random(seed).choice(sorted(MISTAKES))
    return (f"{BUG_MARK}one function of this file holds a mistake\n"
            + planted(LAB_MODEL.read_text(encoding="utf-8"), MISTAKES[key]), key)


def bug_folder(folder, seed):
    """Write folder/model.py with a planted mistake (bug_file) and a copy of the seed lab's other files beside it,
    so that `python3 -m unittest test_model.py` and `python3 trace_block.py --check` run there on it. Nothing is
    written if any of those names is taken already (a ValueError names it)."""
    folder = Path(folder)
    taken = [name for name in ["model.py", *SEED_LAB] if os.path.lexists(folder / name)]
    if taken:
        raise ValueError(f"{folder / taken[0]} exists: your work is never written over (choose another folder)")
    write_new(folder / "model.py", bug_file(seed)[0])
    for name in SEED_LAB:
        write_new(folder / name, (LAB_MODEL.parent / name).read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------------------------------------------
# What check prints


def fd_line(step, grade_):
    """The line that reads the finite difference of a gradient step's failure, or None when there is none."""
    fd, got, want = grade_.get("fd"), grade_["got"], grade_["want"]
    if fd is None:
        return None
    forward = "loss" if step == "loss_and_dlogits" else FORWARD_OF[step]  # (grade's: whose gradient step computes)
    near = lambda a, b: abs(a - b) <= 1e-6 * max(1.0, abs(b))  # noqa: E731  (a central difference's accuracy)
    verdict = ("the lab's value: your forward is right there, so the gradient is what is wrong" if near(fd, want) else
               "your value: your gradient is right for your own forward, so the forward is what is wrong"
               if near(fd, got) else "neither value: the forward and the gradient both differ from the lab's")
    return f"the finite difference of your {forward} there is {fd!r}, {verdict}"


def report(path, grades):
    """The lines check prints for the grades of the file at path."""
    lines = [f"{path}, step by step in build order (each step on the lab's inputs, the other steps the lab's):"]
    for number, g in enumerate(grades, 1):
        head = f"  {number}/{len(STEPS)} {g['step']:<20} {g['status']}"
        if g["status"] == "todo":
            lines.append(f"{head}: not written yet")
            continue
        lines.append(head)
        if g["status"] == "fail":
            if g.get("mistake"):
                lines.append(f"      {g['tensor']}{g['where']} is {g['got']!r}; the lab's is {g['want']!r}")
                lines.append(f"      the mistake: {g['mistake']}. {g['explain']}")
            else:
                lines.append(f"      {g['explain']}")
            line = fd_line(g["step"], g)
            if line:
                lines.append(f"      {line}")
        lines += [f"      {probe}" for probe in g.get("probes", [])]
    passed = sum(g["status"] == "pass" for g in grades)
    first = next((g["step"] for g in grades if g["status"] != "pass"), None)
    lines.append(f"{passed} of {len(STEPS)} steps pass" + (f"; next: {first}" if first else ": the block is built")
                 + f" (an entry is right within {TOL:g} of the lab's, relative to its size)")
    return lines


# ----------------------------------------------------------------------------------------------------------------
# The commands


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m oneblock.workbook", description=__doc__.split("\n")[0],
                                     allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True)
    write = commands.add_parser("write", help="write DIR/model.py, the build's functions blank")
    write.add_argument("dir", metavar="DIR", help="the folder of your workbook (made if missing)")
    write.add_argument("--from", dest="start", default=STEPS[0], choices=STEPS,
                       help="the first step left blank; the earlier ones are the lab's (default: the first)")
    check = commands.add_parser("check", help="grade FILE step by step")
    check.add_argument("file", metavar="FILE")
    check.add_argument("--json", action="store_true", help="print the grades as one JSON object")
    bug = commands.add_parser("bug", help="write DIR/model.py with one catalogue mistake, unnamed")
    bug.add_argument("dir", metavar="DIR")
    bug.add_argument("--seed", type=int, default=None, help="which mistake (default: chosen at random)")
    guess = commands.add_parser("guess", help="name the function that holds the bug of FILE")
    guess.add_argument("file", metavar="FILE")
    guess.add_argument("function", metavar="FUNCTION", choices=STEPS, help=f"one of {', '.join(STEPS)}")
    args = parser.parse_args(argv)

    if args.command in ("write", "bug"):
        where = Path(args.dir) / "model.py"
        try:
            if args.command == "write":
                write_new(where, workbook(args.start))
            else:
                bug_folder(args.dir, args.seed)
        except (ValueError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"wrote {where}: fill in its blank functions, one at a time, and after each run: python3 -m"
              f" oneblock.workbook check {where}" if args.command == "write" else
              f"wrote {args.dir}/: the lab's seed files, and a model.py of which one function ({', '.join(STEPS)})"
              f" holds a mistake. Find it with the lab's own checks, run in {args.dir}/ (python3 -m unittest"
              f" test_model.py; python3 trace_block.py --check), then name it here: python3 -m oneblock.workbook guess"
              f" {where} FUNCTION")
        return 0

    path = Path(args.file)
    if not path.is_file():
        parser.error(f"{path} is not a file; expected your model.py (python3 -m oneblock.workbook write DIR makes one)")
    planted = path.read_text(encoding="utf-8", errors="replace").startswith(BUG_MARK)
    if args.command == "check" and planted:
        parser.error(f"{path} is a find-the-bug file: the grader would name its mistake; find it with the lab's"
                     f" checks, then: python3 -m oneblock.workbook guess {path} FUNCTION")
    grades = grade(path)
    if args.command == "guess":
        found = next((g for g in grades if g["status"] != "pass"), None)
        if not planted or found is None or found.get("mistake") is None:
            parser.error(f"{path} is not a find-the-bug file of python3 -m oneblock.workbook bug")
        right = args.function == found["step"]  # (its explain names the mistake as grade_step words it)
        print(f"{'right' if right else 'not that one'}: the mistake is in {found['step']}"
              f" ({found['mistake']}). {found['explain']}")
        return 0 if right else 1
    if args.json:
        print(json.dumps({"file": str(path), "steps": grades}, indent=1))
    else:
        print("\n".join(report(path, grades)))
    return 0 if all(g["status"] == "pass" for g in grades) else 1


if __name__ == "__main__":
    sys.exit(main())
