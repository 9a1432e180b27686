"""The explorer's server (oneblock/server.py, which explore.py serves with) against bad and hostile requests: links out
of the folder, folders, bad paths, malformed request lines, a TLS hello sent to the plain-HTTP port, and idle
connections.

Each case is sent over a raw socket to the real server (serving.make_server on a temporary folder), run in its own
process with its stderr in a file, so that every reply's status and body and every log line it wrote are checked,
and no case may leave a traceback there."""

import inspect
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oneblock import server as serving
from run_helpers import serving_explorer

ROOT = Path(__file__).resolve().parent.parent

TIMEOUT = 2.0  # the idle timeout of the server under test, in seconds (serving.IDLE_TIMEOUT is the real one)
SECRET = "a file outside the served folder: never sent"
PAGE = "<!doctype html><title>the page</title>\n"
MODULE = "export const answer = 42;\n"
SERVE = ("import sys\nfrom oneblock.server import make_server\n"
         "server = make_server(sys.argv[1], 0, timeout=float(sys.argv[2]))\n"
         "print(server.server_port, flush=True)\n"
         "server.serve_forever()\n")


# ----------------------------------------------------------------------------------------------------------------
# The folder, the server in a process of its own, and raw exchanges with it


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
    """serving.make_server(site, 0, timeout=TIMEOUT) serving in a child process, its stderr in a file."""

    def __init__(self, folder, log):
        self.log = log
        with open(log, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", SERVE, str(folder), str(TIMEOUT)], cwd=ROOT,
                                         stdout=subprocess.PIPE, stderr=err, text=True)
        line = self.proc.stdout.readline()
        assert line.strip().isdigit(), f"the server did not start: {self.stop()}"
        self.port = int(line)

    def exchange(self, request, wait=10):
        """(the whole reply, what the server logged meanwhile): request sent at once, then read until the server
        closes the connection. The server logs before it replies, so the log is complete when the reply is."""
        mark = self.log.stat().st_size
        with socket.create_connection(("127.0.0.1", self.port), timeout=wait) as sock:
            sock.sendall(request)
            reply = read_all(sock)
        return reply, self.log.read_bytes()[mark:].decode("ascii")  # ascii: a log line escapes what it shows

    def get(self, path):
        return self.exchange(b"GET " + path.encode("latin-1") + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")

    def stop(self):
        """End the server (it is this test module's own child) and give its whole stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.proc.stdout.close()
        return self.log.read_text(encoding="latin-1")


@pytest.fixture(scope="module")
def server(site, tmp_path_factory):
    served = Served(site, tmp_path_factory.mktemp("explore-server-log") / "stderr.txt")
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(autouse=True)
def no_traceback(request):
    """After each test, whatever it sent: the server is still up and wrote no traceback to its stderr meanwhile."""
    served = request.getfixturevalue("server") if "server" in request.fixturenames else None
    mark = served and served.log.stat().st_size
    yield
    if served:
        assert served.proc.poll() is None, served.stop()
        assert b"Traceback" not in served.log.read_bytes()[mark:]


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


def test_a_page_file_is_served_with_its_type_uncached_and_not_logged(server):
    reply, log = server.get("/page.js")
    assert status(reply) == 200 and body(reply) == MODULE.encode()
    assert header(reply, "Content-Type") == "text/javascript" and header(reply, "Cache-Control") == "no-store"
    assert log == ""  # successes are quiet
    reply, log = server.exchange(b"HEAD /index.html HTTP/1.0\r\n\r\n")
    assert status(reply) == 200 and body(reply) == b"" and header(reply, "Content-Length") == str(len(PAGE))
    assert header(reply, "Content-Type") == "text/html" and log == ""


def test_a_link_that_stays_inside_the_folder_is_served(server):
    reply, _ = server.get("/alias.js")
    assert status(reply) == 200 and body(reply) == MODULE.encode()
    assert header(reply, "Content-Type") == "text/javascript"


@pytest.mark.parametrize("path", ["/leak.txt", "/leaks/secret.txt", "/trap/index.html", "/trap/", "/leaks/"])
def test_a_link_out_of_the_folder_is_404_and_its_target_never_sent(server, path):
    reply, log = server.get(path)
    assert status(reply) == 404 and SECRET.encode() not in reply and b"secret" not in reply
    assert one_log_line(log, 404) == f"GET {path}: HTTP 404"


def test_a_folder_is_never_listed(server):
    for path in ("/data/", "/data", "/sub/..%2fdata/"):
        reply, log = server.get(path)
        assert status(reply) in (400, 404), (path, reply)
        assert b"manifest.json" not in reply and b"listing" not in reply.lower()
        one_log_line(log, status(reply))
    reply, _ = server.get("/sub")  # a folder with its own index.html: sent there, with the slash its links need
    assert status(reply) == 301 and header(reply, "Location") == "/sub/"
    reply, _ = server.get("/sub/")
    assert status(reply) == 200 and b"<title>sub</title>" in body(reply)
    reply, _ = server.get("/")
    assert status(reply) == 200 and body(reply) == PAGE.encode()


def test_only_regular_files_are_served(server, site):
    if not (site / "fifo").exists():
        pytest.skip("no named pipes on this OS")
    reply, log = server.get("/fifo")  # opening a pipe for reading would wait for a writer: never opened
    assert status(reply) == 404 and one_log_line(log, 404) == "GET /fifo: HTTP 404"


@pytest.mark.parametrize("path, code", [
    ("/%00", 400),  # a NUL: no file has one in its name
    ("/index.html%00.js", 400),
    ("/%0d%0aSet-Cookie:%20x", 400),  # control characters
    ("/..%2f..%2foutside%2fsecret.txt", 400),  # encoded slashes
    ("/sub%2findex.html", 400),
    ("/../outside/secret.txt", 400),  # dot segments (a browser removes them before it asks)
    ("/%2e%2e/outside/secret.txt", 400),
    ("/sub/./index.html", 400),
    ("/..\\outside\\secret.txt", 400),  # backslashes, raw and encoded
    ("/%5c..%5coutside%5csecret.txt", 400),
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


def tls_client_hello():
    """The first bytes a TLS client sends: a real ClientHello, from the ssl module, over no socket."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    hello = outgoing.read()
    assert hello[:1] == b"\x16" and len(hello) > 100  # a handshake record
    return hello


@pytest.mark.parametrize("request_bytes, code", [
    pytest.param(b"GARBAGE\r\n\r\n", 400, id="garbage"),
    pytest.param(b"GARBAGE HTTP/1.0\r\n\r\n", 400, id="one word and a version"),
    pytest.param(b"GET / HTTP/one\r\n\r\n", 400, id="a bad version"),
    pytest.param(b"GET / HTTP/9.9\r\n\r\n", 505, id="HTTP/9.9"),
    pytest.param(b"GET / HTTP/1.0 again\r\n\r\n", 400, id="four words"),
    pytest.param(b"POST /\r\n\r\n", 400, id="HTTP/0.9 POST"),
    pytest.param(b"BREW /pot HTTP/1.0\r\n\r\n", 501, id="an unknown method"),
    pytest.param(b"GET /" + b"a" * 100_000 + b" HTTP/1.0\r\n\r\n", 414, id="a 100,000-character URL"),
    pytest.param(b"GET /" + b"a" * 16_000_000 + b" HTTP/1.0\r\n\r\n", 414,
                 id="a 16 MB URL, more than the socket buffers hold: the reply is not lost to a reset"),
    pytest.param(b"GET / HTTP/1.0\r\nX: " + b"a" * 100_000 + b"\r\n\r\n", 431, id="a header line too long"),
    pytest.param(b"GET /\x1b[2J\x00\x07 HTTP/1.0\r\n\r\n", 400, id="control characters"),
])
def test_a_malformed_request_is_its_status_and_one_short_log_line(server, request_bytes, code):
    reply, log = server.exchange(request_bytes)
    assert status(reply) == code
    assert b"Error code: %d" % code in body(reply) and header(reply, "Connection") == "close"
    one_log_line(log, code)


def test_a_log_line_escapes_the_control_characters_of_the_request(server):
    _, log = server.exchange(b"GET /\x1b[2J\x00 HTTP/1.0\r\n\r\n")
    assert one_log_line(log, 400) == r"GET /\x1b[2J\x00: HTTP 400"
    _, log = server.exchange(b"\x1b]0;owned\x07 / HTTP/1.0\r\n\r\n")  # a terminal title, as a method
    assert one_log_line(log, 400).startswith(r"\x1b]0;owned\x07")
    _, log = server.exchange(b"GET /" + b"a" * 100_000 + b" HTTP/1.0\r\n\r\n")
    assert one_log_line(log, 414).startswith("GET /aaaa")  # shortened, and the line says so
    assert "..." in log


def test_a_tls_hello_on_the_http_port_is_400_at_once(server):
    """A client that speaks TLS to the plain-HTTP port gets a plain 400 at once, not a wait for a line's end that
    its binary hello may never have."""
    start = time.monotonic()
    reply, log = server.exchange(tls_client_hello())
    assert status(reply) == 400 and b"not an HTTP request" in reply
    assert time.monotonic() - start < TIMEOUT / 2  # answered, not timed out
    assert one_log_line(log, 400).startswith(r"\x16\x03")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:  # a real TLS client
        with pytest.raises(ssl.SSLError):
            ssl.create_default_context().wrap_socket(sock, server_hostname="127.0.0.1")


# ----------------------------------------------------------------------------------------------------------------
# Idle connections


@pytest.mark.parametrize("sent", [b"", b"GET /index.html HT", b"GET /index.html HTTP/1.0\r\nHost: 127.0.0.1\r\n"])
def test_an_idle_connection_is_closed_after_the_timeout(server, sent):
    """A client that connects and sends nothing, or stops in the middle of its request line or headers, is hung up on
    once it has been idle for the timeout: quietly, since browsers open connections ahead that they never use."""
    mark = server.log.stat().st_size
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT + 10) as sock:
        start = time.monotonic()
        sock.sendall(sent)
        reply = read_all(sock)  # the server's end: b"" (a socket.timeout here is the defect)
        waited = time.monotonic() - start
    assert reply == b"" and TIMEOUT * 0.8 <= waited <= TIMEOUT + 5, (reply, waited)
    assert server.log.read_bytes()[mark:] == b""


def test_the_real_idle_timeout_is_sane():
    """explore.py serves with IDLE_TIMEOUT: long enough for a slow page load, short enough to free a thread soon."""
    assert 10 <= serving.IDLE_TIMEOUT <= 30
    assert inspect.signature(serving.make_server).parameters["timeout"].default == serving.IDLE_TIMEOUT


def test_explore_py_answers_bad_requests_with_their_status_and_stops_cleanly(tmp_path):
    """The same through python3 explore.py --no-open (serving explorer/ with the real idle timeout): statuses, one
    short line each on stderr and no traceback, successes quiet, and Ctrl-C still stops it."""
    proc, url = serving_explorer(tmp_path)
    try:
        port = int(url.split(":")[2].split("/")[0])
        replies = []
        for request in (b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"GET /%00 HTTP/1.0\r\n\r\n",
                        b"GET /..%2fexplore.py HTTP/1.0\r\n\r\n", b"GET /data/ HTTP/1.0\r\n\r\n",
                        b"GET /" + b"a" * 100_000 + b" HTTP/1.0\r\n\r\n", tls_client_hello(),
                        b"GET /index.html HTTP/1.0\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(request)
                replies.append(read_all(sock))
        assert [status(r) for r in replies] == [400, 505, 400, 400, 404, 414, 400, 200]
        assert b"import " not in replies[3] and b"weights.safetensors" not in replies[4]
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and "stopped" in out and "Traceback" not in err, err
    lines = [x for x in err.splitlines() if not x.startswith("note: ")]  # the note: the model is untrained
    assert [x.rsplit(": HTTP ", 1)[1] for x in lines] == ["400", "505", "400", "400", "404", "414", "400"], err
    assert all(len(x) <= 200 and re.fullmatch(r"[ -~]*", x) for x in lines), err


def test_the_server_binds_127_0_0_1_only(tmp_path):
    served = serving.make_server(tmp_path, 0)
    try:
        assert served.server_address[0] == "127.0.0.1"
    finally:
        served.server_close()
