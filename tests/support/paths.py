"""Where the repository is, for tests that read its docs or start its scripts (any test directory)."""

from __future__ import annotations

from pathlib import Path

#: The repository root (this file is tests/support/paths.py).
REPO_ROOT = Path(__file__).resolve().parents[2]
