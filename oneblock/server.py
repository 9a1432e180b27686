"""The explorer's web server: the regular files of one folder, on 127.0.0.1 only, and nothing else.

It answers only requests whose Host header names it (127.0.0.1, localhost or [::1], with its port), so that a page
elsewhere on the web cannot read the folder by DNS rebinding; serves only regular files inside its folder, after
resolving links (a link out of it is a 404), never lists a folder, answers every malformed request with its status
(400, 404, 414, 421, 431, 501, 505) in one short escaped log line, tells the browser not to cache (a new export shows
on reload), serves .js as JavaScript on every OS, and closes connections that stay idle.

    >>> served_file(".", "/%00"), served_file(".", "/..%2fetc%2fpasswd"), served_file(".", "/no-such-file")
    (400, 400, 404)
"""

import functools
import http.server
import os
import re
import socket
import sys
import time
import urllib.parse
from http import HTTPStatus
from pathlib import Path

# served types that some systems' MIME registries get wrong (a module script served as text/plain does not run)
MIME_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css", ".html": "text/html",
              ".json": "application/json", ".safetensors": "application/octet-stream"}
IDLE_TIMEOUT = 15  # seconds a connection may send nothing (or stop mid-request) before the server hangs up
LINGER_SECONDS = 2  # the most a closing connection waits for the client to stop sending (see Server)
LOG_CHARS = 120  # the most of a request that a log line shows
OWN_NAMES = ("127.0.0.1", "localhost", "[::1]")  # what a Host header may name, with the server's port
HOST_SYNTAX = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9._~-]+)(?::([0-9]*))?")  # a name or [address], and a port
HOST_REFUSED = {400: "Bad request: expected one Host header naming this server",
                421: "Misdirected request: this server answers only to its own names"}


# ----------------------------------------------------------------------------------------------------------------
# Whom a request is for, and which file it names


def host_status(hosts, port):
    """None if hosts, the values of a request's Host header lines, name the server at 127.0.0.1:port, else the
    status that refuses the request, before anything of the folder is looked at: 400 when there is not exactly one
    host and port (RFC 9112, section 3.2), 421 for a name other than OWN_NAMES or another port, as docs/explorer.md
    says (a bare name means port 80, RFC 9110, section 4.2.1).

    >>> host_status(["127.0.0.1:8765"], 8765), host_status(["LocalHost.:8765"], 8765), host_status(["[::1]:080"], 80)
    (None, None, None)
    >>> host_status(["evil.example:8765"], 8765), host_status(["localhost"], 8765), host_status(["localhost"], 80)
    (421, 421, None)
    >>> host_status([], 8765), host_status([""], 8765), host_status(["a:1", "a:1"], 8765)
    (400, 400, 400)
    """
    if len(hosts) != 1:
        return 400
    found = HOST_SYNTAX.fullmatch(hosts[0].strip(" \t").lower())
    if found is None:
        return 400
    name, given = found.groups()
    same_port = (given or "80").lstrip("0") == str(port)  # (compared as text: a port of 5,000 digits is no int)
    return None if name.removesuffix(".") in OWN_NAMES and same_port else 421


def served_file(directory, target):
    """The real path of the regular file in directory that a request target (the path of a request line) names, or
    the status that answers it instead: 301 for a folder named without its slash whose index.html would be served
    (add the slash), 400 for a path that no file of the folder can have (not from the root, not UTF-8, or with a NUL
    or other control character, a backslash, an encoded slash or a . or .. segment; browsers send none of these), 404
    for anything missing, not a regular file (a folder without index.html, a pipe) or outside the folder once links
    are resolved. A folder named with its slash stands for its index.html; no folder is listed.

    >>> served_file(".", "/index.html")
    404
    """
    path = target.split("?", 1)[0].split("#", 1)[0]
    if not path.startswith("/"):
        return 400
    names = []
    for part in path.split("/")[1:]:
        try:
            name = urllib.parse.unquote(part, errors="strict")
        except UnicodeDecodeError:
            return 400
        if name in (".", "..") or re.search(r"[\x00-\x1f\x7f-\x9f/\\]", name):
            return 400
        names.append(name)
    root = os.path.realpath(directory)

    def inside(name):  # the real path of name if that is a regular file in the folder, else None
        real = os.path.realpath(name)
        return real if Path(real).is_relative_to(root) and os.path.isfile(real) else None

    found = os.path.realpath(os.path.join(root, *names))
    if Path(found).is_relative_to(root) and os.path.isdir(found):
        index = inside(os.path.join(found, "index.html"))
        if index is None:
            return 404
        return index if path.endswith("/") else 301
    return inside(found) or 404


def printable(text, limit=LOG_CHARS):
    r"""text for a log line: control characters, backslashes and non-ASCII escaped (a request cannot write to the
    terminal it is logged on), and cut to limit characters, with "..." where it was cut.

    >>> print(printable("GET /\x1b[2J\x00"), printable("GET /" + "a" * 200, 12))
    GET /\x1b[2J\x00 GET /aaaaaaa...
    """
    shown = text.encode("unicode_escape").decode("ascii")
    return shown if len(shown) <= limit else shown[:limit] + "..."


# ----------------------------------------------------------------------------------------------------------------
# The handler and the server


class Handler(http.server.SimpleHTTPRequestHandler):
    """What the module says, request by request: host_status and served_file decide, a connection idle for timeout
    seconds is closed quietly (browsers open some ahead that they never use), and a TLS hello is a 400 (this server
    speaks plain HTTP); the base class answers 414 and 431 (a line over 64 KiB), 501 and 505."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES}
    default_request_version = "HTTP/1.0"  # a reply to a request line without a version still has a status line

    def __init__(self, *args, timeout=IDLE_TIMEOUT, **kwargs):
        self.timeout = timeout  # read by setup(), which the base class's __init__ runs
        super().__init__(*args, **kwargs)

    def handle_one_request(self):
        self.command = self.path = None  # until the request line is read: the log line shows what was
        self.host_said = None  # what the log line says of a Host that was refused
        self.raw_requestline = b""
        self.request_version = self.default_request_version
        try:
            first = self.rfile.peek(1)  # what has arrived, once anything has: an idle client times out here
        except TimeoutError:
            self.close_connection = True
            return
        if first and not (0x21 <= first[0] <= 0x7e or first[:1] in b"\r\n"):  # a request starts with its method
            self.raw_requestline = first[:LOG_CHARS]  # a TLS hello starts \x16\x03: don't wait for a line's end
            self.send_error(HTTPStatus.BAD_REQUEST, "Bad request: not an HTTP request")
            return
        super().handle_one_request()

    def send_head(self):
        hosts = self.headers.get_all("Host") or []
        refused = host_status(hosts, self.server.server_address[1])
        if refused is not None:  # before the path is looked at: nothing of the folder, not even what exists
            self.host_said = (f"Host {hosts[0]!r}" if len(hosts) == 1 else f"{len(hosts)} Host lines" if hosts
                              else "no Host")
            self.send_error(refused, HOST_REFUSED[refused])
            return None
        found = served_file(self.directory, self.path)
        if found == HTTPStatus.MOVED_PERMANENTLY:
            parts = urllib.parse.urlsplit(self.path)
            self.send_response(found)
            self.send_header("Location", urllib.parse.urlunsplit(parts._replace(path=parts.path + "/")))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if isinstance(found, int):
            self.send_error(found, "Bad request path" if found == HTTPStatus.BAD_REQUEST else "File not found")
            return None
        try:
            f = open(found, "rb")
        except OSError:  # removed or unreadable since it was checked
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", self.guess_type(found))
            self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
            self.end_headers()
        except BaseException:
            f.close()
            raise
        return f

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format, *args):
        pass  # quiet: the page shows its own problems

    def log_request(self, code="-", size="-"):
        code = getattr(code, "value", code)
        if str(code)[:1] in ("4", "5"):
            what = (f"{self.command} {self.path}" if self.command and self.path
                    else str(self.raw_requestline, "iso-8859-1").rstrip("\r\n"))  # a request line that failed
            what += f" ({self.host_said})" if self.host_said else ""
            print(f"{printable(what)}: HTTP {code}", file=sys.stderr, flush=True)


class Server(http.server.ThreadingHTTPServer):
    """One thread per request; a client that hangs up in the middle of a reply is not an error worth a traceback. A
    connection ends in a lingering close, so that a reply sent before the request was read whole (a 414 for a long
    URL) reaches the client instead of being lost to the reset that closing unread input sends."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipeError, ConnectionResetError, ...
            super().handle_error(request, client_address)

    def shutdown_request(self, request):
        try:
            request.shutdown(socket.SHUT_WR)  # the reply is whole: the client reads it to its end
            deadline = time.monotonic() + LINGER_SECONDS
            while (left := deadline - time.monotonic()) > 0:  # and what it still sends is read and dropped
                request.settimeout(left)
                if not request.recv(65536):
                    break
        except OSError:  # hung up, reset or still sending at the deadline: closed all the same
            pass
        self.close_request(request)


def make_server(directory, port=0, timeout=IDLE_TIMEOUT):
    """A server for directory on 127.0.0.1 (port 0: a free one) that closes connections idle for timeout seconds;
    it is bound, not yet serving."""
    return Server(("127.0.0.1", port), functools.partial(Handler, directory=str(directory), timeout=timeout))
