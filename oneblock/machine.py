"""What this machine brings to a run: the packages a script needs, the BLAS kernels and threads that NumPy computes
with, and the memory a size may take.

A script imports the packages it needs through `need`, or in a `needed_by` block, so that a learner without one
reads what to do instead of a traceback (README.md, "For developers"):

    >>> need("math", "this example").sqrt(4.0)
    2.0
    >>> need("no_such_package_xyz", "this example")
    Traceback (most recent call last):
    ...
    SystemExit: 2

Float results of the NumPy path depend on the BLAS kernels and the thread count (docs/reproducibility.md, "Three
kinds of number", says why). `blas()` says which kernels a run used, so that a recorded figure can say where it was
measured. The thread count is set while the program runs (`use_threads`, through threadpoolctl), so no order of
imports can change the bits.
"""

import ctypes
import importlib
import os
import shutil
import sys
from contextlib import contextmanager, suppress

try:
    import resource
except ImportError:  # Windows
    resource = None

DEV = "python3 -m pip install -r tests/requirements.txt"  # the pinned test requirements: numpy, matplotlib, ...
INSTALL = {  # package -> the command that installs it, as the README and docs/torch.md give it
    **dict.fromkeys(("numpy", "threadpoolctl", "matplotlib", "safetensors", "tokenizers", "playwright", "scipy",
                     "dask", "distributed", "cryptography"), DEV),
    "torch": "python3 -m pip install -r tests/requirements-torch.txt (docs/torch.md says how to get the CPU-only"
             " wheel)",
    "numba": "python3 -m pip install numba==0.68.1 (dev/jit_probe.py alone uses it)",
}
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")  # what a new process's BLAS reads

# ----------------------------------------------------------------------------------------------------------------
# Packages


def need(module, who):
    """Import module and return it; if it is not installed, print one line naming it, who needs it and how to
    install it on stderr, and exit with status 2. A module that is installed but fails to import raises as usual."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module.split(".")[0]:  # the package is there but something it imports is not
            raise
        missing(module, who)


@contextmanager
def needed_by(who):
    """Around a script's imports: a package of INSTALL's that is not installed, wherever in the block (or in what
    it imports) it is first asked for, is one line naming it, who needs it and its install command, and exit
    status 2, as `need` says it. Any other import error raises as usual.

    >>> with needed_by("this example"):
    ...     import no_such_package_xyz
    Traceback (most recent call last):
    ...
    ModuleNotFoundError: No module named 'no_such_package_xyz'
    """
    try:
        yield
    except ModuleNotFoundError as e:
        package = (e.name or "").split(".")[0]
        if package not in INSTALL:
            raise
        missing(package, who)


def need_backend(script, backend, packages):
    """Import each of packages, as `need` does, for script's --backend backend; the default backend's line (numpy's)
    also says that --backend python needs nothing."""
    default = " (the default; --backend python needs nothing)" if backend == "numpy" else ""
    for package in packages:
        need(package, f"{script} --backend {backend}{default}")


def missing(package, who):
    """Say that who needs package, which is not installed, with the command that installs it; exit status 2."""
    print(f"error: {not_installed(package, who)}", file=sys.stderr)
    raise SystemExit(2) from None


def not_installed(package, who, why=""):
    """The one line that says who needs package (why: what for, if said), which is not installed, and the command
    that installs it, as every refusal of a missing package words it."""
    install = INSTALL.get(package.split(".")[0], f"python3 -m pip install {package}")
    return f"{who} needs {package}{why}, which is not installed; install it with: {install}"


def find_chromium():
    """The system's Chromium or Chrome (what the tests and bench_explorer.py drive), or None."""
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


# ----------------------------------------------------------------------------------------------------------------
# Memory: what a size may spend, asked before it is spent


def memory_available():
    """The bytes this process can still take, as far as the system says: the least of the memory the kernel counts
    as available (Linux's MemAvailable; elsewhere all of the physical memory), the room left under this process's
    address-space limit (RLIMIT_AS, which `ulimit -v` sets), and the room left in its cgroup (a container's
    memory.max). None where none of them can be read.

    >>> memory_available() is None or memory_available() > 0
    True
    """
    room = []
    available = [line.split()[1] for line in system_text("/proc/meminfo").splitlines()
                 if line.startswith("MemAvailable:")]
    if available:
        room.append(int(available[0]) * 1024)
    elif hasattr(os, "sysconf"):
        with suppress(ValueError, OSError):
            room.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    limit = resource.getrlimit(resource.RLIMIT_AS)[0] if resource is not None else None
    if limit is not None and limit != resource.RLIM_INFINITY:
        mapped = system_text("/proc/self/statm").split()[:1]  # pages of address space mapped now
        room.append(max(0, limit - (int(mapped[0]) * os.sysconf("SC_PAGE_SIZE") if mapped else 0)))
    for line in system_text("/proc/self/cgroup").splitlines():  # "0::/its/path" (cgroup v2), "4:memory:/..." (v1)
        _, controllers, where = (line.split(":", 2) + ["", ""])[:3]
        if controllers in ("", "memory") and where.startswith("/"):
            v2 = controllers == ""
            mount = "/sys/fs/cgroup" + ("" if v2 else "/memory")
            for folder in (mount + where.rstrip("/"), mount):  # its own folder, or the container's root
                most = system_text(folder + ("/memory.max" if v2 else "/memory.limit_in_bytes")).strip()
                used = system_text(folder + ("/memory.current" if v2 else "/memory.usage_in_bytes")).strip()
                if most.isdigit() and used.isdigit():
                    room.append(max(0, int(most) - int(used)))
                    break
    return min(room) if room else None


def system_text(path):
    """The text of a small system file, or "" where it does not exist or cannot be read (another system)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def check_memory(need, what):
    """Raise a ValueError when need bytes will not fit in memory_available(): one line that names what needs them
    (such as "--batch 1000000000") and both amounts, so that a size is refused before its memory is spent.

    >>> check_memory(1, "one byte")
    >>> check_memory(10**30, "--width 10**15")
    Traceback (most recent call last):
    ...
    ValueError: --width 10**15 needs about 1e+30 bytes of memory, ...
    """
    have = memory_available()
    if have is not None and need > have:
        raise ValueError(f"{what} needs about {in_bytes(need)} of memory, more than the {in_bytes(have)} this"
                         f" process can still take here")


def in_bytes(n):
    """A number of bytes in words, with a binary prefix.

    >>> in_bytes(512), in_bytes(3 * 2**30), in_bytes(10**30)
    ('512 bytes', '3.0 GiB', '1e+30 bytes')
    """
    for power, prefix in ((50, "PiB"), (40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 2 ** power:
            return f"{n / 2 ** power:.1f} {prefix}" if n < 2 ** (power + 10) else f"{n:.3g} bytes"
    return f"{n} bytes"


# ----------------------------------------------------------------------------------------------------------------
# BLAS


def use_threads(n, who="this run"):
    """From now on, NumPy's BLAS computes with n threads (threadpoolctl sets its pool while the program runs, whether
    NumPy was imported early or late), so that a result has the bits of its thread count and no others. Returns the
    limits; `with use_threads(n):` sets them for a block only. who: as for `need`.

    >>> import numpy
    >>> with use_threads(1):
    ...     blas_threads()
    1
    """
    threadpoolctl = need("threadpoolctl", who)
    need("numpy", who)
    return threadpoolctl.threadpool_limits(n, user_api="blas")


def blas_threads():
    """The threads NumPy's BLAS computes with now (the largest pool, if it has several).

    >>> blas_threads() >= 1
    True
    """
    import threadpoolctl

    return max((pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"),
               default=1)


def openblas_core():
    """The name of the kernel family OpenBLAS chose in this process ("SkylakeX", "Haswell", ...), or None when NumPy
    does not use OpenBLAS or this system does not say (found through the shared libraries the process has loaded,
    which Linux lists in /proc/self/maps)."""
    import numpy  # noqa: F401  (loads its BLAS)

    paths = {line.split()[-1] for line in system_text("/proc/self/maps").splitlines()
             if "openblas" in line.lower() and ".so" in line}
    for path in sorted(paths):
        lib = ctypes.CDLL(path)
        for symbol in ("scipy_openblas_get_corename64_", "openblas_get_corename64_", "openblas_get_corename"):
            if hasattr(lib, symbol):
                fn = getattr(lib, symbol)
                fn.restype = ctypes.c_char_p
                return fn().decode()
    return None


def blas(threads):
    """One line naming NumPy's version, the BLAS kernels and the thread count a run computes with.

    >>> blas(1).startswith("NumPy ")
    True
    """
    import numpy

    core = openblas_core()
    kernels = f"OpenBLAS {core} kernels" if core else "a BLAS that does not name its kernels"
    return f"NumPy {numpy.__version__}, {kernels}, {threads} thread{'s' if threads != 1 else ''}"
