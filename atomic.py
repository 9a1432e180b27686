"""Files that survive crashes and concurrent runs: write a file so that a crash at any moment leaves either the old file
or the new one, never half of one (`write_atomic`; several, all or none: `write_together`), and remove only the
temporary files that a killed writer left (`remove_leftovers`); read one whole with a clear message when it cannot be
(`read_whole`); refuse a name the file system cannot take, or a file that is not of a writer's kind, before any work
(`output_problem`); and own a path while a run writes it, so that a second run cannot silently
replace the first one's results, with a lock that follows no link and opens nothing already at its name (`hold`).
Every command that writes a file owns it with `own` before any work (its path judged, its lock held).

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = pathlib.Path(d) / "note.txt"
    ...     write_atomic(path, "hello\\n")
    ...     path.read_text(), sorted(p.name for p in pathlib.Path(d).iterdir())
    ('hello\\n', ['note.txt'])
"""

import os
import platform
import re
import signal
import stat
import sys
import tempfile
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path

LOCK_OFFSET = 1 << 20  # Windows locks a byte range: one byte here, far past the holder's note

# ----------------------------------------------------------------------------------------------------------------
# Writing a file whole


def write_atomic(path, data, mode=0o644):
    """Write data (str as UTF-8 with "\\n" line ends, or bytes) to a temporary file beside path, flush it to disk,
    then rename it over path in one step, with the permissions mode less the umask (write_together writes it)."""
    write_together({path: data}, {path: mode})


def write_new(path, text):
    """Write text to path, which must not exist (a learner's file: whole or not at all, and never over a file, a link
    or a folder there, made or not by this lab). A ValueError names the path and says why.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     write_new(Path(d) / "model.py", "x = 1\\n")
    ...     try:
    ...         write_new(Path(d) / "model.py", "x = 2\\n")
    ...     except ValueError as e:
    ...         print(str(e).replace(d, "D"))
    D/model.py exists: your work is never written over (choose another folder, or move that file away)
    """
    path = Path(path)
    if os.path.lexists(path):
        raise ValueError(f"{path} exists: your work is never written over (choose another folder, or move that file"
                         f" away)")
    if path.parent.exists() and not path.parent.is_dir():
        raise ValueError(f"{path.parent} is a file; expected a folder")
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "x", encoding="utf-8") as f:  # (x: never through a file or a link already there)
        f.write(text)
    try:
        os.link(temporary, path)  # (fails if anything took the name meanwhile: nothing is replaced)
    except FileExistsError:
        raise ValueError(f"{path} exists: your work is never written over") from None
    finally:
        os.unlink(temporary)


def write_together(files, modes=None):
    """Write files {path: data} all or none, each as write_atomic writes one: every file to a temporary file beside
    it first, and only once all are on disk, each renamed over its path. modes: {path: permissions} for the files
    that are not to be 0o644; every file gets its permissions with the process's umask taken off them (mode &
    ~umask), as open() would make them, so that nothing written is more open than the user's umask allows (umask
    0o022: 0o644 stays 0o644; umask 0o077: every file is its owner's alone). A write that fails (a full disk, a file
    too large, a folder that cannot be written) removes the temporary files and leaves every path as it was; it is
    an OSError whose filename is the path that could not be written. (Only a rename that fails, after all the data is
    written, could leave the paths before it new.)

    A temporary file is named after its path, the writer's process ID and a random part (path.PID.RANDOM.tmp), and
    its writer holds the operating system's lock on it until it is renamed, so that a later run can tell one that a
    killed writer left (remove_leftovers) from one that is being written.

    >>> import tempfile
    >>> before = os.umask(0o027)  # a user's umask: the group may read, others nothing
    >>> try:
    ...     with tempfile.TemporaryDirectory() as d:
    ...         write_together({Path(d) / "a.txt": "one\\n", Path(d) / "b.bin": b"two"}, {Path(d) / "b.bin": 0o600})
    ...         print(sorted((p.name, oct(p.stat().st_mode & 0o777)) for p in Path(d).iterdir()))
    ... finally:
    ...     _ = os.umask(before)
    [('a.txt', '0o640'), ('b.bin', '0o600')]
    """
    masked = ~umask()
    modes = {Path(path): mode & masked for path, mode in (modes or {}).items()}
    staged = []  # (fd, temporary name, path), the fd open and locked until the rename
    try:
        for path, data in files.items():
            path = Path(path)
            try:
                _staged(path, data, modes.get(path, 0o644 & masked), staged)
            except OSError as e:
                raise OSError(e.errno, e.strerror, str(path)) from None
        while staged:
            fd, tmp, path = staged[0]
            if os.name == "nt":  # Windows renames no open file
                os.close(fd)
                fd = None
            os.replace(tmp, path)
            staged.pop(0)
            if fd is not None:
                os.close(fd)
    except BaseException:
        for fd, tmp, _ in staged:
            with suppress(OSError):
                os.unlink(tmp)
            with suppress(OSError, TypeError):
                os.close(fd)
        raise


def _staged(path, data, mode, staged):
    """Make a temporary file beside path, add (its open file descriptor, locked, its name, path) to the list staged
    the moment it exists, so that the caller's clean-up removes it whatever stops the write from then on (an error,
    an interrupt), and write data to it, flushed to disk, with the permissions mode."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    with signals_held():  # (a signal as the file is made would lose its name before the clean-up knows it)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.{os.getpid()}.", suffix=".tmp")
        staged.append((fd, tmp, path))
    if os.name != "nt":
        _try_lock(fd)  # (a fresh file of a random name: nobody else holds it)
    with open(fd, "wb", closefd=False) as f:
        f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    if hasattr(os, "fchmod"):  # the open file itself, not whatever its name holds by now
        os.fchmod(fd, mode)
    else:
        os.chmod(tmp, mode)


def umask():
    """The process's umask (the permission bits that files it makes never get), read without changing it where the
    system says it (Linux: the "Umask:" line of /proc/self/status), else set and put back at once.

    >>> before = os.umask(0o027)
    >>> oct(umask()), oct(umask())
    ('0o27', '0o27')
    >>> _ = os.umask(before)
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # (the only portable way to read it is to set it)
    os.umask(mask)
    return mask


def private_mode(modes=(), paths=()):
    """The permissions of a file made from files of the st_modes modes, and from the files at paths as they are now
    (None: no file), such as a checkpoint from your text or a tokenizer trained on it: as private as they are. Its
    owner reads and writes it; the group and others may read it only where every one of those files lets them, and
    never write it; 0o644 when it was made from none (the lab's own files). write_together takes the umask off it
    too. A ValueError names a path whose permissions cannot be read.

    >>> oct(private_mode([0o100640, 0o100644])), oct(private_mode([0o100600, 0o100644])), oct(private_mode([]))
    ('0o640', '0o600', '0o644')
    """
    for path in paths:
        try:
            modes = [*modes, os.stat(path).st_mode] if path is not None else modes
        except OSError as e:
            raise ValueError(f"{path}: cannot read its permissions ({e.strerror or e})") from None
    readers = 0o044
    for mode in modes:
        readers &= mode
    return 0o600 | readers


def remove_leftovers(path, shown=None, names=None):
    """Remove the temporary files beside path that a writer of it left when it was killed (a SIGKILL, a power cut):
    those named as write_together names them (path.PID.RANDOM.tmp), regular files of one name, whose process is no
    longer running and on which nobody holds the lock its writer held. Anything else is left as it is: another run's
    save in progress, a file of yours that looks like one. Returns the names removed, and says on stderr how many
    beside shown (the path as the run names it) where shown is given. (Windows: none is removed.) With names, a
    regular expression, path is a folder and those of every file in it whose name matches names go.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     dead = Path(d) / "c.bin.999999999.abcd1234.tmp"  # no process has that ID
    ...     _ = dead.write_bytes(b"half a file")
    ...     _ = (Path(d) / "c.bin.mine.tmp").write_bytes(b"yours")
    ...     remove_leftovers(Path(d) / "c.bin"), sorted(p.name for p in Path(d).iterdir())
    (['c.bin.999999999.abcd1234.tmp'], ['c.bin.mine.tmp'])
    """
    folder, names = (Path(path), names) if names else (Path(path).parent, re.escape(Path(path).name))
    if os.name == "nt":
        return []
    pattern = re.compile(f"(?:{names})" + r"\.([0-9]+)\.[a-z0-9_]{8}\.tmp")
    removed = []
    try:
        listed = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in listed:
        found = pattern.fullmatch(name)
        if found is None or _running(int(found.group(1))):
            continue
        leftover = folder / name
        try:
            fd = os.open(leftover, OPEN_THERE)  # (as _judge opens a lock: no link followed, no FIFO waited on)
        except OSError:  # a link, or gone
            continue
        try:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and _try_lock(fd):
                if os.path.samestat(st, os.lstat(leftover)):
                    os.unlink(leftover)
                    removed.append(name)
        except OSError:
            pass
        finally:
            os.close(fd)
    if removed and shown is not None:
        print(f"removed {len(removed)} temporary file(s) that a killed run left beside {shown}", file=sys.stderr)
    return removed


def _running(pid):
    """Whether a process with this ID runs on this machine (one of another user's counts: it may be a writer).

    >>> _running(os.getpid()), _running(999999999)
    (True, False)
    """
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # (OverflowError: no process ID is that large)
        return False
    except OSError:  # PermissionError: another user's process
        return True
    return True


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
    missing = [folder for folder in (path.parent, *path.parent.parents) if not folder.exists()]  # deepest first
    made = []
    try:
        for folder in reversed(missing):  # one at a time, from the top: no recursion, however deep the path
            try:
                os.mkdir(folder)
            except FileExistsError:
                if not folder.is_dir():
                    raise
                continue
            made.insert(0, folder)
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


TEMPORARY_ENDING = len(".4294967295.abcdefgh.tmp")  # the most write_together adds to a name: PID, random, ".tmp"


def name_problem(path, endings=(".lock",)):
    """Why path cannot be written by this module, judged from its name alone, in one line, or None: a name in it
    longer than its file system allows (NAME_MAX, 255 bytes on most) once the longest of endings (the names the
    writer makes beside it, such as its lock) and a temporary file's ending are added, or the whole path longer
    than the system allows (PATH_MAX, 4,096 bytes on Linux). Checked before anything is made, so that a name too
    long is a message at the start, not an error at the first save.

    >>> print(name_problem("x" * 300))
    a name of 300 bytes, and 329 with the endings of the files written beside it, more than the 255 bytes this file \
system allows in a name
    """
    path = Path(os.path.abspath(path))
    there = next(folder for folder in path.parents if os.path.isdir(folder))
    name_max, path_max = _limit(there, "PC_NAME_MAX", 255), _limit(there, "PC_PATH_MAX", 4096)
    extra = max(len(os.fsencode(ending)) for ending in endings) + TEMPORARY_ENDING
    size = len(os.fsencode(str(path)))
    if size + extra >= path_max:
        return (f"a path of {size:,} bytes, and {size + extra:,} with the endings of the files written beside it,"
                f" more than the {path_max - 1:,} bytes this system allows in a path")
    for part in path.parts[1:-1]:
        if len(os.fsencode(part)) > name_max:
            return (f"a folder name of {len(os.fsencode(part)):,} bytes, more than the {name_max:,} bytes this file"
                    f" system allows in a name")
    size = len(os.fsencode(path.name))
    if size + extra > name_max:
        return (f"a name of {size:,} bytes, and {size + extra:,} with the endings of the files written beside it,"
                f" more than the {name_max:,} bytes this file system allows in a name")
    return None


NEVER_REPLACED = "it is never replaced: choose another --out, or remove the file yourself"  # a file not of its kind


def not_its_kind(shown, what, why):
    """The refusal, in one line, of the file at a path a run writes (shown: as the message names it) that is not
    what the run writes there (what, such as "a checkpoint"; why: what reading it found): it is never replaced."""
    return f"{shown} exists but is not {what} ({why}); {NEVER_REPLACED}"


def output_problem(path, flag, what, ours, example, most=1 << 26, endings=(".lock",)):
    """Why a command cannot write what (such as "a JSON of figures") to the file at path (the value of flag, as
    given; example: a file name for the hint), in one line, or None, judged before any work starts, so that a long
    run never ends on an error it could have seen at its start. path must name a file (not end with a slash or be a
    folder, pass through no file, hold no name too long for the file system once endings, the files written beside
    it, are added: name_problem), no link on the way may lead nowhere, and what is there already, if anything, must
    be a regular file (of at most most bytes) that ours(its bytes) says is of its kind: anything else (a file of
    yours, a FIFO, a device) is never replaced. ours=None: only its kind is judged, nothing is read (own reads it
    with the caller's reader once it holds it). Write it with write_atomic(resolved(path), ...): through a link, to
    the file the link leads to.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     notes = Path(d) / "notes.txt"
    ...     _ = notes.write_text("mine")
    ...     said = output_problem(notes, "--json", "a JSON record", lambda raw: raw[:1] == b"{", "r.json")
    ...     print(said.replace(d, "D"))
    --json D/notes.txt exists and is not a JSON record; it is never replaced: choose another path, or remove the file \
yourself
    """
    text, path = str(path), Path(path)
    if text.endswith(("/", os.sep)):
        return f"{flag} {text} ends with a slash, so it names a folder; expected {what} such as {path / example}"
    problem = name_problem(path, endings)  # first: a name too long cannot even be looked up
    if problem:
        shown = text if len(text) <= 100 else f"{text[:48]}...{text[-48:]}"
        return f"{flag} {shown}: {problem}; choose a shorter one"
    for folder in reversed(path.parents):
        if folder.exists() and not folder.is_dir():
            return f"{flag} {text}: {folder} is a file, not a folder"
    if path.is_dir():
        return f"{flag} {text} is a folder; expected {what} such as {path / example}"
    try:
        target = resolved(path)
    except ValueError as e:
        return f"{flag} {e}"
    problem = not_a_file(path)
    if problem:
        return f"{flag} {text} is {problem}; expected {what}, and it is never replaced: choose another {flag}"
    if ours is None or not os.path.lexists(target):
        return None
    try:
        raw = read_whole(target, what, most)
    except ValueError as e:
        return f"{flag} {e}; it is never replaced"
    if not ours(raw):
        return (f"{flag} {text} exists and is not {what}; it is never replaced: choose another path, or remove the"
                f" file yourself")
    return None


def not_a_file(path):
    """What is at path, in words, when something is there that is not a regular file once links are followed (a
    FIFO, a device, a socket, a folder, a link that leads nowhere); None when it is a regular file or nothing is
    there. stat never opens it, so a FIFO cannot block the look.

    >>> not_a_file("atomic.py"), not_a_file("no-such-file.json"), not_a_file("/dev/null")
    (None, None, 'a character device, not a regular file')
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"a link to {os.readlink(path)}, which does not exist" if os.path.islink(path) else None
    except OSError as e:  # a loop of links, a folder that cannot be searched, a name too long
        return f"a path that cannot be followed ({e.strerror or e})"
    if stat.S_ISREG(mode):
        return None
    return f"{'a link to ' if os.path.islink(path) else ''}{kind_of(mode)}, not a regular file"


def same_file(a, b):
    """Whether paths a and b name the same file: the same file on disk when both exist (a link or a hard link to it
    included), else the same path once resolved (links followed).

    >>> same_file("oneblock/../atomic.py", "atomic.py"), same_file("a.txt", "b.txt")
    (True, False)
    """
    a, b = Path(a), Path(b)
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # a name too long to look up, a loop of links: no file there to be the other
        return False


def _limit(folder, name, default):
    """A limit of the file system of folder (os.pathconf's name), or default where the system does not say."""
    try:
        return os.pathconf(folder, name)
    except (AttributeError, ValueError, OSError):
        return default


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
    try:
        if path.is_dir():
            raise ValueError(f"{path} is a folder, not {what}")
    except OSError as e:  # a name too long even to look up
        raise ValueError(f"{path}: cannot read it ({e.strerror or e})") from None
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
    kinds = [(stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO (a named pipe)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISDIR, "a folder")]
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


def resolved(path):
    """The file that writing path writes: path with every link followed (a link's target is written, never the
    link replaced). A ValueError names a link that leads nowhere (to nothing, or round in a loop): a name that could
    be made to point anywhere, so nothing is written through it.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     (Path(d) / "real").mkdir()
    ...     (Path(d) / "link").symlink_to("real", target_is_directory=True)
    ...     resolved(Path(d) / "link" / "c.bin") == Path(d).resolve() / "real" / "c.bin"
    True
    """
    path = Path(path)
    for name in (path, *path.parents):
        if os.path.islink(name) and not os.path.exists(name):
            raise ValueError(f"{path}: {name} is a link to {os.readlink(name)}, which does not exist (or is a loop);"
                             f" expected a file or folder there, or no link")
    return Path(os.path.realpath(path))


@contextmanager
def hold(path, note, follow=True):
    """Own path for the duration of a with-block, and give the file to write: path with its links followed
    (resolved), so that a run on a file and a run on a link to it own one thing; with follow=False, path as it is
    named (made absolute), its last name never followed: for a lock that guards a folder rather than a file written
    (a link at that name, put there by anyone who can write the folder, must not move the lock to where it
    points). It creates that file's folder (removed again at the end if the block left nothing in it, as folder_for
    does), and makes its lock file, that path + ".lock", recording note (who holds it) there. A ValueError, before
    anything else is done, names the path and what stops it: another process holding it (with that holder's note), a
    folder that cannot be made or written, or a file at the lock's name that is not a lock of this lab (a link, a
    folder, a file of yours): such a file is never opened for writing, followed or removed.

    The lock is the operating system's, tied to the open file, so a process that is killed leaves no lock that
    counts: the next run finds the file nobody holds, sees this lab's mark in it, and takes over. On a normal exit
    the lock file is removed.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = pathlib.Path(d) / "runs" / "ckpt.bin"
    ...     with hold(path, "first run") as target:
    ...         try:
    ...             with hold(path, "second run"):
    ...                 pass
    ...         except ValueError as e:
    ...             print(str(e).replace(str(target.parent), "D"))
    ...     path.parent.exists()  # the lock file is gone, and so is the folder hold made for it
    D/ckpt.bin is in use by another run (first run)
    False
    """
    target = resolved(path) if follow else Path(os.path.abspath(path))
    lock = target.with_name(target.name + ".lock")
    with folder_for(target):
        fd = None
        try:  # (an interrupt at any moment, even inside _take, leaves no lock behind)
            with signals_held():  # until fd is kept: a signal as os.open returns would lose the file it made
                fd = _take(target, lock, (LOCK_MARK + note).encode("utf-8"))
            yield target
        finally:
            if fd is not None:
                _drop(fd, lock)


def own(stack, typed, flag, what, example, judge, note, reads=(), endings=(".lock",), words=None):
    """Make this run the owner of the file it writes, typed (the value of flag, as given; what it is, such as "a
    checkpoint file"; example: a name for the hint), until stack (an ExitStack) closes, each step before any work:
    judge the path (output_problem); refuse it when it or its lock is one of the files the run reads (reads: (flag,
    path) pairs, by any name; words: what the file is in that message, flag and typed unless given); hold it (hold);
    judge what is there with the caller's reader, judge(the file to write), which raises a ValueError naming what is
    wrong or returns what it read; and remove_leftovers. A ValueError in one line says what stops it. Returns (the
    file to write: typed as it is, or the file a link on its way leads to; what judge returned).

    >>> import tempfile
    >>> from contextlib import ExitStack
    >>> with tempfile.TemporaryDirectory() as d, ExitStack() as stack:
    ...     path = Path(d) / "notes.txt"
    ...     try:
    ...         own(stack, str(path), "--out", "a tokenizer file", "t.json", None, "a run", [("--data", path)])
    ...     except ValueError as e:
    ...         print(str(e).replace(d, "D"))
    --data D/notes.txt is where this run writes --out D/notes.txt; choose another --out
    """
    problem = output_problem(typed, flag, what, None, example, endings=endings)
    if problem:
        raise ValueError(problem)
    words = words or f"{flag} {typed}"
    written = {typed: words, os.path.realpath(typed) + ".lock": f"the lock of {words}"}
    for given_flag, given in reads:
        for path, said in written.items() if given is not None else ():
            if same_file(given, path):
                raise ValueError(f"{given_flag} {given} is where this run writes {said}; choose another {flag}")
    try:
        target = stack.enter_context(hold(typed, note))  # the file itself, links followed
    except ValueError as e:  # another run holds it, or its folder cannot be made or written
        raise ValueError(f"{flag}: {e}") from None
    except OSError as e:  # the lock itself cannot be written: a full disk
        raise ValueError(f"{flag} {typed}: cannot write there ({e.strerror or e})") from None
    if target != Path(os.path.abspath(typed)):  # through a link: its target is written, the link stays
        print(f"{flag} {typed} leads to {target}: this run writes there", flush=True)
    else:
        target = Path(typed)  # (as typed, for the messages)
    problem = not_a_file(target)  # (again, now that no other run of the lab can change it)
    if problem:
        raise ValueError(f"{flag} {typed} is {problem}; expected {what}, and it is never replaced: choose another"
                         f" {flag}")
    judged = judge(target) if judge is not None else None
    remove_leftovers(target, typed)
    return target, judged


def holder(command, argv=None):
    """The note a run leaves in the lock of what it writes: its process, machine and start, and its command line
    (command and its arguments argv; None: this process's, sys.argv[1:])."""
    return (f"pid {os.getpid()} on {platform.node()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}: "
            + " ".join([command, *(sys.argv[1:] if argv is None else argv)]))


STOPPING = ("SIGINT", "SIGTERM", "SIGHUP")  # the signals a run turns into an interrupt, held back by signals_held

# the signals_held blocks running now in the main thread, each with the list of the signals that came during it: the
# outermost one's list gets them all, and its end delivers them
_held = []


def _stop(signum, frame):
    """interruptible's handler: a KeyboardInterrupt that carries the signal, or, inside a signals_held block, a note
    of it that the block's end turns into that KeyboardInterrupt."""
    if _held:
        _held[0].append(signum)
        return
    raise KeyboardInterrupt(signum)


@contextmanager
def interruptible():
    """For the with-block of a run: SIGTERM (what kill sends, and a machine that shuts down) and SIGHUP (a terminal
    closed) stop it as Ctrl-C does, with a KeyboardInterrupt that carries the signal, so that every clean-up on the
    way out runs: the lock of its output is removed, and so is a temporary file half written (interruption says
    which signal it was, and the exit status that reports it). Ctrl-C too goes through this handler (unless SIGINT
    is ignored, as in a background job), so that all three wait for the end of a signals_held block, whichever
    thread the system hands them to. Only in the main thread, where Python's handlers run; elsewhere the block runs
    as it is.

    >>> with interruptible():
    ...     try:
    ...         os.kill(os.getpid(), signal.SIGTERM)
    ...     except KeyboardInterrupt as e:
    ...         print(interruption(e))
    ('SIGTERM', 143)
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = [getattr(signal, name) for name in STOPPING[1:] if hasattr(signal, name)]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # (Python's Ctrl-C: the same interrupt)
        caught.append(signal.SIGINT)
    previous = {signum: signal.signal(signum, _stop) for signum in caught}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def interruption(e):
    """(the signal's name, the exit status that reports it: 128 + its number) of the KeyboardInterrupt e: Ctrl-C's
    SIGINT, or the signal interruptible turned into one.

    >>> interruption(KeyboardInterrupt()), interruption(KeyboardInterrupt(signal.SIGTERM))
    (('SIGINT', 130), ('SIGTERM', 143))
    """
    signum = e.args[0] if e.args and isinstance(e.args[0], int) else signal.SIGINT
    return signal.Signals(signum).name, 128 + signum


@contextmanager
def signals_held():
    """For a with-block that must not be cut between two steps (a file made, and its descriptor kept): SIGINT,
    SIGTERM and SIGHUP wait for its end, where their handlers run as usual. Only in the main thread, which is the one
    Python's handlers run in; elsewhere the block runs as it is.

    Two holds, because one is not enough. The operating system holds the signals back from this thread (where it
    can: POSIX), whatever their handlers. But it hands a signal sent to the process to any thread that does not hold
    it back (NumPy's BLAS threads, torch's), and Python then runs the handler in the main thread all the same, at its
    next step. So interruptible's handler, seeing a block running, notes the signal instead of raising, and the
    block's end raises it: under interruptible, no thread lets a signal cut the block.

    >>> with signals_held():
    ...     "not cut"
    'not cut'
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {getattr(signal, name) for name in STOPPING if hasattr(signal, name)}
    masking = hasattr(signal, "pthread_sigmask")
    before = signal.pthread_sigmask(signal.SIG_BLOCK, []) if masking else None  # (the mask as it is: nothing added)
    noted = []
    try:
        _held.append(noted)
        if masking:
            signal.pthread_sigmask(signal.SIG_BLOCK, held)
        yield
    finally:
        try:
            if masking:
                signal.pthread_sigmask(signal.SIG_SETMASK, before)  # (what the mask held back comes now: noted too)
        finally:  # (whatever another handler raises as the mask goes: no block stays open, or every signal waits)
            _held.pop()
        if noted:  # the outermost block: the first signal that came, raised here, the body's error or not
            raise KeyboardInterrupt(noted[0])


def _drop(fd, lock):
    """Remove the lock file of the open file fd, if it is still the file at lock, and close fd."""
    if os.name == "nt":  # Windows cannot remove an open file
        os.close(fd)
        with suppress(OSError):
            os.unlink(lock)
    else:  # removed while still locked, so no other process can be holding this very file
        with suppress(OSError):
            if os.path.samestat(os.fstat(fd), os.lstat(lock)):
                os.unlink(lock)
        os.close(fd)


LOCK_MARK = "one-block lock, held by "  # the first words of every lock file hold makes
CREATE_NEW = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
OPEN_THERE = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
TRIES = 100  # lock files taken over or made in a race before hold gives up


def _take(path, lock, note):
    """The open, locked file descriptor of a new lock file for path, holding note. The file is made new, never
    opened if something is there (O_CREAT | O_EXCL, and O_NOFOLLOW: a link there is not followed either); what is
    there is judged by _judge, which removes only a dead run's lock."""
    for _ in range(TRIES):
        try:
            fd = os.open(lock, CREATE_NEW, 0o644)
        except FileExistsError:
            _judge(path, lock)  # a ValueError unless what was there was a dead run's lock, now gone: try again
            continue
        except OSError as e:
            raise ValueError(f"{path}: cannot write in the folder {path.parent} ({e.strerror or e})") from None
        try:
            try:
                locked = _try_lock(fd) and os.path.samestat(os.fstat(fd), os.lstat(lock))
            except OSError:  # removed as it was made, by a run that took it for a dead one's: try again
                locked = False
            if locked:
                os.lseek(fd, 0, os.SEEK_SET)  # (Windows's lock moved it)
                os.write(fd, note)
                return fd
        except BaseException:  # an interrupt as it is made: nothing of it stays
            _drop(fd, lock)
            raise
        os.close(fd)
    raise ValueError(f"{path}: other runs keep taking its lock {lock.name}; try again")


def _judge(path, lock):
    """What to do about the file that is already at lock (the lock file of path): return once it is gone (it was
    the lock of a run that is no longer running, which this removes, or someone else removed it meanwhile); else a
    ValueError naming it: another run holds it, or it is not a lock this lab made (a link, a folder, a device, a file
    without the mark, one with other names), which is never removed."""
    never = (f"; it is never opened for writing or removed: remove it yourself if it is yours, or choose another"
             f" path than {path}")
    try:
        there = os.lstat(lock)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(there.st_mode) or not stat.S_ISREG(there.st_mode):
        raise ValueError(f"{lock}, the name of {path.name}'s lock, is {kind_of(there.st_mode)}, not a lock{never}")
    try:
        fd = os.open(lock, OPEN_THERE)
    except FileNotFoundError:
        return
    except OSError as e:
        raise ValueError(f"{lock}, the name of {path.name}'s lock, cannot be read ({e.strerror or e}){never}") from None
    try:
        st = os.fstat(fd)
        if not os.path.samestat(st, there):  # replaced as it was looked at: look again
            return
        text = os.read(fd, 4096).decode("utf-8", "replace") if st.st_size <= 4096 else None
        ours = text is not None and st.st_nlink == 1 and (text.startswith(LOCK_MARK) or text == "")
        if not ours:
            why = "has other names (hard links)" if st.st_nlink > 1 else "does not hold this lab's mark"
            raise ValueError(f"{lock}, the name of {path.name}'s lock, is a file that {why}, not a lock{never}")
        if not _try_lock(fd):
            holder = text[len(LOCK_MARK):].strip()
            raise ValueError(f"{path} is in use by another run ({holder or 'its holder wrote no note yet'})")
        with suppress(FileNotFoundError):  # nobody holds it: its run ended without removing it (a kill)
            if os.path.samestat(st, os.lstat(lock)):
                os.unlink(lock)  # (an empty one: a run killed between making its lock and writing its note)
    finally:
        os.close(fd)
