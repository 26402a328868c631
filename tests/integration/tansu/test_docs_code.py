"""The Python code of README.md and the user guides runs against a real broker, as a reader would run it.

Each page's blocks run in order in one namespace, with the example broker address replaced by the
session's Tansu (tests/support/doc_blocks.py says how a block is marked to be left out, and why).
Spark blocks run in tests/integration/spark/test_docs_spark.py, docs/security.md's examples in
tests/integration/security/test_docs_security.py.
"""

from __future__ import annotations

import pytest

from kproducer import Producer
from kproducer.embedded_broker import EmbeddedBroker
from tests.support.doc_blocks import USER_PAGES, Block, python_blocks, run_page


def _runnable(page: str) -> list[Block]:
    return [b for b in python_blocks(page) if b.not_run is None and not b.spark and not b.security_example]


PAGES_WITH_CODE = [page for page in USER_PAGES if _runnable(page)]


def test_every_block_is_run_somewhere_or_says_why_not() -> None:
    # Parsing raises for a '<!-- not run -->' without a reason; every other block is run by this
    # module, by the Spark one, or by the security examples' test.
    total = [b for page in USER_PAGES for b in python_blocks(page)]
    assert total, "no python blocks found in README.md and docs/"
    for block in total:
        assert block.not_run is None or len(block.not_run) > 10, f"{block.where}: give a real reason"


def test_the_readme_quick_start_is_run() -> None:
    readme = python_blocks("README.md")
    assert readme[0].not_run is None and not readme[0].spark
    assert "Producer" in readme[0].code


@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_page_code_runs(page: str, tansu: EmbeddedBroker, capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {"__name__": f"doc:{page}"}
    try:
        run_page(_runnable(page), namespace, tansu.bootstrap)
    finally:
        # A page may leave a producer open for the next block; close what is left.
        for value in namespace.values():
            if isinstance(value, Producer):
                value.close(timeout=30)
    printed = capsys.readouterr().out
    if page == "README.md":
        assert "delivered to orders[" in printed, printed
