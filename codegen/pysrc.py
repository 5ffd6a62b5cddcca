"""Writing Python source that ruff format leaves unchanged: literals, wrapped calls and defs."""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

import torch

LINE = 100  # ruff's line-length in pyproject.toml

TORCH_DTYPES = {
    torch.float32: "torch.float32",
    torch.float16: "torch.float16",
    torch.bfloat16: "torch.bfloat16",
    torch.float64: "torch.float64",
    torch.int64: "torch.int64",
    torch.int32: "torch.int32",
    torch.int16: "torch.int16",
    torch.int8: "torch.int8",
    torch.uint8: "torch.uint8",
    torch.bool: "torch.bool",
}


def literal(value: Any) -> str:
    """A Python literal in ruff-format style (double quotes, torch dtypes by name)."""
    if isinstance(value, torch.dtype):
        return TORCH_DTYPES[value]
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float):
        if math.isinf(value):
            return 'float("inf")' if value > 0 else '-float("inf")'
        if math.isnan(value):
            return 'float("nan")'
        return repr(value)
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, torch.device):
        return f"torch.device({literal(str(value))})"
    if isinstance(value, slice):
        return f"slice({literal(value.start)}, {literal(value.stop)}, {literal(value.step)})"
    if value is Ellipsis:
        return "..."
    if isinstance(value, torch.memory_format):
        return "torch." + str(value).split(".")[-1]
    if isinstance(value, torch.Size):
        return literal(tuple(value))
    raise TypeError(f"no literal for {type(value).__name__}")


def call(
    head: str, items: list[str], indent: str, tail: str = "", brackets: str = "()"
) -> list[str]:
    """`head(item, ...)tail` wrapped the way ruff format wraps it, as lines with `indent`
    (`brackets` "[]" or "{}" for a display: `head` is then what comes before it)."""
    opening, closing = brackets
    one = f"{indent}{head}{opening}{', '.join(items)}{closing}{tail}"
    if len(one) <= LINE:
        return [one]
    inner = indent + "    "
    hug = f"{inner}{', '.join(items)}"
    if len(hug) <= LINE and not any("," in i and "(" not in i for i in items):
        return [f"{indent}{head}{opening}", hug, f"{indent}{closing}{tail}"]
    lines = [f"{indent}{head}{opening}"]
    for item in items:
        lines += _item_lines(item, inner)
    return [*lines, f"{indent}{closing}{tail}"]


def _item_lines(item: str, indent: str) -> list[str]:
    """One argument of a split call, itself split where it is a call or display still too
    long (ruff format splits nested brackets the same way: `nn.Sequential(nn.Linear(...), ...)`)."""
    if len(indent) + len(item) + 1 <= LINE:
        return [f"{indent}{item},"]
    name, eq, value = item.partition("=")
    keyword = f"{name}=" if eq and name.isidentifier() else ""
    expr = value if keyword else item
    return _bracket_lines(expr, indent, keyword, ",") or [f"{indent}{item},"]


def _bracket_lines(expr: str, indent: str, prefix: str, suffix: str) -> list[str] | None:
    """`prefix expr suffix` split at the brackets of `expr` where it is one call (`f(...)`,
    optionally followed by a short call chain or subscript), one display (`[...]`, `(...)`,
    `{...}`) or one comprehension, as ruff format splits them; None for any other shape."""
    opened = next((i for i, ch in enumerate(expr) if ch in "([{"), -1)
    if opened < 0 or (opened > 0 and not _is_name(expr[:opened])):
        return None
    if opened == 0 and expr[0] == "(" and not _top_level(expr[1:-1], ","):
        return None  # a parenthesised expression, not a tuple: other rules split it
    close = _matching(expr, opened)
    tail = expr[close + 1 :]
    if close < 0 or not (tail == "" or (tail[0] in ".[" and _is_call_chain(tail))):
        return None
    head = f"{prefix}{expr[:opened]}"
    brackets = expr[opened] + expr[close]
    content = expr[opened + 1 : close]
    clauses = _comprehension(content)
    if clauses is not None:
        one = f"{indent}{head}{expr[opened:]}{suffix}"
        if len(one) <= LINE:
            return [one]
        inner = indent + "    "
        elt, *rest = clauses
        body = _bracket_lines(elt, inner, "", "") if len(inner) + len(elt) > LINE else None
        lines = [f"{indent}{head}{brackets[0]}", *(body or [f"{inner}{elt}"])]
        lines += [f"{inner}{clause}" for clause in rest]
        return [*lines, f"{indent}{brackets[1]}{tail}{suffix}"]
    items = [a.strip() for a in split_top(content, ",") if a.strip()]
    return call(head, items, indent, tail + suffix, brackets)


def _comprehension(content: str) -> list[str] | None:
    """The element and the `for`/`if` clauses of a comprehension's content, or None."""
    words = (" for ", " async for ", " if ")
    marks = sorted(i for word in words for i in _top_level(content, word))
    if not marks or content[marks[0] :].lstrip().startswith("if "):
        return None
    cuts = [0, *marks, len(content)]
    return [content[a:b].strip() for a, b in itertools.pairwise(cuts)]


def _top_level(text: str, word: str) -> list[int]:
    """Where `word` starts in `text` with no bracket open and outside string literals."""
    return [i for i, depth in _scan(text) if depth == 0 and text.startswith(word, i)]


def _scan(text: str):
    """(index, bracket depth before it) for each character of `text` outside string literals;
    the brackets themselves are yielded too (an opening one at the depth outside it)."""
    depth, quote = 0, ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
            continue
        if ch in ")]}":
            depth -= 1
        yield i, depth
        if ch in "([{":
            depth += 1


def _is_name(text: str) -> bool:
    return text.replace("_", "").replace(".", "").replace("[", "").replace("]", "").isalnum()


def join_lines(blocks: list[list[str]], blank: int = 2) -> str:
    """Top-level blocks separated by `blank` empty lines, ending in one newline."""
    sep = "\n" * (blank + 1)
    return sep.join("\n".join(b).rstrip("\n") for b in blocks if b) + "\n"


def prod(terms: list[str]) -> str:
    """A product expression of terms, "1" when there are none."""
    return " * ".join(terms) if terms else "1"


def comment_lines(text: str, indent: str) -> list[str]:
    """A comment wrapped at the line length."""
    words, lines, cur = text.split(), [], ""
    width = LINE - len(indent) - 2
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    if cur:
        lines.append(cur)
    return [f"{indent}# {line}" for line in lines]


def docstring(text: str, indent: str) -> list[str]:
    """A docstring on one line when it fits, else wrapped with the closing quotes alone."""
    one = f'{indent}"""{text}"""'
    if len(one) <= LINE:
        return [one]
    words, lines, cur = text.split(), [], f'{indent}"""'
    for word in words:
        candidate = f"{cur}{word}" if cur.endswith('"""') else f"{cur} {word}"
        # Wrap short of the limit: content that fits one line is kept on one line by ruff.
        if len(candidate) > LINE - 4 and not cur.endswith('"""'):
            lines.append(cur)
            cur = f"{indent}{word}"
        else:
            cur = candidate
    lines.append(cur)
    lines.append(f'{indent}"""')
    return lines


def split_top(expr: str, sep: str) -> list[str]:
    """expr split at `sep` where no bracket is open (and not inside a string literal)."""
    cuts = _top_level(expr, sep)
    starts = [0, *(i + len(sep) for i in cuts)]
    return [expr[a:b] for a, b in zip(starts, [*cuts, len(expr)], strict=True)]


# An augmented assignment's target and operator (`acc += `, `self.n //= `, `x[i] -= `).
AUGMENTED = re.compile(r"^[\w.]+(\[[^\]]*\])? (\+|-|\*|/|//|%|\*\*|@|&|\||\^|<<|>>)= ")


def fit(line: str) -> list[str]:
    """A statement over the line limit wrapped the way ruff format wraps it (calls split at
    their arguments, other expressions parenthesised and split at + or &)."""
    if len(line) <= LINE or line.lstrip().startswith("#"):
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    stmt = line.strip()
    if stmt.startswith("def ") and stmt.endswith("):") and "(" in stmt:
        # A signature: its parameters split like a call's, the colon after the parenthesis.
        opened = stmt.index("(")
        if _matching(stmt, opened) == len(stmt) - 2:
            params = [a.strip() for a in split_top(stmt[opened + 1 : -2], ",") if a.strip()]
            return call(stmt[:opened], params, indent, ":")
    head, eq, expr = stmt.partition(" = ")
    if not eq:
        head, expr = "", stmt
    prefix = f"{head} = " if eq else ""
    augmented = AUGMENTED.match(stmt)
    if augmented:  # `acc += a + b`: the right side is wrapped, never the statement
        prefix, expr = augmented.group(0), stmt[augmented.end() :]
    if not eq and stmt.startswith("return "):
        prefix, expr = "return ", stmt[len("return ") :]
    # One call `f(...)` (optionally followed by .method(...)), display or comprehension: split
    # at its brackets.
    lines = _bracket_lines(expr, indent, prefix, "")
    if lines is not None:
        return lines
    inner = indent + "    "
    if len(inner) + len(expr) <= LINE:
        return [f"{indent}{prefix}(", f"{inner}{expr}", f"{indent})"]
    for op in (" | ", " & ", " + ", " - ", " * "):
        parts = split_top(expr, op)
        if len(parts) > 1:
            body = [f"{inner}{parts[0].strip()}"] + [
                f"{inner}{op.strip()} {p.strip()}" for p in parts[1:]
            ]
            return [f"{indent}{prefix}(", *body, f"{indent})"]
    return [line]


def _matching(text: str, start: int) -> int:
    """The index of the bracket closing the one at `start`, or -1."""
    for i, depth in _scan(text[start:]):
        if depth == 0 and i > 0 and text[start + i] in ")]}":
            return start + i
    return -1


def _is_call_chain(tail: str) -> bool:
    return tail.count("(") == tail.count(")") and len(tail) < 40


def drop_dead(lines: list[str]) -> list[str]:
    """Remove `name = ...` lines whose name is read nowhere else (ruff's F841), to a fixpoint.

    Templates write some values every kernel variant needs and some only one variant reads (the
    per-row index when nothing per-row is loaded); this keeps the emitted kernels minimal.
    """
    import re

    assign = re.compile(r"^(\s*)([A-Za-z_]\w*) = ")
    changed = True
    while changed:
        changed = False
        text = "\n".join(lines)
        for i, line in enumerate(lines):
            m = assign.match(line)
            if not m or (
                not line.rstrip().endswith((")", "]")) and "(" in line and ")" not in line
            ):
                continue
            name = m.group(2)
            if len(re.findall(rf"\b{name}\b", text)) == 1 and _complete(line):
                del lines[i]
                changed = True
                break
    return lines


def _complete(line: str) -> bool:
    """The assignment is on one line (brackets balanced)."""
    return line.count("(") == line.count(")") and line.count("[") == line.count("]")


def ruff_formatted(source: str) -> str:
    """`source` through `ruff format` when ruff is installed (a development dependency); the
    templates already write formatted code, this catches lines that long names made too long."""
    import shutil
    import subprocess

    ruff = shutil.which("ruff")
    if ruff is None:
        return source
    cmd = [ruff, "format", "--line-length", str(LINE), "--stdin-filename", "candidate.py", "-"]
    try:
        proc = subprocess.run(cmd, input=source, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return source
    return proc.stdout if proc.returncode == 0 and proc.stdout else source
