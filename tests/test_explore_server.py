"""The explorer's server (oneblock/server.py) against bad and hostile requests, and explore.py --export against a
hostile neighbour: docs/explorer.md, "How it is checked".

Each request is sent over a raw socket to the real server (serving.make_server on a temporary folder) in a thread of
this process, its stderr captured, so that every reply and every log line is checked and no case may leave a
traceback; python3 explore.py is sent one of each kind. Each export is explore.py's command line, run in this process
(run_helpers.ran), but for the one it signals."""

import inspect
import json
import os
import re
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import model
from oneblock import checkpoint, export
from oneblock import server as serving
from checkpoint_edits import RUNS, edited, set_meta
from run_helpers import ROOT, kinds_under, one_line_error, ran, run

TIMEOUT = 2.0  # the idle timeout of the server under test, in seconds (serving.IDLE_TIMEOUT is the real one)
SECRET = "a file outside the served folder: never sent"
PAGE = "<!doctype html><title>the page</title>\n"
MODULE = "export const answer = 42;\n"
HERE = b"{here}"  # in a request sent by Served.exchange: the host and port of the server under test


# ----------------------------------------------------------------------------------------------------------------
# The folder, the server in a thread of this process, and raw exchanges with it


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A served folder site/ beside a folder outside/ that holds the secret, with links out of site/ and within it:

        site/index.html, site/page.js, site/data/manifest.json (no index.html in data/), site/sub/index.html,
        site/alias.js -> page.js, site/leak.txt -> ../outside/secret.txt, site/leaks -> ../outside,
        site/trap/index.html -> ../../outside/secret.txt, site/fifo (a named pipe, where the OS has them)
    """
    root = tmp_path_factory.mktemp("explore-server")
    outside, site = root / "outside", root / "site"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    for folder in (site, site / "data", site / "sub", site / "trap"):
        folder.mkdir()
    (site / "index.html").write_text(PAGE)
    (site / "page.js").write_text(MODULE)
    (site / "data" / "manifest.json").write_text('{"format": "test"}\n')
    (site / "sub" / "index.html").write_text("<!doctype html><title>sub</title>\n")
    try:
        (site / "alias.js").symlink_to("page.js")
        (site / "leak.txt").symlink_to(outside / "secret.txt")  # absolute
        (site / "leaks").symlink_to(Path("..") / "outside", target_is_directory=True)  # relative
        (site / "trap" / "index.html").symlink_to(Path("..") / ".." / "outside" / "secret.txt")
    except OSError as e:  # Windows without the right to make links
        pytest.skip(f"cannot make symbolic links here ({e})")
    if hasattr(os, "mkfifo"):
        os.mkfifo(site / "fifo")
    return site


class Served:
    """serving.make_server(site, 0, timeout=TIMEOUT) serving in a thread of this process, its stderr read through
    the running test's capsys (no_traceback hands it over)."""

    def __init__(self, folder):
        self.httpd = serving.make_server(folder, 0, timeout=TIMEOUT)
        self.port, self.capsys, self.logged = self.httpd.server_port, None, []
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def log(self):
        """Everything the server wrote on stderr while the tests ran, up to now."""
        self.logged.append(self.capsys.readouterr().err)
        return "".join(self.logged)

    def exchange(self, request, wait=10):
        """(the whole reply, what the server logged meanwhile): request sent at once (with HERE replaced by this
        server's host and port), then read until the server closes the connection. The server logs before it
        replies, so the log is complete when the reply is."""
        mark = len(self.log())
        with socket.create_connection(("127.0.0.1", self.port), timeout=wait) as sock:
            sock.sendall(request.replace(HERE, b"127.0.0.1:%d" % self.port))
            reply = read_all(sock)
        return reply, self.log()[mark:]

    def get(self, path, host=HERE):
        return self.exchange(b"GET " + path.encode("latin-1") + b" HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")


@pytest.fixture(scope="module")
def server(site):
    served = Served(site)
    yield served
    served.httpd.shutdown()
    served.httpd.server_close()
    served.thread.join()


@pytest.fixture(autouse=True)
def no_traceback(request):
    """After each test, whatever it sent: the server is still up and wrote no traceback to its stderr meanwhile."""
    if "server" not in request.fixturenames:
        yield
        return
    served = request.getfixturevalue("server")
    served.capsys = request.getfixturevalue("capsys")
    mark = len(served.log())
    yield
    log, served.capsys = served.log()[mark:], None
    assert served.thread.is_alive() and "Traceback" not in log, log


def read_all(sock):
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def status(reply):
    """The status code of a raw reply, from its status line.

    >>> status(b"HTTP/1.0 404 File not found\\r\\nServer: x\\r\\n\\r\\n")
    404
    """
    line = reply.split(b"\r\n", 1)[0]
    assert re.fullmatch(rb"HTTP/1\.[01] \d{3} [ -~]*", line), f"no status line in the reply {reply[:200]!r}"
    return int(line.split()[1])


def body(reply):
    return reply.split(b"\r\n\r\n", 1)[1]


def header(reply, name):
    head = reply.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    found = re.search(rf"^{name}: (.*)$", head, re.IGNORECASE | re.MULTILINE)
    return found and found.group(1).strip()


def one_log_line(log, code):
    """The one short, printable line the server logged for a failed request that was answered with code."""
    lines = log.splitlines()
    assert len(lines) == 1 and lines[0].endswith(f": HTTP {code}"), log
    assert len(lines[0]) <= 200 and re.fullmatch(r"[ -~]*", lines[0]), lines[0]  # short, no control characters
    return lines[0]


# ----------------------------------------------------------------------------------------------------------------
# What is served, and what is not


def test_a_page_file_and_a_link_inside_the_folder_are_served_with_their_type_uncached_and_not_logged(server):
    for path in ("/page.js", "/alias.js"):  # the file, and a link to it that stays inside the folder
        reply, log = server.get(path)
        assert status(reply) == 200 and body(reply) == MODULE.encode(), path
        assert header(reply, "Content-Type") == "text/javascript" and header(reply, "Cache-Control") == "no-store"
        assert log == ""  # successes are quiet
    reply, log = server.exchange(b"HEAD /index.html HTTP/1.0\r\nHost: " + HERE + b"\r\n\r\n")
    assert status(reply) == 200 and body(reply) == b"" and header(reply, "Content-Length") == str(len(PAGE))
    assert header(reply, "Content-Type") == "text/html" and log == ""


@pytest.mark.parametrize("path", ["/leak.txt", "/leaks/secret.txt", "/trap/index.html", "/trap/", "/leaks/", "/fifo"])
def test_a_link_out_of_the_folder_or_a_fifo_is_404_and_its_target_never_sent(server, site, path):
    """(A FIFO: opening a pipe for reading would wait for a writer, so it is never opened.)"""
    if path == "/fifo" and not (site / "fifo").exists():
        pytest.skip("no named pipes on this OS")
    reply, log = server.get(path)
    assert status(reply) == 404 and SECRET.encode() not in reply and b"secret" not in reply
    assert one_log_line(log, 404) == f"GET {path}: HTTP 404"


def test_a_folder_is_never_listed(server):
    for path in ("/data/", "/data"):
        reply, log = server.get(path)
        assert status(reply) == 404, (path, reply)
        assert b"manifest.json" not in reply and b"listing" not in reply.lower()
        one_log_line(log, 404)
    reply, _ = server.get("/sub")  # a folder with its own index.html: sent there, with the slash its links need
    assert status(reply) == 301 and header(reply, "Location") == "/sub/"
    reply, _ = server.get("/sub/")
    assert status(reply) == 200 and b"<title>sub</title>" in body(reply)
    reply, _ = server.get("/")
    assert status(reply) == 200 and body(reply) == PAGE.encode()


@pytest.mark.parametrize("path, code", [
    ("/index.html%00.js", 400),  # a NUL: no file has one in its name
    ("/%0d%0aSet-Cookie:%20x", 400),  # control characters
    ("/..%2f..%2foutside%2fsecret.txt", 400),  # encoded slashes
    ("/%2e%2e/outside/secret.txt", 400),  # dot segments, encoded (a browser removes raw ones before it asks)
    ("/sub/./index.html", 400),
    ("/%5c..%5coutside%5csecret.txt", 400),  # backslashes, encoded (a raw one is the same name once decoded)
    ("/%ff%fe", 400),  # not UTF-8
    ("index.html", 400),  # not a path from the root
    ("//outside/secret.txt", 404),  # the leading slashes are one slash: site/outside/secret.txt, which is not there
    ("/nothing-here.js", 404),
])
def test_a_bad_path_is_its_status_never_a_traceback(server, path, code):
    reply, log = server.get(path)
    assert status(reply) == code and SECRET.encode() not in reply
    assert header(reply, "Content-Type").startswith("text/html") and b"Error code: %d" % code in body(reply)
    line = one_log_line(log, code)
    assert line.startswith("GET /" if path.startswith("/") else "GET ")


# ----------------------------------------------------------------------------------------------------------------
# Malformed requests: each answered with its status and one log line


@pytest.mark.parametrize("request_bytes, code, logged", [
    pytest.param(b"GARBAGE\r\n\r\n", 400, "", id="garbage"),
    pytest.param(b"GET / HTTP/one\r\n\r\n", 400, "", id="a bad version"),
    pytest.param(b"GET / HTTP/9.9\r\n\r\n", 505, "", id="HTTP/9.9"),
    pytest.param(b"POST /\r\n\r\n", 400, "", id="HTTP/0.9 POST"),
    pytest.param(b"BREW /pot HTTP/1.0\r\n\r\n", 501, "", id="an unknown method"),
    pytest.param(b"GET /" + b"a" * 16_000_000 + b" HTTP/1.0\r\n\r\n", 414, "GET /aaaa",
                 id="a 16 MB URL, more than the socket buffers hold: the reply is not lost to a reset"),
    pytest.param(b"GET / HTTP/1.0\r\nX: " + b"a" * 100_000 + b"\r\n\r\n", 431, "", id="a header line too long"),
    pytest.param(b"GET /\x1b[2J\x00\x07 HTTP/1.0\r\nHost: " + HERE + b"\r\n\r\n", 400,
                 r"GET /\x1b[2J\x00\x07: HTTP 400", id="control characters"),
    pytest.param(b"\x1b]0;owned\x07 / HTTP/1.0\r\n\r\n", 400, r"\x1b]0;owned\x07", id="a terminal title as a method"),
])
def test_a_malformed_request_is_its_status_and_one_short_escaped_log_line(server, request_bytes, code, logged):
    """Each answered with its status, and logged in one line that escapes the request's control characters and
    shortens it, saying so ("...")."""
    reply, log = server.exchange(request_bytes)
    assert status(reply) == code
    assert b"Error code: %d" % code in body(reply) and header(reply, "Connection") == "close"
    assert one_log_line(log, code).startswith(logged)
    assert ("..." in log) == (logged == "GET /aaaa"), log  # (the long URLs: shortened)


def test_a_tls_hello_on_the_http_port_is_400_at_once(server):
    """A client that speaks TLS to the plain-HTTP port gets a plain 400 at once, not a wait for a line's end that
    its binary hello may never have."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()  # the first bytes a TLS client sends, over no socket
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    hello = outgoing.read()
    assert hello[:1] == b"\x16" and len(hello) > 100  # a handshake record: a real ClientHello, from the ssl module
    start = time.monotonic()
    reply, log = server.exchange(hello)
    assert status(reply) == 400 and b"not an HTTP request" in reply
    assert time.monotonic() - start < TIMEOUT / 2  # answered, not timed out
    assert one_log_line(log, 400).startswith(r"\x16\x03")


# ----------------------------------------------------------------------------------------------------------------
# Idle connections


def test_an_idle_connection_is_closed_after_the_timeout(server):
    """A client that connects and sends nothing, or stops in the middle of its request line or headers, is hung up on
    once it has been idle for the timeout: quietly, since browsers open connections ahead that they never use. The
    three clients wait side by side, each in a thread of its own, timed from its last byte to the server's end."""
    mark = len(server.log())
    ended = {}

    def idle(sent):
        with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT + 10) as sock:
            start = time.monotonic()
            sock.sendall(sent)
            reply = read_all(sock)  # the server's end: b"" (a socket.timeout here is the defect)
            ended[sent] = reply, time.monotonic() - start

    clients = [threading.Thread(target=idle, args=(sent,))
               for sent in (b"", b"GET /index.html HT", b"GET /index.html HTTP/1.0\r\nHost: 127.0.0.1\r\n")]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    assert len(ended) == 3, ended
    for sent, (reply, waited) in ended.items():
        assert reply == b"" and TIMEOUT * 0.8 <= waited <= TIMEOUT + 5, (sent, reply, waited)
    assert server.log()[mark:] == ""


def test_the_server_binds_127_0_0_1_only_and_its_real_idle_timeout_is_sane(server):
    """explore.py serves with IDLE_TIMEOUT: long enough for a slow page load, short enough to free a thread soon."""
    assert server.httpd.server_address[0] == "127.0.0.1"
    assert 10 <= serving.IDLE_TIMEOUT <= 30
    assert inspect.signature(serving.make_server).parameters["timeout"].default == serving.IDLE_TIMEOUT


# ----------------------------------------------------------------------------------------------------------------
# The Host header: only this server's own names, with its port (DNS rebinding)


def test_a_host_that_names_another_server_is_421_and_nothing_of_the_folder(server):
    """Every foreign Host a page elsewhere on the web (or a proxy) could send (the bare name means port 80) is 421
    before the path is looked at: the same reply whatever the path names, so that not even which files exist is told."""
    port = server.port
    for host in [b"evil.example:%d" % port, b"127.0.0.1.nip.io:%d" % port, b"localhost:%d" % (port + 1),
                 b"0.0.0.0:%d" % port, b"[::2]:%d" % port, b"localhost", b"localhost..:%d" % port,
                 b"localhost.evil.example:%d" % port, b"evil.localhost:%d" % port, b"127.0.0.2:%d" % port,
                 b"[::ffff:127.0.0.1]:%d" % port, b"localhost:%d0" % port, b"localhost:0%d0" % port,
                 b"localhost:99999999", b"localhost:"]:
        replies = set()
        for path in ["/index.html", "/page.js", "/data/manifest.json", "/alias.js", "/sub/", "/sub", "/data/",
                     "/no-such.js", "/leak.txt"]:  # files, folders, a link in and out, nothing: one answer for all
            reply, log = server.get(path, host=host)
            assert status(reply) == 421, (host, path, reply[:200])
            assert PAGE.encode() not in reply and MODULE.encode() not in reply and b"format" not in reply
            assert SECRET.encode() not in reply and b"sub" not in reply and header(reply, "Location") is None
            assert one_log_line(log, 421) == f"GET {path} (Host {host.decode()!r}): HTTP 421"
            replies.add(body(reply))
        assert len(replies) == 1, (host, replies)
    reply, _ = server.exchange(b"HEAD /index.html HTTP/1.1\r\nHost: evil.example:%d\r\n\r\n" % server.port)
    assert status(reply) == 421 and body(reply) == b"" and header(reply, "Content-Length") != str(len(PAGE))
    reply, log = server.get("/index.html", host=b"localhost:" + b"9" * 5000)  # a port no int holds: one short line
    assert status(reply) == 421 and one_log_line(log, 421).startswith("GET /index.html (Host 'localhost:999")


@pytest.mark.parametrize("request_bytes", [
    pytest.param(b"GET /index.html HTTP/1.0\r\n\r\n", id="HTTP/1.0 without Host"),
    pytest.param(b"GET /index.html HTTP/1.1\r\n\r\n", id="HTTP/1.1 without Host"),
    pytest.param(b"GET /index.html HTTP/1.1\r\nHost:   \r\n\r\n", id="a Host of spaces"),
    pytest.param(b"GET /index.html HTTP/1.1\r\nHost: " + HERE + b"\r\nHost: evil.example\r\n\r\n", id="two Hosts"),
    pytest.param(b"GET /index.html HTTP/1.1\r\nHost: me@" + HERE + b"\r\n\r\n", id="a Host with a user"),
    pytest.param(b"GET /index.html HTTP/1.1\r\nHost: " + HERE + b" x\r\n\r\n", id="a Host of two words"),
    pytest.param(b"GET /index.html HTTP/1.1\r\nHost: localh\xc3\xb6st\r\n\r\n", id="a Host past ASCII"),
])
def test_a_request_without_one_good_host_is_400_and_nothing_of_the_folder(server, request_bytes):
    """400, as HTTP/1.1 asks of a server (RFC 9112, section 3.2), and for HTTP/1.0 too: a browser always sends one.
    (The same Host twice: host_status's doctests in oneblock/server.py.)"""
    reply, log = server.exchange(request_bytes)
    assert status(reply) == 400 and PAGE.encode() not in reply and b"Error code: 400" in body(reply)
    assert header(reply, "Connection") == "close"
    assert re.fullmatch(r"GET /index\.html \((no Host|2 Host lines|Host '.*')\): HTTP 400",
                        one_log_line(log, 400)), log


def test_explore_py_answers_bad_requests_and_rebinding_pages_and_stops_cleanly(tmp_path, capsys):
    """The same server through python3 explore.py --no-open (serving explorer/ with the real idle timeout), once for
    each kind of request (every case of each: the tests above)."""
    # (its SIGINT is what a terminal's Ctrl-C sends, even under a background pytest, whose children ignore SIGINT)
    proc = subprocess.Popen([sys.executable, str(ROOT / "explore.py"), "--no-open"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving the explorer at http://127.0.0.1:"), line
        port = int(line.split()[4].split(":")[2].split("/")[0])

        def get(path, host=b"127.0.0.1:%d" % port):
            line = b"" if host is None else b"Host: " + host + b"\r\n"
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(b"GET %s HTTP/1.%d\r\n%s\r\n" % (path, host is not None, line))
                return read_all(sock)

        for name, mime in [("index.html", "text/html"), ("page.js", "text/javascript"),
                           ("worker.js", "text/javascript"), ("style.css", "text/css"),
                           ("data/manifest.json", "application/json"),
                           ("data/weights.safetensors", "application/octet-stream")]:
            reply = get(b"/" + name.encode())
            assert status(reply) == 200 and header(reply, "Content-Type").startswith(mime), name
            assert header(reply, "Cache-Control") == "no-store", name
        for _ in range(5):  # clients that hang up mid-reply (a reset, as a closed tab does): no traceback
            hang_up = socket.create_connection(("127.0.0.1", port), timeout=10)
            hang_up.sendall(b"GET /page.js HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)  # (a reply to cut)
            hang_up.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            hang_up.close()
        split = (ROOT / "explorer" / "data" / "split.json").read_bytes()
        for host in (b"127.0.0.1:%d" % port, b"localhost:%d" % port):
            reply = get(b"/data/split.json", host=host)
            assert status(reply) == 200 and body(reply) == split, host
        for host, code in ((b"evil.example:%d" % port, 421), (None, 400)):
            reply = get(b"/data/split.json", host=host)
            assert status(reply) == code and b"mia" not in reply and len(body(reply)) < 1000, host
        taken = ran("explore.py", capsys, "--no-open", "--port", port)
        assert taken.returncode == 2 and f"cannot serve on 127.0.0.1 port {port}" in taken.stderr, taken.stderr
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and "stopped" in out and "Traceback" not in err, err
    lines = [x for x in err.splitlines() if not x.startswith("note: ")]  # the note: the model is untrained
    assert [x.rsplit(": HTTP ", 1)[1] for x in lines] == ["421", "400"], err
    assert all(len(x) <= 200 and re.fullmatch(r"[ -~]*", x) for x in lines), err
    with pytest.raises(OSError):  # nothing listens any more
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


# ----------------------------------------------------------------------------------------------------------------
# explore.py --export: the untrained model by default, a missing or too large checkpoint refused; and against a hostile
# neighbour: which text, which folder, which permissions, no path of the machine


@pytest.fixture
def explore(capsys, monkeypatch):
    """explore(*args, cwd=folder): python3 explore.py with args, run in this process in folder; a namespace of its
    returncode, stdout and stderr."""
    def run(*args, cwd):
        monkeypatch.chdir(cwd)
        return ran("explore.py", capsys, *args)
    return run


@pytest.fixture(scope="module")
def runs(base_checkpoints):
    """conftest's folder of notes.txt (two_documents) and the small checkpoints train.py wrote there (own-text of
    --data notes.txt, one-block of the stories), and beside them whole.safetensors: --data given as its whole path."""
    folder, _ = base_checkpoints
    whole = [folder / "notes.txt" if arg == "notes.txt" else arg for arg in RUNS["own-text"]]
    proc = run("train.py", *whole, "--out", "whole.safetensors", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    return folder


def placed(runs, folder, name, text=False):
    """A copy of the checkpoint runs/name.safetensors in folder (made), and of notes.txt there if text; the copy's
    path."""
    folder.mkdir(parents=True, exist_ok=True)
    ckpt = folder / f"{name}.safetensors"
    ckpt.write_bytes((runs / f"{name}.safetensors").read_bytes())
    if text:
        (folder / "notes.txt").write_bytes((runs / "notes.txt").read_bytes())
    return ckpt


def test_an_export_without_a_checkpoint_is_the_untrained_seed_3_model(explore, tmp_path):
    """No out/ckpt.safetensors where explore.py runs: the page's files and data/ of model.init_params' seed-3
    weights, bit for bit, with the stories' floors, the order test's sentences and the stories' split."""
    assert explore("--export", "site", cwd=tmp_path).returncode == 0
    site = tmp_path / "site"
    assert sorted(p.name for p in site.iterdir()) == sorted([p.name for p in export.page_files()] + ["data"])
    manifest = json.loads((site / "data" / "manifest.json").read_text())
    assert manifest["trained"] is False and "seed-3 initial weights" in manifest["source"]
    assert manifest["val_floor"] == pytest.approx(0.3074, abs=1e-4)
    assert manifest["floor"] == pytest.approx(0.3081, abs=1e-4)
    assert manifest["order"] == dict(zip("ab", export.ORDER))
    weights = checkpoint.load_checkpoint(site / "data" / export.WEIGHTS_FILE)
    assert checkpoint.reference_params(weights) == model.init_params(96, 16, 64, 64, 3)  # bit for bit
    split = json.loads((site / "data" / "split.json").read_text())
    stories = (ROOT / "corpus.txt").read_text().splitlines()
    assert split["train"] + split["val"] == stories and len(split["val"]) == 300
    assert not list(site.rglob("*.tmp"))


def test_a_model_too_large_for_the_page_is_refused_naming_it(runs, monkeypatch):
    """read_weights holds every checkpoint to page_fits before anything is exported: with the page's bound set just
    below what the model needs, it is refused with its sizes and parameter count; at the bound, it loads."""
    ckpt = runs / "one-block.safetensors"
    config = checkpoint.load_checkpoint(ckpt)["config"]
    count = config.parameter_count()
    monkeypatch.setattr(export, "PAGE_BYTES", export.PAGE_COPIES * 8 * count - 1)
    sizes = f"{re.escape(config.blocks_and_heads())}, width {config.d}: {count:,} parameters"
    refusal = rf"is a model of {sizes}, which the explorer does not run: .* sample.py runs it"
    with pytest.raises(ValueError, match=refusal):
        export.read_weights(ckpt, explicit=True)
    monkeypatch.setattr(export, "PAGE_BYTES", export.PAGE_COPIES * 8 * count)
    raw, fields = export.read_weights(ckpt, explicit=True)
    assert raw == ckpt.read_bytes() and fields["trained"]


def test_a_missing_checkpoint_and_bad_options_are_exit_2_and_write_nothing(explore, tmp_path):
    """(A damaged checkpoint, every one of the fuzz corpus: tests/test_fuzz_checkpoints.py; checkpoint.py's message
    for each kind: tests/test_checkpoint.py.)"""
    (tmp_path / "file").write_text("x")
    for args, phrase in [(["--ckpt", tmp_path / "missing.safetensors", "--export", tmp_path / "site"],
                          "no checkpoint at"),
                         (["--export", tmp_path / "file"], "is a file"), (["--port", "70000"], "is not a port"),
                         (["--port", "eighty"], "invalid int value")]:
        proc = explore(*args, cwd=tmp_path)
        assert proc.returncode == 2 and phrase in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "site").exists()  # nothing written


def test_the_export_holds_no_path_of_the_machine(runs, explore, tmp_path):
    """A checkpoint named by its whole path, of a text train.py was given by its whole path: the export names both
    by their file names alone, the weights included, and is still the model (tensors and checks as before)."""
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert checkpoint.load_checkpoint(runs / "whole.safetensors")["metadata"]["text"] == str(runs / "notes.txt")
    proc = explore("--ckpt", runs / "whole.safetensors", "--export", site, cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    exported = kinds_under(site)
    for name, data in exported.items():
        for path in {str(runs), str(runs.resolve()), str(tmp_path), str(ROOT)}:
            assert name == "data" or path.encode() not in data, (name, path)
    manifest = json.loads(exported["data/manifest.json"])
    split = json.loads(exported["data/split.json"])
    assert manifest["text"] == split["text"] == "notes.txt" and manifest["source"] == "Checkpoint whole.safetensors"
    assert split["train"] + split["val"] == (runs / "notes.txt").read_text(encoding="utf-8")
    weights = checkpoint.load_checkpoint(site / "data" / "weights.safetensors")
    before = checkpoint.load_checkpoint(runs / "whole.safetensors")
    assert weights["metadata"]["text"] == "notes.txt"
    assert checkpoint.reference_params(weights) == checkpoint.reference_params(before)
    assert {k: v for k, v in weights["metadata"].items() if k not in ("text", checkpoint.DATA_HASH_KEY)} == {
        k: v for k, v in before["metadata"].items() if k not in ("text", checkpoint.DATA_HASH_KEY)}
    # and a checkpoint that names its text without folders is exported byte for byte
    assert explore("--ckpt", "own-text.safetensors", "--export", site, cwd=runs).returncode == 0
    assert (site / "data" / "weights.safetensors").read_bytes() == (runs / "own-text.safetensors").read_bytes()


@pytest.mark.skipif(os.name == "nt", reason="Windows has no owner, group and others' permission bits")
@pytest.mark.parametrize("ckpt_mode, text_mode, data_mode", [
    (0o600, 0o600, 0o600), (0o600, 0o644, 0o600), (0o644, 0o600, 0o600), (0o640, 0o644, 0o640),
    (0o644, 0o644, 0o644), (0o400, 0o444, 0o600), (0o666, 0o604, 0o604)])
def test_the_export_keeps_the_privacy_of_what_it_was_made_from(runs, explore, tmp_path, ckpt_mode, text_mode,
                                                               data_mode):
    """The data an export writes is as private as the checkpoint and the text it was made from (the owner may read
    and write it; the group and others may read it only where both let them, and never write it); the page's own
    files are readable by all."""
    ckpt = placed(runs, tmp_path / "work", "own-text", text=True)
    ckpt.chmod(ckpt_mode)
    (ckpt.parent / "notes.txt").chmod(text_mode)
    proc = explore("--ckpt", ckpt, "--export", tmp_path / "site", cwd=ckpt.parent)
    assert proc.returncode == 0, proc.stderr
    modes = {p.relative_to(tmp_path / "site").as_posix(): p.stat().st_mode & 0o777
             for p in (tmp_path / "site").rglob("*") if p.is_file()}
    data = {name: mode for name, mode in modes.items() if name.startswith("data/")}
    assert sorted(data) == ["data/lessons.json", "data/manifest.json", "data/split.json", "data/tokenizer.json",
                            "data/weights.safetensors"]
    assert set(data.values()) == {data_mode}, oct(data_mode)
    assert {mode for name, mode in modes.items() if name not in data} == {0o644}
    # the stories: the checkpoint's privacy alone
    stories = placed(runs, tmp_path / "work", "one-block")
    stories.chmod(ckpt_mode)
    assert explore("--ckpt", stories, "--export", tmp_path / "site", cwd=tmp_path).returncode == 0
    want = 0o600 | (ckpt_mode & 0o044)
    assert {(tmp_path / "site" / name).stat().st_mode & 0o777 for name in data} == {want}


# ----------------------------------------------------------------------------------------------------------------
# Which text a model of your own text exports


def test_a_checkpoint_cannot_export_a_file_it_names_elsewhere(runs, explore, tmp_path):
    """A crafted checkpoint that names another file, by its whole path or through folders, with that file's right
    SHA-256: nothing is read from there, the export is refused in one line, and nothing is written."""
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("a secret line one\n" * 30 + "\n" + "a secret line two\n" * 4, encoding="utf-8")
    work = tmp_path / "work"
    for name in (str(secret), "../outside/secret.txt", "outside/secret.txt"):
        ckpt = placed(runs, work, "own-text")
        ckpt.write_bytes(edited(ckpt.read_bytes(), set_meta("text", name),
                                set_meta("text_sha256", checkpoint.sha256_file(secret)))())
        for cwd in (work, tmp_path):
            proc = explore("--ckpt", ckpt, "--export", tmp_path / "site", cwd=cwd)
            one_line_error(proc, "learned the text of", "secret.txt", "--data FILE")
            assert not (tmp_path / "site").exists()


def test_the_text_beside_the_checkpoint_is_found_wherever_explore_runs(runs, explore, tmp_path):
    ckpt = placed(runs, tmp_path / "runs", "own-text", text=True)
    (tmp_path / "other").mkdir()
    proc = explore("--ckpt", ckpt, "--export", tmp_path / "site", cwd=tmp_path / "other")
    assert proc.returncode == 0, proc.stderr
    split = json.loads((tmp_path / "site" / "data" / "split.json").read_text(encoding="utf-8"))
    assert split["train"] + split["val"] == (runs / "notes.txt").read_text(encoding="utf-8")
    # a changed copy beside it, the right one in the current folder: the one the checkpoint's hash binds is taken
    (tmp_path / "runs" / "notes.txt").write_text("another text\n\nof two documents\n", encoding="utf-8")
    (tmp_path / "other" / "notes.txt").write_bytes((runs / "notes.txt").read_bytes())
    assert explore("--ckpt", ckpt, "--export", tmp_path / "site", cwd=tmp_path / "other").returncode == 0
    # the changed one alone: refused, naming it
    (tmp_path / "other" / "notes.txt").unlink()
    proc = explore("--ckpt", ckpt, "--export", tmp_path / "site2", cwd=tmp_path / "other")
    one_line_error(proc, "that file has changed since", str(tmp_path / "runs" / "notes.txt"))
    assert not (tmp_path / "site2").exists()


def test_data_names_the_text_and_is_checked_against_the_checkpoint(runs, explore, tmp_path):
    """--data FILE: the text the model learned, wherever it is now and whatever its name. (A folder or a FIFO as the
    text: oneblock/data.py's read_data, tests/test_own_text.py and tests/test_nothing_lost.py.)"""
    ckpt = placed(runs, tmp_path / "runs", "own-text")
    moved = tmp_path / "texts" / "renamed.txt"
    moved.parent.mkdir()
    moved.write_bytes((runs / "notes.txt").read_bytes())
    site = tmp_path / "site"
    proc = explore("--ckpt", ckpt, "--export", site, cwd=tmp_path)  # not beside it, not here: say how to name it
    one_line_error(proc, "learned the text of 'notes.txt'", str(tmp_path / "runs" / "notes.txt"), "--data FILE")
    proc = explore("--ckpt", ckpt, "--data", moved, "--export", site, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((site / "data" / "manifest.json").read_text(encoding="utf-8"))
    split = json.loads((site / "data" / "split.json").read_text(encoding="utf-8"))
    assert manifest["text"] == split["text"] == "renamed.txt"
    assert split["train"] + split["val"] == moved.read_text(encoding="utf-8")
    other = tmp_path / "other.txt"
    other.write_text(moved.read_text(encoding="utf-8") + "one more line\n", encoding="utf-8")
    refusals = [(["--ckpt", ckpt, "--data", other], [str(other), "SHA-256"]),
                (["--ckpt", ckpt, "--data", tmp_path / "missing.txt"], ["missing.txt", "No such file"]),
                (["--ckpt", placed(runs, tmp_path / "runs", "one-block"), "--data", moved],
                 ["--data", "the stories"]),
                (["--data", moved], ["--data", "the stories"])]  # the untrained model learned nothing else
    for args, phrases in refusals:
        proc = explore(*args, "--export", tmp_path / "site2", cwd=tmp_path)
        one_line_error(proc, *phrases)
        assert not (tmp_path / "site2").exists()


# ----------------------------------------------------------------------------------------------------------------
# Which folder an export writes: one of its own, and nothing through a link


def test_an_export_never_writes_through_a_link(runs, explore, tmp_path):
    """A link placed in the export's folder, where the export writes (data/, index.html, data/manifest.json), or
    the folder itself a link: refused in one line naming it; what the links lead to, and the folder, as they were."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "mine.html").write_text("my own page\n", encoding="utf-8")
    assert explore("--ckpt", "one-block.safetensors", "--export", tmp_path / "old", cwd=runs).returncode == 0
    cases = {"data": lambda site: (site / "data").symlink_to(outside, target_is_directory=True),
             "index.html": lambda site: (site / "index.html").symlink_to(outside / "mine.html"),
             "data/manifest.json": lambda site: ((site / "data").mkdir(),
                                                 (site / "data" / "manifest.json").symlink_to(
                                                     tmp_path / "old" / "data" / "manifest.json")),
             "": lambda site: site.symlink_to(outside, target_is_directory=True)}
    for where, make in cases.items():
        site = tmp_path / f"site-{len(where)}"
        if where:
            site.mkdir()
        make(site)
        before, there = kinds_under(tmp_path / "outside"), kinds_under(site)
        proc = explore("--ckpt", "one-block.safetensors", "--export", site, cwd=runs)
        one_line_error(proc, f"{site / where if where else site} is a symbolic link")
        assert kinds_under(tmp_path / "outside") == before and kinds_under(site) == there, where
        assert kinds_under(tmp_path / "old")  # (the link's target export is still there)


def test_an_export_replaces_only_an_export(runs, explore, tmp_path):
    """The folder must be missing, empty, or hold an earlier export (its data/manifest.json says so): a folder of
    your own files, or one whose manifest is not an export's, is refused and left as it was; what a killed export
    left (its temporary files) does not count, and is cleared."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<!doctype html><title>my own page</title>\n", encoding="utf-8")
    (site / "notes.md").write_text("mine\n", encoding="utf-8")
    mine = tmp_path / "mine"
    (mine / "data").mkdir(parents=True)
    (mine / "data" / "manifest.json").write_text('{"format": "my own manifest"}\n', encoding="utf-8")
    for folder in (site, mine):
        before = kinds_under(folder)
        proc = explore("--ckpt", "one-block.safetensors", "--export", folder, cwd=runs)
        one_line_error(proc, f"{folder} holds files that are not an explorer export", "missing, empty")
        assert kinds_under(folder) == before
    # empty: written (an earlier export replaced: test_the_export_holds_no_path_of_the_machine's second export)
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = explore("--ckpt", "one-block.safetensors", "--export", empty, cwd=runs)
    assert proc.returncode == 0, proc.stderr
    # a folder that a killed export left: the temporary files of its names, and an empty data/
    killed = tmp_path / "killed"
    (killed / "data").mkdir(parents=True)
    (killed / "data" / "weights.safetensors.999999999.abcd1234.tmp").write_bytes(b"half a file")
    (killed / "index.html.999999999.abcd1234.tmp").write_bytes(b"half a page")
    proc = explore("--ckpt", "one-block.safetensors", "--export", killed, cwd=runs)
    assert proc.returncode == 0, proc.stderr
    assert not list(killed.rglob("*.tmp")) and sorted(kinds_under(killed)) == sorted(kinds_under(empty))


def test_two_exports_into_one_folder_do_not_mix(runs, explore, tmp_path):
    """While another export writes a folder (it holds data/manifest.json's lock), a second is refused in one line,
    and writes nothing."""
    from atomic import hold

    site = tmp_path / "site"
    with hold(site / "data" / "manifest.json", "another export"):
        proc = explore("--ckpt", "one-block.safetensors", "--export", site, cwd=runs)
        one_line_error(proc, "in use by another run (another export)")
        assert sorted(p.name for p in (site / "data").iterdir()) == ["manifest.json.lock"]
    assert not site.exists()


# explore.py --export, its SIGTERM sent the instant the export makes its first temporary file, in a process with
# another thread (as NumPy's BLAS pool is), which the system may hand the signal to
SIGNALLED_EXPORT = """
import os, signal, sys, threading, time
sys.path.insert(0, sys.argv[1])
import explore

threading.Thread(target=threading.Event().wait, daemon=True).start()
real_open = os.open

def open_then_signalled(path, flags, mode=0o777):
    fd = real_open(path, flags, mode)
    if str(path).endswith(".tmp"):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
    return fd

os.open = open_then_signalled
sys.exit(explore.main(sys.argv[2:]))
"""


@pytest.mark.skipif(os.name != "posix", reason="signals to a process are POSIX's")
def test_a_signalled_export_says_so_in_one_line_and_leaves_the_old_export(runs, explore, tmp_path):
    """Before: a traceback, and now and then a temporary file or the lock left in the folder."""
    site = tmp_path / "site"
    assert explore("--ckpt", "one-block.safetensors", "--export", site, cwd=runs).returncode == 0
    before = kinds_under(site)
    proc = subprocess.run([sys.executable, "-c", SIGNALLED_EXPORT, str(ROOT), "--ckpt", "one-block.safetensors",
                           "--export", str(site)], capture_output=True, text=True, cwd=runs, timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM and proc.stdout == "", proc.stderr
    assert proc.stderr == f"interrupted (SIGTERM): the export wrote nothing; {site} is as it was\n"
    assert kinds_under(site) == before
