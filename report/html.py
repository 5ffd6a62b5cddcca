"""The reports' HTML: Jinja2 templates (report/templates/), kernels highlighted by pygments.

The pages are self-contained: CSS inline, plots embedded as base64 PNGs, and a
Content-Security-Policy that forbids any network or script, so a page opens the same from a
laptop, a CI artifact or an air-gapped GPU box. Templates autoescape; what is already HTML (a
badge, highlighted code) is Markup.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

__all__ = ["Markup", "badge", "escape", "highlight_python", "kernel_view", "png_base64", "render"]

_FORMATTER = HtmlFormatter(nowrap=True, style="default")

# pygments' token colours first: the page's own rule for pre.code (background, font) comes after.
CSS = (
    _FORMATTER.get_style_defs("pre.code")
    + """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232a;
       background: #fafbfc; margin: 0; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 64px; }
h1 { font-size: 24px; margin: 8px 0 12px; } h2 { font-size: 18px; margin: 28px 0 8px; }
p.verdict { font-size: 16px; background: #fff; border-left: 4px solid #556; padding: 10px 14px; }
p.note { background: #fff6dd; border-left: 4px solid #c90; padding: 8px 14px; }
table { border-collapse: collapse; background: #fff; margin: 6px 0; font-size: 14px; }
th, td { border: 1px solid #d6dae0; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #eef1f4; }
td.num, th.num { text-align: right; }
.badge { border-radius: 4px; padding: 0 6px; font-size: 13px; }
.badge.ok { background: #dff3e4; color: #14532d; }
.badge.bad { background: #fde2e2; color: #7f1d1d; }
.badge.pending { background: #eceff3; color: #333; }
.regression { color: #b00020; font-weight: 600; }
img.plot { display: block; max-width: 100%; background: #fff; border: 1px solid #d6dae0; }
details { margin: 6px 0; background: #fff; border: 1px solid #d6dae0; border-radius: 4px; }
summary { cursor: pointer; padding: 6px 10px; font-family: ui-monospace, monospace; }
pre.code { margin: 0; padding: 10px 14px; overflow-x: auto; font: 13px/1.4 ui-monospace,
           "DejaVu Sans Mono", monospace; background: #f6f8fa; border-top: 1px solid #d6dae0; }
"""
)

# No network, no scripts: only inline styles and data: images may load.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def badge(status: str) -> Markup:
    kind = "ok" if status == "ok" else "pending" if status in ("pending", "duplicate") else "bad"
    return Markup('<span class="badge {}">{}</span>').format(kind, status)


_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
_ENV.globals["badge"] = badge


def render(template: str, **values: Any) -> str:
    """The page `template` (a file of report/templates/) with `values`, the CSS and the CSP."""
    return _ENV.get_template(template).render(css=Markup(CSS), csp=CSP, **values)


def highlight_python(source: str) -> Markup:
    """`source` as escaped HTML with pygments' <span> classes. Never fails, even on broken code,
    and keeps the text as it is (no newline added or stripped)."""
    out = highlight(source, PythonLexer(stripnl=False, ensurenl=False), _FORMATTER)
    if not source.endswith("\n") and out.endswith("\n"):  # the lexer ends its last line
        out = out[:-1]
    return Markup(out)


def kernel_view(title: str, source: str, status: str, *, open_: bool = False) -> dict[str, Any]:
    """A kernel file for the pages' kernel macro: its title, verdict and highlighted source."""
    return {"title": title, "status": status, "code": highlight_python(source), "open": open_}


def png_base64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")
