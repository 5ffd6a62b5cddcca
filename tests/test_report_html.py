"""The reports' HTML: kernels highlighted and escaped, and each page rendered by a real browser."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from test_report_support import (
    HISTORY,
    KERNEL,
    PLOTS,
    SUITE,
    blue_pixels,
    chromium,
    write_gpu_run,
    write_run_report,
)

from kernelwright.report.html import highlight_python
from kernelwright.report.nightly import write_nightly_report
from kernelwright.report.suite import write_suite_report


@pytest.fixture
def gpu_run(tmp_path) -> Path:
    return write_gpu_run(tmp_path)


def test_highlighter_escapes_everything_and_keeps_the_text():
    source = KERNEL + "s = 'it\\'s <b>' + \"\"\"unterminated\n"
    out = highlight_python(source)
    assert html.unescape(re.sub(r"<[^>]+>", "", out)) == source
    assert "<b>" not in out and "<script>" not in out
    found = re.findall(r'<span class="(\w+)">([^<]*)</span>', out)
    spans = {text: cls for cls, text in found}
    # Highlighted by meaning (pygments' classes): keywords, the function's name, decorators,
    # comments, strings (escaped) and numbers each have a class of their own.
    assert spans["def"] == "k" and spans["import"] == "kn"
    assert spans["_scale_kernel"] == "nf"
    assert spans["@triton"] == "nd"
    assert spans["# tune: 256, 512, 1024"].startswith("c")
    assert spans["2.0"] == "mf" and spans["0"] == "mi"
    assert any(cls.startswith("s") and "&lt;b&gt;" in text for text, cls in spans.items())
    assert html.unescape(re.sub(r"<[^>]+>", "", highlight_python("tlx"))) == "tlx"
    matmul = highlight_python("a @ b")  # matmul, not a decorator
    assert "nd" not in re.findall(r'class="(\w+)"', matmul)
    assert html.unescape(re.sub(r"<[^>]+>", "", matmul)) == "a @ b"


@pytest.mark.parametrize("kind", ["run", "suite", "nightly"])
def test_html_report_renders_in_headless_chromium(kind, tmp_path, gpu_run):
    if kind == "run":
        page, table_class, rows = write_run_report(gpu_run)["html"], "rounds", 3
    elif kind == "suite":
        page, table_class, rows = write_suite_report(SUITE, tmp_path / "s")["html"], "tasks", 5
    else:
        page = write_nightly_report(HISTORY, tmp_path / "n")["html"]
        table_class, rows = "nightly", 5
    dom = chromium(page, tmp_path, "--dump-dom")
    table = re.search(rf'<table class="{table_class}">(.*?)</table>', dom, re.S)
    assert table is not None, dom[:2000]
    assert table.group(1).count("<tr>") == rows + 1  # the header row, then one per item
    assert re.search(r'<img class="plot"[^>]* src="data:image/png;base64,', dom)
    shot = tmp_path / "shot.png"
    chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1200,1600", "--hide-scrollbars")
    # The plot's blue series reaches the screen only if the embedded PNG was decoded and laid
    # out (at its natural size: every plot is narrower than the page).
    in_png = blue_pixels(page.parent / PLOTS[kind])
    assert in_png > 50 and blue_pixels(shot) >= in_png // 2, "the plot did not render"
