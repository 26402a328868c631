"""The ```python blocks of README.md and the user guides, and the markers that say how a test runs them.

A block runs as written, in one namespace per page (so a later block may use what an earlier one
made, as a reader would), with the example broker addresses (``localhost:9092``, ``broker:9092``)
replaced by the test broker's. HTML comments on the lines right before a block's fence, invisible
on the rendered page, change that:

- ``<!-- not run: REASON -->``: the block is not executed; the reason says why (it needs a TLS
  cluster, a cloud account, a Spark Connect server...). A block marked so without a reason fails.
- ``<!-- spark -->``: the block needs a Spark session named ``spark``; it runs in the Spark tests'
  session (tests/integration/spark/test_docs_spark.py), not in the fast broker-only test.
- ``<!-- setup: CODE -->``: one line of Python run before the block in the same namespace, for what
  the page leaves to the reader (a DataFrame ``df`` to write, say).

A block whose first line is ``# example: NAME`` is one of docs/security.md's examples, which
tests/integration/security/test_docs_security.py runs against real TLS and SASL brokers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import REPO_ROOT

#: The pages whose code a user copies: README.md and every guide (docs/architecture.md is for
#: maintainers and holds no runnable code; docs/configuration.md is generated and has none).
USER_PAGES = ("README.md", *sorted(
    str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "docs").glob("*.md") if p.name != "architecture.md"
))

#: The example addresses a page may use for "your broker".
EXAMPLE_BOOTSTRAPS = ("localhost:9092", "broker:9092", "127.0.0.1:9092")

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*(not run|spark|setup)\s*(?::\s*(.*?))?\s*-->\s*$")


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    code: str
    not_run: str | None = None  # the reason, when marked <!-- not run: ... -->
    spark: bool = False
    setup: str | None = None

    @property
    def security_example(self) -> bool:
        return self.code.startswith("# example:")

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def python_blocks(page: str) -> list[Block]:
    """Every ```python block of ``page`` (a path relative to the repository root), with its markers."""
    lines = (REPO_ROOT / page).read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        start = i
        end = start + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if m.group(1) == "python":
            block = Block(page, start + 1, "\n".join(lines[start + 1 : end]) + "\n")
            j = start - 1
            while j >= 0 and (marker := _MARKER.match(lines[j])) is not None:
                kind, arg = marker.group(1), marker.group(2)
                if kind == "not run":
                    if not arg:
                        raise AssertionError(f"{page}:{j + 1}: '<!-- not run: -->' needs a reason")
                    block.not_run = arg
                elif kind == "spark":
                    block.spark = True
                else:
                    block.setup = arg
                j -= 1
            blocks.append(block)
        i = end + 1
    return blocks


def with_bootstrap(code: str, bootstrap: str) -> str:
    """``code`` with the page's example broker addresses replaced by ``bootstrap``."""
    for example in EXAMPLE_BOOTSTRAPS:
        code = code.replace(example, bootstrap)
    return code


def run_page(blocks: list[Block], namespace: dict[str, object], bootstrap: str) -> None:
    """Execute ``blocks`` (of one page, in order) in ``namespace``; an exception names the block."""
    for block in blocks:
        if block.setup is not None:
            exec(compile(with_bootstrap(block.setup, bootstrap), f"{block.where} (setup)", "exec"), namespace)
        exec(compile(with_bootstrap(block.code, bootstrap), block.where, "exec"), namespace)


def page_path(page: str) -> Path:
    return REPO_ROOT / page
