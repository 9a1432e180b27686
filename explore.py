"""Export a checkpoint and the data for the browser explorer, and serve it on this machine.

    python3 explore.py                   # export into explorer/data/, serve explorer/ on 127.0.0.1, open the browser
    python3 explore.py --no-open --port 8000
    python3 explore.py --ckpt other.safetensors
    python3 explore.py --ckpt runs/notes.safetensors --data texts/notes.txt   # a model of your own text, its text
    python3 explore.py --export out/site/    # write a self-contained folder for any static host, and stop

Standard library only. This file is the command line: what the export holds is oneblock/export.py's, how the server
serves it oneblock/server.py's; what it refuses, in one line with exit status 2 before anything is written, is
docs/explorer.md's ("Opening it", "Which models it runs").
"""

import argparse
import sys
import webbrowser
from pathlib import Path

from atomic import interruptible, interruption
from oneblock.export import EXPLORER, export_data, export_site, read_weights
from oneblock.server import make_server

# ----------------------------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Export a checkpoint for the browser explorer and serve it on 127.0.0.1.", allow_abbrev=False)
    parser.add_argument("--ckpt", default=None, metavar="PATH",
                        help="the checkpoint to explore (default: out/ckpt.safetensors, as train.py writes it; without"
                             " one, the untrained seed-3 weights)")
    parser.add_argument("--data", default=None, metavar="FILE",
                        help="for a model of your own text: the text it learned, checked against the SHA-256 the"
                             " checkpoint recorded (default: the file of the name it recorded, beside the checkpoint or"
                             " in the current folder)")
    parser.add_argument("--port", type=int, default=0, metavar="N",
                        help="the port to serve on (default: a free one)")
    parser.add_argument("--no-open", action="store_true", help="do not open a browser; just print the URL")
    parser.add_argument("--export", default=None, metavar="DIR",
                        help="write a self-contained folder (the page and its data) for any static host, and stop")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port {args.port} is not a port; expected 0 (a free one) to 65535")
    if args.export is not None and Path(args.export).exists() and not Path(args.export).is_dir():
        parser.error(f"--export {args.export} is a file; expected a folder (it is made if missing)")
    try:
        weights, fields = read_weights(args.ckpt or "out/ckpt.safetensors", explicit=args.ckpt is not None,
                                       data=args.data)  # (without --ckpt: where train.py writes by default)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not fields["trained"]:
        print(f"note: {fields['source']}; the page says that the model is untrained", file=sys.stderr)

    if args.export is not None:
        try:
            with interruptible():  # (Ctrl-C, SIGTERM or SIGHUP: the export's clean-up runs, and one line says so)
                export_site(args.export, weights, fields)
        except ValueError as e:  # a folder that cannot be made or written, a full disk: nothing was written
            print(f"error: --export {args.export}: {e}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as e:
            name, status = interruption(e)
            print(f"interrupted ({name}): the export wrote nothing; {args.export} is as it was", file=sys.stderr)
            return status
        print(f"wrote the explorer to {args.export}: serve that folder over HTTP (for example python3 -m"
              f" http.server -d {args.export} -b 127.0.0.1) and open index.html")
        return 0

    try:
        server = make_server(EXPLORER, args.port)
    except OSError as e:
        print(f"error: cannot serve on 127.0.0.1 port {args.port} ({e.strerror}); pass another --port, or leave it"
              f" out for a free one", file=sys.stderr)
        return 2
    with server:
        try:
            with interruptible():
                export_data(EXPLORER / "data", weights, fields)
        except ValueError as e:  # explorer/data cannot be made or written: nothing was written
            print(f"error: {e}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as e:
            name, status = interruption(e)
            print(f"interrupted ({name}) before serving: explorer/data is as it was", file=sys.stderr)
            return status
        url = f"http://127.0.0.1:{server.server_port}/index.html"
        print(f"serving the explorer at {url} (Ctrl-C stops)", flush=True)
        if not args.no_open:
            webbrowser.open(url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
