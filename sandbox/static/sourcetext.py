"""A candidate's source is UTF-8 text, read one way by everyone: the checks and what runs.

The static check reads the candidate as a str; the judge writes that str to the candidate's
home as UTF-8 (remote.py), and the candidate process compiles the file's bytes decoded as strict
UTF-8 (process.py `load_module`), never letting Python decode the file itself. Python would
honour a PEP 263 coding declaration: `# coding: utf-7` makes `#+AAo-import os` a comment to the
checks and code to the interpreter. So the check refuses (`encoding_problem`, rule "encoding"):
- a declaration naming anything but UTF-8 (`utf-8`, `utf8`, any case, `_` for `-`). Also
  `utf-8-sig`: it only strips a byte-order mark, which Python refuses to see declared beside
  one, and a reader that honours declarations (linecache, hence inspect.getsource, which Triton
  reads a kernel's source with) must decode exactly the checked text;
- a byte-order mark: U+FEFF at the start of the str, which compile() of the str refuses as a
  character (and with which Python accepts no declaration but `utf-8`): one clear message;
- a str that is not valid UTF-8 (an unpaired surrogate, as decoding with surrogateescape
  leaves): the file the judge writes could not hold it.
"""

from __future__ import annotations

import io
import re
import tokenize

# PEP 263's declaration: a comment on line 1 or 2 holding `coding:` or `coding=` and a name.
_DECLARATION = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)
UTF8_NAMES = frozenset({"utf-8", "utf8"})


def encoding_problem(source: str) -> tuple[int, str] | None:
    """(line, what is wrong) when Python could read `source` otherwise than as the UTF-8 text it
    is, else None."""
    try:
        data = source.encode("utf-8")
    except UnicodeEncodeError as e:
        where = source.count("\n", 0, e.start) + 1
        return where, f"the file is not valid UTF-8 (the unpaired surrogate {source[e.start]!r})"
    if source.startswith("\ufeff"):
        return 1, "the file starts with a byte-order mark (U+FEFF)"
    # Python splits lines at \n (and a file read with universal newlines at \r too): every
    # start of a line under either, within the first two lines.
    for number, line in enumerate(source.split("\n", 2)[:2], 1):
        for piece in line.split("\r"):
            found = _DECLARATION.match(piece)
            if found and _normal(found.group(1)) not in UTF8_NAMES:
                shown = piece.strip()[:80]
                return number, f"`{shown}` declares the file {found.group(1)[:40]!r}"
    try:  # Python's own reading of the declaration, should it differ from the pattern's
        name, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:
        return 1, f"Python cannot read the file's encoding declaration ({e})"
    if _normal(name) not in UTF8_NAMES:
        return 1, f"the file declares the encoding {name[:40]!r}"
    return None


def decode(data: bytes) -> str:
    """The candidate file's text: its bytes as strict UTF-8 (UnicodeDecodeError otherwise)."""
    return data.decode("utf-8", "strict")


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")
