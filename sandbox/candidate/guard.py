"""The runtime guard: an audit-hook sandbox around candidate code in the worker (see rules.py)."""

from __future__ import annotations

import os
import sys
import threading
import types
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from ..rules import Violation, _words, any, isinstance, len, repr, type
from .places import (
    _environment_code,
    _is_interpreter_probe,
    _looks_secret,
    _open_channel,
    _real_roots,
    _stdlib_dirs,
    _trusted_dirs,
    _under,
    _which,
)

# Executables Triton itself runs on a GPU machine: ptxas/cuobjdump/nvdisasm for the cubin and its
# statistics, a C compiler for its launcher module, ldconfig to find libcuda.
COMPILER_TOOLS = _words(
    "ptxas ptxas-blackwell cuobjdump nvdisasm gcc cc clang ld ldconfig ldconfig.real"
)

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
# Stdlib helpers that hand frames to their caller: sys._getframe through them is introspection.
_FRAME_HELPERS = ("inspect.py", "traceback.py")
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_CODE_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__", "f_code", "gi_code"})
_PATCH_ATTRS = frozenset({"__class__", "__bases__", "__code__", "__defaults__", "__kwdefaults__"})
_MAX_RECORDED = 100  # a loop of denied calls must not fill memory with records

TRACE_ENV = "KERNELWRIGHT_GUARD_TRACE"

# Frame kinds: who wrote the code that asked for an event.
_STDLIB, _TRUSTED, _CANDIDATE = 0, 1, 2

_GUARD: Guard | None = None
_HOOK_INSTALLED = False


class _Active:
    """`with guard.active():` cheap enough to wrap every timed call."""

    __slots__ = ("_guard", "_previous")

    def __init__(self, guard: Guard):
        self._guard = guard

    def __enter__(self) -> None:
        self._previous = self._guard._active
        self._guard._active = True
        self._guard._armed = True

    def __exit__(self, *exc: object) -> None:
        self._guard._active = self._previous


class Guard:
    """An audit-hook sandbox for candidate code, installed once per worker process.

    Enforcement applies while `active()` (candidate import, construction, forward calls) and,
    at any time, to events asked for by candidate code itself: the first frame outside the
    standard library belongs to neither the standard library, site-packages nor this package
    (a thread or a finalizer the candidate left behind is caught when the guard is off).
    Denied events raise PermissionError in the candidate and are recorded in `violations`.
    """

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self._active = False
        self._armed = False  # candidate code has run in this process
        self._busy: set[int] = set()  # threads inside the hook: its own events pass
        self.writable_roots: tuple[str, ...] = ()
        self.readable_roots: tuple[str, ...] | None = None
        self.deny_paths: tuple[str, ...] = ()
        self._stdlib: tuple[str, ...] = ()
        self._trusted: tuple[str, ...] = ()
        self._kinds: dict[str, int] = {}
        self._homes: dict[str, bool] = {}  # file name -> under a writable root (candidate files)
        # KERNELWRIGHT_GUARD_TRACE=FILE: every denial appends the whole stack there, each frame
        # with the kind the guard gave it (to tell a false alarm's cause from its message alone).
        self.trace_path: str | None = None
        # Generated code ("<string>") by who had it exec'd, id -> code object; weak, so an entry
        # lives exactly as long as its code (an id is never reused while it is listed) and none
        # is ever evicted while it runs. See `_kind` and `_generated_for_candidate`.
        self._trusted_generated: weakref.WeakValueDictionary[int, Any] = (
            weakref.WeakValueDictionary()
        )
        self._candidate_generated: weakref.WeakValueDictionary[int, Any] = (
            weakref.WeakValueDictionary()
        )

    def install(
        self,
        writable_roots: Iterable[str],
        readable_roots: Iterable[str] | None = None,
        *,
        deny_paths: Iterable[str] = (),
        trusted_code: Iterable[str] = (),
    ) -> None:
        """Make this the process's guard (the hook itself is added once; it cannot be removed).

        writable_roots: where candidate-time code may create, write, rename or delete files.
        readable_roots: where it may read (None: anywhere); secret-looking paths never.
        deny_paths: files or directories never to be read or written.
        trusted_code: extra directories whose code counts as the evaluator's, not the candidate's.
        """
        global _GUARD, _HOOK_INSTALLED
        self.writable_roots = _real_roots(writable_roots)
        self.readable_roots = None if readable_roots is None else _real_roots(readable_roots)
        self.deny_paths = _real_roots(deny_paths)
        self._stdlib = _real_roots(_stdlib_dirs())
        trusted = _real_roots([*_trusted_dirs(), *trusted_code])
        environment = _environment_code((*self._stdlib, *trusted), self.writable_roots)
        self._trusted = _real_roots([*trusted, *environment])
        self._kinds.clear()
        self._homes.clear()
        self.trace_path = os.environ.get(TRACE_ENV) or None
        _GUARD = self
        if not _HOOK_INSTALLED:
            sys.addaudithook(_audit_hook)
            _HOOK_INSTALLED = True

    def active(self) -> _Active:
        """Context manager: enforce while candidate code runs."""
        return _Active(self)

    @property
    def is_active(self) -> bool:
        return self._active

    def reset(self) -> None:
        """Forget recorded violations (between candidates)."""
        self.violations.clear()

    # -- the hook's decisions ------------------------------------------------------------------

    def _kind(self, frame: Any) -> int:
        code = frame.f_code
        name = code.co_filename
        if _generated(name):
            # Generated source: the evaluator's own only if its side exec'd this very code
            # object (torch evaluates guard names like "L['self'].forward.__code__" so), else
            # the candidate's, whoever it asked to generate it.
            return _TRUSTED if self._generated_by(code) == "evaluator" else _CANDIDATE
        kind = self._kinds.get(name)
        if kind is None:
            kind = self._classify(name)
            self._kinds[name] = kind
        return kind

    def _classify(self, filename: str) -> int:
        """A file's kind (`_kind` decides generated code's)."""
        if filename.startswith("<frozen "):
            return _STDLIB
        path = os.path.realpath(filename)
        if _under(path, self._trusted):
            return _TRUSTED
        if _under(path, self._stdlib):
            return _STDLIB
        return _CANDIDATE

    def _requester(self, frame: Any) -> Any:
        """The first frame outside the standard library, walking out from the event."""
        while frame is not None and self._kind(frame) == _STDLIB:
            frame = frame.f_back
        return frame

    def _generated_by(self, code: Any) -> str:
        """Whose exec made generated `code`: "candidate" (by or for it), "evaluator", or "unseen"
        (exec'd before the guard was installed)."""
        if self._candidate_generated.get(id(code)) is code:
            return "candidate"
        if self._trusted_generated.get(id(code)) is code:
            return "evaluator"
        return "unseen"

    def _remember_generated(self, code: Any, *, trusted: bool) -> None:
        """`code` (and the functions it defines) was exec'd by the evaluator's side (`trusted`)
        or by or for the candidate."""
        stack = [code]
        while stack:
            code = stack.pop()
            if not trusted:  # the candidate's once, the candidate's for good
                self._trusted_generated.pop(id(code), None)
                self._candidate_generated[id(code)] = code
            elif self._generated_by(code) != "candidate":
                self._trusted_generated[id(code)] = code
            stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))

    def _generated_for_candidate(self, frame: Any) -> bool:
        """Whether code exec'd at `frame` is generated by or for the candidate.

        Walking out from the exec, the first frame that decides: candidate-written code (a file
        under a writable root, where the candidate's modules live, or code generated for it) makes
        it the candidate's; a module import (importlib's frames) makes it the imported module's
        own, library code even when the candidate's call set off the import (the methods of a
        dataclass in a module first imported during a candidate's call: taken for the
        candidate's, they made code generated under them later, by the evaluator's own calls,
        the candidate's too). With neither, it is the candidate's only while candidate
        code runs. So a finalizer the candidate left behind (its __del__ runs with the guard off)
        that has torch generate code (torch.fx) still gets the candidate's code, and so does code
        generated under code generated for it. Task files do not count: torch.compile of the
        reference runs through them.
        """
        while frame is not None:
            code = frame.f_code
            name = code.co_filename
            if name[:1] == "<":
                if name.startswith("<frozen importlib"):
                    return False
                if self._generated_by(code) == "candidate":
                    return True
            else:
                home = self._homes.get(name)
                if home is None:
                    home = _under(os.path.realpath(name), self.writable_roots)
                    self._homes[name] = home
                if home:
                    return True
            frame = frame.f_back
        return self._active

    def _by_candidate(self, frame: Any) -> bool:
        asker = self._requester(frame)
        return asker is not None and self._kind(asker) == _CANDIDATE

    def _candidate_line(self, frame: Any) -> int:
        while frame is not None:
            if self._kind(frame) == _CANDIDATE:
                return frame.f_lineno
            frame = frame.f_back
        return 0

    def _deny(self, rule: str, what: str, advice: str, frame: Any) -> PermissionError:
        line = self._candidate_line(frame)
        where = f" (candidate line {line})" if line else ""
        message = f"sandbox: the candidate tried to {what}{where}; {advice}"
        if len(self.violations) < _MAX_RECORDED:
            self.violations.append(Violation(rule, line, 0, message))
            if self.trace_path:
                self._trace(message, frame)
        return PermissionError(message)

    def _trace(self, message: str, frame: Any) -> None:
        """Append the denial and its stack, innermost first, to the trace file."""
        names = {_STDLIB: "stdlib", _TRUSTED: "trusted", _CANDIDATE: "candidate"}
        lines = [f"{message}  [guard {'on' if self._active else 'off'}]"]
        while frame is not None:
            code = frame.f_code
            kind = names[self._kind(frame)]
            if _generated(code.co_filename):
                by = self._generated_by(code)
                if by == "candidate":
                    kind += ", generated for the candidate"
                elif by == "unseen":
                    kind += ", generated before the guard or unseen"
            lines.append(f"  {code.co_filename}:{frame.f_lineno} {code.co_name} [{kind}]")
            frame = frame.f_back
        try:
            with open(self.trace_path, "a", encoding="utf-8") as f:  # type: ignore[arg-type]  # set
                f.write("\n".join(lines) + "\n\n")
        except OSError:
            pass

    def _enforced(self, frame: Any) -> bool:
        return self._active or (self._armed and self._by_candidate(frame))

    # -- files ---------------------------------------------------------------------------------

    def _resolve(self, path: Any, dir_fd: Any = None) -> str | None:
        try:
            if isinstance(path, int):
                return os.readlink(f"/proc/self/fd/{path}")
            text = os.fsdecode(os.fspath(path))
            if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(text):
                text = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), text)
            return os.path.realpath(text)
        except (TypeError, ValueError, OSError):
            return None

    def _write_problem(self, path: Any, dir_fd: Any = None) -> str | None:
        real = self._resolve(path, dir_fd)
        if _open_channel(path, real):
            return None
        if real == os.devnull:
            return None  # subprocess's DEVNULL: Triton builds its launcher with cc's output there
        if real is None or not _under(real, self.writable_roots) or _under(real, self.deny_paths):
            return f"write to {real or path!r} outside its working directory"
        return None

    def _read_problem(self, path: Any, dir_fd: Any = None) -> str | None:
        real = self._resolve(path, dir_fd)
        if real is None:
            return None if isinstance(path, int) else f"read {path!r}"
        if _open_channel(path, real):
            return None
        given = os.fsdecode(path) if isinstance(path, (str, bytes)) else real
        if _looks_secret(real) or _looks_secret(given) or _under(real, self.deny_paths):
            return f"read {real!r}, which looks like credentials or another process's data"
        roots = self.readable_roots
        if roots is not None and not _under(real, roots) and not _under(real, self.writable_roots):
            return f"read {real!r} outside the readable directories"
        return None

    # -- processes -----------------------------------------------------------------------------

    def _is_compiler_tool(self, event: str, args: tuple) -> bool:
        if event == "subprocess.Popen":
            executable, argv = args[0], args[1]
            program = executable or (argv if isinstance(argv, (str, bytes)) else argv[0])
        else:  # os.posix_spawn(path, argv, env)
            program = args[0]
        name = os.path.basename(os.fsdecode(program))
        if name == "file":
            # platform.architecture() runs `file -b <this interpreter>`; Triton's launcher build
            # keys its cache on it (runtime/build.py). That exact call and no other.
            if event != "subprocess.Popen" or not _is_interpreter_probe(args[1]):
                return False
        elif name not in COMPILER_TOOLS:
            return False
        found = program if os.sep in os.fsdecode(program) else _which(name)
        real = self._resolve(found) if found else None
        # A "ptxas" the candidate wrote into its own directory is not Triton's ptxas.
        return real is not None and not _under(real, self.writable_roots)


# -- event handlers: (guard, event, args, frame) -> PermissionError to raise, or None -------------


def _on_net(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    if not g._enforced(frame):
        return None
    return g._deny(
        "sandbox-net",
        f"use the network ({event})",
        "a candidate has no network; compute from the inputs",
        frame,
    )


def _on_ctypes(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    # torch and triton internals may use ctypes while the guard is active; the candidate never.
    if not (g._armed and g._by_candidate(frame)):
        return None
    return g._deny(
        "sandbox-ctypes",
        f"use ctypes ({event})",
        "raw memory access and native calls are not allowed; write a Triton kernel",
        frame,
    )


def _on_process(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    candidate = g._armed and g._by_candidate(frame)
    if not (candidate or g._active):
        return None
    if (
        not candidate
        and event in ("subprocess.Popen", "os.posix_spawn")
        and g._is_compiler_tool(event, args)
    ):
        return None  # Triton running ptxas or cc for the candidate's kernel
    return g._deny(
        "sandbox-process",
        f"start, signal or limit a process ({event}{_shown(args)})",
        "a candidate runs in this process only: no subprocesses, forks, signals or rlimits",
        frame,
    )


def _on_open(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    if not g._enforced(frame):
        return None
    path, mode, flags = (*args, None, None, None)[:3]
    if isinstance(flags, int):
        writing = bool(flags & _WRITE_FLAGS)
    else:
        writing = any(c in str(mode or "") for c in "wax+")
    problem = g._write_problem(path) if writing else g._read_problem(path)
    return _file_denial(g, problem, frame)


def _on_file_write(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    if not g._enforced(frame):
        return None
    paths, dir_fds = _FILE_EVENT_PATHS[event](args)
    for path, dir_fd in zip(paths, dir_fds):
        problem = g._write_problem(path, dir_fd)
        if problem:
            return _file_denial(g, problem, frame)
    return None


def _on_file_read(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    if not args or not g._enforced(frame):
        return None
    return _file_denial(g, g._read_problem(args[0]), frame)


def _file_denial(g: Guard, problem: str | None, frame: Any) -> PermissionError | None:
    if problem is None:
        return None
    return g._deny(
        "sandbox-file",
        problem,
        "a candidate reads and writes no files; it returns its outputs as tensors",
        frame,
    )


def _paths(*positions: int, dir_fd: int | None = None) -> Callable[[tuple], tuple[list, list]]:
    """Which arguments of a file event are paths (and which argument is their dir_fd)."""

    def pick(args: tuple) -> tuple[list, list]:
        found = [args[i] for i in positions if i < len(args) and args[i] is not None]
        fd = args[dir_fd] if dir_fd is not None and dir_fd < len(args) else None
        return found, [fd] * len(found)

    return pick


_FILE_EVENT_PATHS: dict[str, Callable[[tuple], tuple[list, list]]] = {
    "os.remove": _paths(0, dir_fd=1),
    "os.rmdir": _paths(0, dir_fd=1),
    "os.mkdir": _paths(0, dir_fd=2),
    "os.chmod": _paths(0, dir_fd=2),
    "os.chown": _paths(0, dir_fd=3),
    "os.utime": _paths(0, dir_fd=3),
    "os.truncate": _paths(0),
    "os.chflags": _paths(0),
    "os.lchflags": _paths(0),
    "os.setxattr": _paths(0),
    "os.removexattr": _paths(0),
    "os.rename": _paths(0, 1, dir_fd=2),
    "os.link": _paths(0, 1, dir_fd=2),
    "os.symlink": _paths(0, 1, dir_fd=2),  # the link's target must lie inside the sandbox too
    "shutil.rmtree": _paths(0, dir_fd=1),
    "shutil.copyfile": _paths(1),
    "shutil.copymode": _paths(1),
    "shutil.copystat": _paths(1),
    "shutil.copytree": _paths(1),
    "shutil.move": _paths(0, 1),
    "shutil.chown": _paths(0),
    "shutil.make_archive": _paths(0),
    "shutil.unpack_archive": _paths(1),
    "tempfile.mkstemp": _paths(0),
    "tempfile.mkdtemp": _paths(0),
}


def _on_getframe(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    if frame is None or not g._armed:
        return None
    direct = g._kind(frame) == _CANDIDATE
    helper = frame.f_code.co_filename.endswith(_FRAME_HELPERS) and g._by_candidate(frame)
    if not (direct or helper):
        return None  # namedtuple, typing, enum, torch and triton read their caller's module
    return _introspection(g, event, frame)


def _on_introspection(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    if not (g._armed and g._by_candidate(frame)):
        return None
    return _introspection(g, event, frame)


def _on_direct_introspection(
    g: Guard, event: str, args: tuple, frame: Any
) -> PermissionError | None:
    """compile/exec/marshal called by the candidate itself (not by an import it triggered)."""
    if frame is None or not g._armed or g._kind(frame) != _CANDIDATE:
        return None
    return _introspection(g, event, frame)


def _generated(filename: str) -> bool:
    """A code object's file name from exec'd source ("<string>", "<eval_with_key>.3"), not a
    frozen module's."""
    return filename[:1] == "<" and not filename.startswith("<frozen ")


def _on_exec(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    """exec/eval: remember whose generated code runs (`Guard._generated_for_candidate`); the
    candidate itself may not exec."""
    code = args[0] if args else None
    if isinstance(code, types.CodeType) and code.co_filename[:1] == "<":
        by_candidate = g._armed and frame is not None and g._generated_for_candidate(frame)
        g._remember_generated(code, trusted=not by_candidate)
    return _on_direct_introspection(g, event, args, frame)


def _on_getattr(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    name = args[1] if len(args) > 1 else None
    if frame is None or not g._armed or not isinstance(name, str):
        return None
    if name in _FRAME_ATTRS and g._by_candidate(frame):
        return _introspection(g, f"{event} {name}", frame)
    if name in _CODE_ATTRS and g._kind(frame) == _CANDIDATE:
        return _introspection(g, f"{event} {name}", frame)
    return None


def _on_setattr(g: Guard, event: str, args: tuple, frame: Any) -> PermissionError | None:
    name = args[1] if len(args) > 1 else None
    if name not in _PATCH_ATTRS or not (g._armed and g._by_candidate(frame)):
        return None
    if args and _made_here(g, frame, args[0]):
        return None  # a namedtuple's own __new__ getting its defaults, not a patch
    return g._deny(
        "monkeypatch",
        f"reassign {name} of {type(args[0]).__name__} {_short(args[0])}",
        "classes, code and defaults of objects may not be swapped at run time",
        frame,
    )


def _makers() -> dict[Any, str]:
    """Standard-library code that sets a patch attribute on an object it has just made, by the
    local variable holding that object: namedtuple gives its freshly eval'd `__new__` the
    defaults; typing's NamedTupleMeta gives the class it just built its bases."""
    import collections
    import typing

    makers: dict[Any, str] = {collections.namedtuple.__code__: "__new__"}
    new = getattr(getattr(typing, "NamedTupleMeta", None), "__new__", None)
    code = getattr(new, "__code__", None)
    if isinstance(code, types.CodeType):
        makers[code] = "nm_tpl"
    return makers


_MAKERS = _makers()


def _made_here(g: Guard, frame: Any, target: object) -> bool:
    """Whether the standard-library frame setting the attribute is one of `_MAKERS` and `target`
    is the very object that frame just made (so a candidate cannot point it at anything else);
    a candidate's own assignment, or a stdlib helper (functools.update_wrapper) it asks to set
    a function's defaults, is not."""
    if frame is None or g._kind(frame) != _STDLIB:
        return False
    local = _MAKERS.get(frame.f_code)
    return local is not None and frame.f_locals.get(local) is target


def _introspection(g: Guard, what: str, frame: Any) -> PermissionError:
    return g._deny(
        "sandbox-introspection",
        f"inspect the interpreter ({what})",
        "frames, the garbage collector, tracing and dynamic code reach the evaluator's own "
        "state; compute from the inputs only",
        frame,
    )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _shown(args: tuple) -> str:
    shown = [a for a in args[:2] if a is not None and not isinstance(a, int)] or args[:1]
    return f": {_short(shown[-1])}" if shown else ""


_Handler = Callable[[Guard, str, tuple, Any], "PermissionError | None"]
_HANDLERS: dict[str, _Handler] = {
    "open": _on_open,
    **dict.fromkeys(_FILE_EVENT_PATHS, _on_file_write),
    **dict.fromkeys(("os.listdir", "os.scandir", "glob.glob"), _on_file_read),
    **dict.fromkeys(
        _words(
            "os.system os.exec os.posix_spawn os.spawn os.fork os.forkpty os.startfile os.kill "
            "os.killpg subprocess.Popen pty.spawn signal.pthread_kill resource.setrlimit "
            "resource.prlimit"
        ),
        _on_process,
    ),
    "sys._getframe": _on_getframe,
    **dict.fromkeys(
        _words(
            "sys._current_frames sys._current_exceptions sys.settrace sys.setprofile "
            "sys._settraceallthreads sys._setprofileallthreads sys.addaudithook "
            "sys.monitoring.register_callback gc.get_objects gc.get_referrers gc.get_referents "
            "code.__new__ function.__new__"
        ),
        _on_introspection,
    ),
    **dict.fromkeys(("compile", "marshal.loads", "marshal.load"), _on_direct_introspection),
    "exec": _on_exec,
    "object.__getattr__": _on_getattr,
    "object.__setattr__": _on_setattr,
    "object.__delattr__": _on_setattr,
}


_FALLBACK_RULES: dict[_Handler, str] = {
    _on_net: "sandbox-net",
    _on_ctypes: "sandbox-ctypes",
    _on_process: "sandbox-process",
    _on_open: "sandbox-file",
    _on_file_write: "sandbox-file",
    _on_file_read: "sandbox-file",
}


def _fallback(guard: Guard, handler: _Handler, event: str) -> PermissionError | None:
    if not guard._active or handler in (_on_getattr, _on_getframe):
        return None  # those two fire inside torch/triton all the time: never fail closed there
    rule = _FALLBACK_RULES.get(handler, "sandbox-introspection")
    message = f"sandbox: the candidate's {event} event could not be judged, so it was refused"
    if len(guard.violations) < _MAX_RECORDED:
        guard.violations.append(Violation(rule, 0, 0, message))
    return PermissionError(message)


def _audit_hook(event: str, args: tuple) -> None:
    """Runs on every audit event of the process: return at once for anything not handled."""
    handler = _HANDLERS.get(event)
    if handler is None:
        if event[:7] == "socket.":
            handler = _on_net
        elif event[:7] == "ctypes.":
            handler = _on_ctypes
        else:
            return
    guard = _GUARD
    if guard is None:
        return
    ident = threading.get_ident()
    if ident in guard._busy:
        return  # the hook's own frame and path lookups raise events too
    guard._busy.add(ident)
    denial = None
    try:
        try:
            frame = sys._getframe(1)
        except ValueError:  # an event raised with no Python code on the stack
            frame = None
        denial = handler(guard, event, args, frame)
    except Exception:  # a judgement that failed: refuse while candidate code runs, else allow
        denial = _fallback(guard, handler, event)
    finally:
        frame = None
        guard._busy.discard(ident)
    if denial is not None:
        raise denial
