"""Files that survive crashes and concurrent runs: write a file so that a crash at any moment leaves either the old
file or the new one, never half of one (`write_atomic`; several, all or none: `write_together`), and read one whole
with a clear message when it cannot be (`read_whole`); own a path while a run writes it, so that a second run cannot
silently replace the first one's results (`hold`).

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = pathlib.Path(d) / "note.txt"
    ...     write_atomic(path, "hello\\n")
    ...     path.read_text(), sorted(p.name for p in pathlib.Path(d).iterdir())
    ('hello\\n', ['note.txt'])
"""

import os
import stat
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path

LOCK_OFFSET = 1 << 20  # Windows locks a byte range: one byte here, far past the holder's note

# ----------------------------------------------------------------------------------------------------------------
# Writing a file whole


def write_atomic(path, data):
    """Write data (str as UTF-8 with "\\n" line ends, or bytes) to a temporary file beside path, flush it to disk,
    then rename it over path in one step."""
    write_together({path: data})


def write_together(files):
    """Write files {path: data} all or none, each as write_atomic writes one: every file to a temporary file beside
    it first, and only once all are on disk, each renamed over its path. A write that fails (a full disk, a file too
    large, a folder that cannot be written) removes the temporary files and leaves every path as it was; it is an
    OSError whose filename is the path that could not be written. (Only a rename that fails, after all the data is
    written, could leave the paths before it new.)

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     write_together({Path(d) / "a.txt": "one\\n", Path(d) / "b.bin": b"two"})
    ...     sorted(p.name for p in Path(d).iterdir())
    ['a.txt', 'b.bin']
    """
    staged = []
    try:
        for path, data in files.items():
            path = Path(path)
            try:
                staged.append((_staged(path, data), path))
            except OSError as e:
                raise OSError(e.errno, e.strerror, str(path)) from None
        while staged:
            tmp, path = staged[0]
            os.replace(tmp, path)
            staged.pop(0)
    except BaseException:
        for tmp, _ in staged:
            with suppress(OSError):
                os.unlink(tmp)
        raise


def _staged(path, data):
    """The name of a temporary file beside path holding data, flushed to disk and readable by all; nothing is left
    behind when it cannot be written."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # an ordinary readable file, as open() would make
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


@contextmanager
def folder_for(path):
    """Make the folder of path, and any missing above it, for the duration of a with-block; at its end, remove the
    ones it made that were left empty, so that a write that failed leaves nothing behind. A ValueError names a
    folder that cannot be made (a file in the way, a folder that cannot be written).

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with folder_for(pathlib.Path(d) / "a" / "b" / "note.txt"):
    ...         made = (pathlib.Path(d) / "a" / "b").is_dir()
    ...     made, (pathlib.Path(d) / "a").exists()
    (True, False)
    """
    path = Path(path)
    made = [folder for folder in (path.parent, *path.parent.parents) if not folder.exists()]  # deepest first
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        for folder in made:
            with suppress(OSError):
                folder.rmdir()
        raise ValueError(f"{path}: cannot create the folder {path.parent} ({e.strerror or e})") from None
    try:
        yield
    finally:
        for folder in made:
            with suppress(OSError):  # not empty: something was written there, which stays
                folder.rmdir()


def read_whole(path, what, most=None):
    """The bytes of the file at path, read once; a ValueError that starts with the path when it is a folder (saying
    that what was expected there, such as "a checkpoint file", is a file), not a regular file (a FIFO, a terminal or
    a device such as /dev/zero: something that may never end, or that a second read would find empty), larger than
    most bytes (when given), or cannot be read (saying why). Nothing is read before these checks.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = Path(d) / "notes.txt"
    ...     _ = path.write_bytes(b"x" * 100)
    ...     try:
    ...         read_whole(path, "a text file", most=64)
    ...     except ValueError as e:
    ...         print(str(e).replace(d, "D"))
    D/notes.txt is 100 bytes, more than the 64 bytes read as a text file
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not {what}")
    try:  # without waiting: opening a FIFO that nobody writes to would block until someone does
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as e:
        raise ValueError(f"{path}: cannot read it ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{path} is {kind_of(mode)}, not a regular file; expected {what} (save a stream to a"
                             f" file first)")
        size = os.fstat(fd).st_size
        if most is not None and size > most:
            raise ValueError(f"{path} is {size:,} bytes, more than the {most:,} bytes read as {what}")
        try:
            raw = f.read() if most is None else f.read(most + 1)  # (a file that grows as it is read stops here)
        except OSError as e:
            raise ValueError(f"{path}: cannot read it ({e.strerror or e})") from None
    if most is not None and len(raw) > most:
        raise ValueError(f"{path} grew past {most:,} bytes while it was read; expected {what} that stays put")
    return raw


def kind_of(mode):
    """What a file that is not a regular file is, in words, from its st_mode.

    >>> kind_of(stat.S_IFIFO), kind_of(stat.S_IFCHR)
    ('a FIFO (a named pipe)', 'a character device')
    """
    kinds = [(stat.S_ISFIFO, "a FIFO (a named pipe)"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")]
    return next((name for test, name in kinds if test(mode)), "not an ordinary file")


# ----------------------------------------------------------------------------------------------------------------
# Owning a path while a run writes it


def _try_lock(fd):
    """Take the exclusive lock on the open file fd without waiting; False if another process holds it. The
    operating system drops the lock when the process ends, however it ends (a SIGKILL included)."""
    try:
        if os.name == "nt":
            import msvcrt

            os.lseek(fd, LOCK_OFFSET, os.SEEK_SET)  # lock one byte past the holder's note, which stays readable
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError on POSIX, PermissionError on Windows
        return False
    return True


@contextmanager
def hold(path, note):
    """Own path for the duration of a with-block: create its folder (removed again at the end if the block left
    nothing in it, as folder_for does), and take the lock file path + ".lock" beside it, recording note (who holds
    it) there. A ValueError, before anything else is done, names the path and what stops it: another process
    holding it (with that holder's note), or a folder that cannot be made or written.

    The lock is the operating system's, tied to the open file, so a process that is killed leaves no stale lock:
    the next run takes over the file it left. On a normal exit the lock file is removed.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = pathlib.Path(d) / "runs" / "ckpt.bin"
    ...     with hold(path, "first run"):
    ...         try:
    ...             with hold(path, "second run"):
    ...                 pass
    ...         except ValueError as e:
    ...             print(str(e).replace(d, "D"))
    ...     path.parent.exists()  # the lock file is gone, and so is the folder hold made for it
    D/runs/ckpt.bin is in use by another run (first run)
    False
    """
    path = Path(path)
    lock = path.with_name(path.name + ".lock")
    with folder_for(path):
        fd = _take(path, lock)
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, note.encode("utf-8"))
            yield
        finally:
            if os.name == "nt":  # Windows cannot remove an open file
                os.close(fd)
                with suppress(OSError):
                    os.unlink(lock)
            else:  # removed while still locked, so no other process can be holding this very file
                os.unlink(lock)
                os.close(fd)


def _take(path, lock):
    """The open, locked file descriptor of the lock file for path; a ValueError if another process holds it."""
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise ValueError(f"{path}: cannot write in the folder {path.parent} ({e.strerror or e})") from None
        if not _try_lock(fd):
            os.lseek(fd, 0, os.SEEK_SET)
            holder = os.read(fd, 1000).decode("utf-8", "replace").strip()
            os.close(fd)
            raise ValueError(f"{path} is in use by another run ({holder or 'its holder wrote no note yet'})")
        try:
            if os.path.samestat(os.fstat(fd), os.stat(lock)):
                break
        except FileNotFoundError:
            pass
        os.close(fd)  # the previous holder removed this lock file as we opened it: take the new one
    return fd
