"""The explorer in headless Chromium, for the developers' commands that drive it (bench_explorer.py, lessons_page.py):
an export of the untrained seed-3 model served on 127.0.0.1 and opened in a page, and the page's pictures as PNGs of
a 256-colour palette. Needs Playwright (tests/requirements.txt) and a system Chromium; Pillow for the pictures.
"""

import io
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

from atomic import folder_for, resolved, write_atomic
from oneblock import machine
from oneblock.export import UNTRAINED_SEED, export_site, read_weights
from oneblock.server import make_server


def need_browser(who):
    """Exit as machine.need does, one line on stderr and exit status 2, where who cannot drive a browser here:
    Playwright is not installed, or no system Chromium is found."""
    machine.need("playwright", who)
    if machine.find_chromium() is None:
        print("error: no Chromium found (chromium, chromium-browser or google-chrome on PATH)", file=sys.stderr)
        raise SystemExit(2)


@contextmanager
def served_page(page_files=None, view=""):
    """A Chromium page of the explorer with the untrained seed-3 export, served on 127.0.0.1, and the browser's
    major version: yields (page, version). page_files: {name: bytes} of another version's page, served in place of
    this one's (with this version's data); view: the page's view to open ("#lessons"), its first by default. An error
    the page logs is a RuntimeError at the end: its figures are not a working page's."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        weights, fields = read_weights(Path(tmp) / "none.safetensors", explicit=False)
        export_site(tmp, weights, {**fields, "source": f"The seed-{UNTRAINED_SEED} initial weights"})  # (no path)
        if page_files is not None:
            for path in Path(tmp).iterdir():
                if path.is_file():
                    path.unlink()
            for name, raw in page_files.items():
                (Path(tmp) / name).write_bytes(raw)
        server = make_server(tmp, 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=machine.find_chromium(), args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                errors = []
                page.on("console", lambda m: m.type == "error" and errors.append(f"console: {m.text}"))
                page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
                page.goto(f"http://127.0.0.1:{server.server_port}/index.html{view}")
                page.wait_for_function("window.ready === true")
                yield page, browser.version.split(".")[0]
                browser.close()
        finally:
            server.shutdown()
            server.server_close()
    if errors:
        raise RuntimeError(f"the page logged an error: {errors[0]}")


def write_picture(path, raw):
    """Write raw, a screenshot, to path (through a link, the file it leads to) as a PNG with a 256-colour palette: as
    sharp for a page or a card of flat colours and text, at about a third of the bytes.
    (Pillow comes with matplotlib, which tests/requirements.txt pins.)"""
    from PIL import Image

    out = io.BytesIO()
    image = Image.open(io.BytesIO(raw)).convert("RGB")
    palette = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    palette.save(out, "PNG", optimize=True)
    with folder_for(resolved(path)):
        write_atomic(resolved(path), out.getvalue())


def is_png(raw):
    """Whether raw (the bytes of a file) is a PNG picture, which a screenshot (--screenshot) may replace.

    >>> is_png(b"\\x89PNG\\r\\n\\x1a\\n..."), is_png(b"GIF89a")
    (True, False)
    """
    return raw.startswith(b"\x89PNG\r\n\x1a\n")
