"""MkDocs hook: the docstrings' Sphinx cross-reference roles shown as plain code in the API reference.

The docstrings write ``:class:`X``` and ``:meth:`send``` (reStructuredText roles, which Python's
own help() shows as they are); mkdocstrings renders the backquoted name as code and leaves the
role's prefix as text. This drops the prefix, so the page reads ``X``.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|meth|func|mod|attr|data|exc|obj|const):(?=<code>)")


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub("", html)
