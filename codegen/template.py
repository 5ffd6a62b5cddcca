"""Kernel text from templates: the emitted code is written out as code, with `$fields` where it
varies, and `render` fills them in.

A template is a triple-quoted string, dedented, its first and last empty lines dropped. In it:
- `$name` inside a line is replaced with a str (string.Template rules: `${name}` next to letters,
  `$$` for a dollar sign);
- `$name` alone on its line is a block: a list of lines, each indented like the placeholder (an
  empty list leaves no line), or a function of that indentation returning the lines (for text
  wrapped to the line length: `call`, `docstring`, a pointwise line).
"""

from __future__ import annotations

import re
import string
import textwrap
from collections.abc import Callable, Sequence

Block = Sequence[str] | Callable[[str], list[str]]

_ALONE = re.compile(r"^(\s*)\$(\w+)$")


def render(template: str, **fields: str | Block) -> list[str]:
    """The lines of `template` with its fields filled in (module docstring: the rules)."""
    inline = {k: v for k, v in fields.items() if isinstance(v, str)}
    out: list[str] = []
    for line in textwrap.dedent(template).strip("\n").split("\n"):
        alone = _ALONE.match(line)
        if alone and alone[2] not in inline:
            indent, block = alone[1], fields[alone[2]]
            if callable(block):
                out += block(indent)
            else:
                out += [indent + b if b else b for b in block]
        else:
            out.append(string.Template(line).substitute(inline) if "$" in line else line)
    return out
