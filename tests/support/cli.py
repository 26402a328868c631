"""Running the ``kproducer`` command line as a user does: a child process of this interpreter."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.support.paths import REPO_ROOT


def run_cli(*args: str, stdin: str | bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess[Any]:
    """``python -m kproducer.cli ARGS``; text in and out, or bytes when ``stdin`` is bytes."""
    return subprocess.run(
        [sys.executable, "-m", "kproducer.cli", *args],
        input=stdin,
        capture_output=True,
        text=not isinstance(stdin, bytes),
        timeout=timeout,
        cwd=REPO_ROOT,
        check=False,
    )
