"""Whose is a path, for the guard: secret-looking files, the standard library, trusted code."""

from __future__ import annotations

import contextlib
import os
import site
import sys
import sysconfig
from collections.abc import Iterable
from typing import Any

from ..crossing import view
from ..rules import any, getattr, isinstance, len, sorted

_SECRET_DIRS = frozenset({".ssh", ".aws", ".config", ".gnupg", ".docker", ".kube", ".azure"})
_SECRET_FILES = frozenset(
    {".netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc", "credentials", ".bash_history"}
)
_SECRET_PREFIXES = (".env", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519")
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx")


def _is_interpreter_probe(argv: Any) -> bool:
    if isinstance(argv, (str, bytes)) or len(argv) != 3:
        return False
    _, flag, target = (os.fsdecode(a) for a in argv)
    try:
        same = os.path.realpath(target) == os.path.realpath(sys.executable)
    except (TypeError, ValueError, OSError):
        return False
    return flag == "-b" and same


# What /proc/self/fd/N names for a descriptor that is no file: a pipe, a socket, an eventfd.
_CHANNELS = ("pipe:[", "socket:[", "anon_inode:")


def _open_channel(path: Any, real: str | None) -> bool:
    """open(fd) of a pipe or socket the process already holds: no file is reached.

    subprocess wraps the pipes of the compiler tools it runs (ptxas) with open(fd); on the GPU
    every Triton compile does, and a rule on the name 'pipe:[N]' refused every kernel.
    """
    return isinstance(path, int) and real is not None and real.startswith(_CHANNELS)


def _which(name: str) -> str | None:
    for d in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(d, name)
        if d and os.path.isfile(candidate):
            return candidate
    return None


def _real_roots(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({os.path.realpath(os.fsdecode(p)) for p in paths if p}))


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _looks_secret(path: str) -> bool:
    parts = path.split(os.sep)
    name = parts[-1]
    if _SECRET_DIRS.intersection(parts[:-1]) or name in _SECRET_FILES:
        return True
    if name.startswith(_SECRET_PREFIXES) or name.endswith(_SECRET_SUFFIXES):
        return True
    if len(parts) > 2 and parts[1] == "proc":
        pid = parts[2]
        if pid.isdigit() and int(pid) != os.getpid():
            return True  # another process: the parent's environment holds the API keys
        if pid in ("self", "thread-self", str(os.getpid())):
            return bool({"mem", "environ"}.intersection(parts[3:]))
    return False


def _stdlib_dirs() -> list[str]:
    paths = sysconfig.get_paths()
    return [paths.get("stdlib", ""), paths.get("platstdlib", ""), os.path.dirname(os.__file__)]


def _trusted_dirs() -> list[str]:
    """site-packages (torch, triton live there) and this package's own sandbox/ directory."""
    dirs = [view.SANDBOX_DIR]
    paths = sysconfig.get_paths()
    dirs += [paths.get("purelib", ""), paths.get("platlib", "")]
    with contextlib.suppress(AttributeError):
        dirs += site.getsitepackages()
    with contextlib.suppress(AttributeError):
        dirs.append(site.getusersitepackages())
    for name in ("torch", "triton", "numpy"):
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            dirs.append(os.path.dirname(os.path.dirname(file)))
    return dirs


def _environment_code(known: tuple[str, ...], writable: tuple[str, ...]) -> list[str]:
    """Code outside the `known` roots that was there before any candidate ran.

    A dependency installed with `pip install --target` or reached through PYTHONPATH is not in
    site-packages, yet torch imports it (typing_extensions calls sys._getframe): its frames are
    the evaluator's, not the candidate's. Trusted: import-path directories that hold installed
    distributions (`*.dist-info`: an install target, never a project or run directory), the
    directory of every top-level package already imported (its lazy submodules too) and the
    file of every other imported module. Never trusted: anything under a writable root or
    holding one, and this package's own tree (only its sandbox/ is, not the tests beside it).
    """
    own_root = os.path.realpath(view.PACKAGE_DIR)
    places = {os.path.realpath(p) for p in sys.path if p and _holds_distributions(p)}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name == "__main__" or not isinstance(file, str) or not os.path.isabs(file):
            continue  # a relative __file__ (torch.ops has "_ops.py") names no place
        if "." not in name and getattr(module, "__path__", None) is not None:
            places.add(os.path.realpath(os.path.dirname(file)))  # a package: its directory
        else:
            places.add(os.path.realpath(file))
    found = []
    for place in sorted(places):
        if _under(place, known) or _under(place, (own_root, *writable)):
            continue
        if any(_under(inner, (place,)) for inner in (own_root, *writable)):
            continue
        found.append(place)
    return found


def _holds_distributions(path: str) -> bool:
    try:
        with os.scandir(path) as entries:
            return any(e.name.endswith(".dist-info") and e.is_dir() for e in entries)
    except OSError:
        return False
