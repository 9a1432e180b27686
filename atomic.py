"""Write a file so that a crash at any moment leaves either the old file or the new one, never half of one.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = pathlib.Path(d) / "note.txt"
    ...     write_atomic(path, "hello\\n")
    ...     path.read_text(), sorted(p.name for p in pathlib.Path(d).iterdir())
    ('hello\\n', ['note.txt'])
"""

import os
import tempfile
from pathlib import Path


def write_atomic(path, data):
    """Write data (str as UTF-8 with "\\n" line ends, or bytes) to a temporary file beside path, flush it to disk,
    then rename it over path in one step."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # an ordinary readable file, as open() would make
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
