"""A griffe extension for the API reference: read ``Example:`` sections as ``Examples:``.

The docstrings head their doctests ``Example:``; griffe's Google-style parser
knows only the plural as a section of examples and would render the singular as
a Markdown admonition, where ``>>>`` lines become block quotes. Renaming the
heading before parsing keeps the docstrings as they are and renders the
examples as code.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_SINGULAR = re.compile(r"^(\s*)Example:[ \t]*$", re.M)


class ExampleSections(griffe.Extension):
    """Rename every ``Example:`` section heading to ``Examples:``."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _SINGULAR.sub(r"\1Examples:", obj.docstring.value)
