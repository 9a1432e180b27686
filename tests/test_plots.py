"""experiments/plots.py: runs headless (matplotlib's Agg backend, no display) and writes every picture as a non-empty
PNG."""

import os
import subprocess
import sys

import pytest
from run_helpers import ROOT

pytest.importorskip("numpy")
pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install matplotlib==3.11.2)")

from experiments import plots  # noqa: E402  (after the skips)
from experiments.plots import PICTURES  # noqa: E402


def test_plots_run_headless_and_write_every_png(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND")}
    proc = subprocess.run([sys.executable, "-m", "experiments.plots", "--out", str(tmp_path), "--steps", "30"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(PICTURES)
    for name in PICTURES:
        raw = (tmp_path / name).read_bytes()
        assert raw[:8] == b"\x89PNG\r\n\x1a\n", name
        width, height = int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")  # the IHDR chunk
        assert width >= 600 and height >= 400 and len(raw) > 10_000, (name, width, height, len(raw))
        assert f"wrote {tmp_path / name}" in proc.stdout


@pytest.mark.parametrize("out, said", [
    ("notes.txt", "notes.txt is a file; expected a folder for the pictures"),
    ("notes.txt/figures", "notes.txt is a file, not a folder"),
    ("x" * 300, "a folder name of 300 bytes"),  # (before: a traceback, the name looked up first)
], ids=["a file", "through a file", "a name too long"])
def test_an_out_that_cannot_hold_the_pictures_is_one_line_before_anything_is_read(tmp_path, monkeypatch, capsys,
                                                                                   out, said):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("my notes\n", encoding="utf-8")
    assert plots.main(["--out", out, "--record", "missing.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out {out}") and said in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
