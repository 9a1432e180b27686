"""One place for the defaults: every default of train.py's command line is the Settings field's, read from Settings
when the parser is built, so that a default written twice (once in Settings, once typed into the parser) cannot
drift apart. A Settings whose defaults all differ shows through in every flag's default and in the help that quotes
them. train.py is a command line, which no test imports (test_layout.py): its parser is built from the file run
in this process."""

import dataclasses
import runpy
import typing

from run_helpers import ROOT

from oneblock import settings
from oneblock.settings import Settings

FLAGLESS = ("rank", "world")  # torchrun's environment, never a flag


def parser_of(monkeypatch, changed=None):
    """What train.py's parser says, built in this process with Settings' defaults changed as changed says:
    {"defaults": {setting: the parser's default}, "help": its help, one line a flag's text, "same": whether the
    command line without flags gives the default Settings}."""
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "10000")
    train = runpy.run_path(str(ROOT / "train.py"))["build_parser"].__globals__  # (run as a file: never imported)
    if changed:  # another default for each setting, in Settings where train.py looks it up
        other = dataclasses.make_dataclass("Settings", [
            (f.name, f.type, dataclasses.field(default=changed.get(f.name, f.default)))
            for f in dataclasses.fields(Settings)], frozen=True)
        train["Settings"] = other
        monkeypatch.setattr(settings, "Settings", other)
    parser = train["build_parser"]()
    names = {f.name for f in dataclasses.fields(settings.Settings)}
    return {"defaults": {a.dest: parser.get_default(a.dest) for a in parser._actions if a.dest in names},
            "choices": {a.dest: a.choices for a in parser._actions if a.choices}, "help": parser.format_help(),
            "same": train["settings_from"](parser.parse_args([])) == settings.Settings()}


# ----------------------------------------------------------------------------------------------------------------
# A changed default shows through


CHOICES = {"backend": "torch", "positions": "rope", "device": "cpu", "dtype": "float64"}  # valid together


def changed(field, choices):
    """Another default for the field, of its type: what the parser must then show. A flag of choices gets another
    of them (CHOICES', where a setting's choice depends on another's)."""
    if field.name in choices:
        return CHOICES.get(field.name) or next(c for c in choices[field.name] if c != field.default)
    kind = next(k for k in typing.get_args(field.type) or (field.type,) if k is not type(None))
    if kind is bool:
        return not field.default
    if kind is str:
        return "other.txt"
    return (field.default or 0) + (7 if kind is int else 0.5)  # (None-filled ones get a number)


def help_of(text):
    """{flag: its entry in a parser's help text, on one line}."""
    entries = {}
    for line in text.split("\noptions:\n")[1].splitlines():  # (each entry starts "  -")
        if line.startswith("  -"):
            flag = line.split()[0]
            entries[flag] = ""
        entries[flag] += " " + line.strip()
    return entries


def test_a_changed_default_shows_through_in_every_flag_and_its_help(monkeypatch):
    choices = parser_of(monkeypatch)["choices"]
    other = {field.name: changed(field, choices) for field in dataclasses.fields(Settings)}
    assert set(CHOICES) <= set(choices)
    assert all(other[field.name] != field.default for field in dataclasses.fields(Settings))  # each one changed
    got = parser_of(monkeypatch, other)
    assert got["defaults"] == {name: value for name, value in other.items() if name not in FLAGLESS}
    assert got["same"]
    lines = help_of(got["help"])
    for flag in ("--steps", "--batch", "--lr", "--min-lr", "--threads", "--width", "--max-len", "--blocks",
                 "--heads", "--eval-every", "--ckpt-every", "--seed", "--clip", "--beta1", "--beta2"):
        assert f"(default: {other[flag[2:].replace('-', '_')]}" in lines[flag], lines[flag]
    assert f"(default: {other['backend']})" in lines["--backend"]
    assert f"(default: {other['positions']})" in lines["--positions"]
    assert f"(default: --max-len, {other['max_len']})" in lines["--seq-len"]  # another flag's default, quoted
    assert f"(--width, {other['width']} by default)" in lines["--heads"]
    assert f"(default: {Settings.steps})" not in lines["--steps"]
