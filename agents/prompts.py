"""The agents' prompts: prompts/<template>.j2 loaded as Jinja2 modules, one macro per part."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jinja2

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


@cache
def _prompt_env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROMPTS_DIR),
        undefined=jinja2.StrictUndefined,  # a missing variable is a bug, not an empty string
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def load_prompt(template: str, **variables: Any) -> Any:
    """prompts/<template> bound to `variables`: each macro (system(), task(), ...) is one part.

    Parts are separate so that an agent can mark which ones `fit_messages` may trim (history,
    logs, examples) and which never (the task, the current kernel).
    """
    return _prompt_env().get_template(template).make_module(variables)


def prompt_part(module: Any, name: str) -> str:
    """The text of one macro of a loaded prompt, stripped of surrounding blank lines."""
    return str(getattr(module, name)()).strip("\n")
