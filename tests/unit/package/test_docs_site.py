"""The documentation site builds with ``mkdocs build --strict``: a broken link, a page left out of
the nav, a nav entry without its page or an API reference that does not resolve fails the suite."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO_ROOT


def _mkdocs(config: Path, site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        import mkdocs  # noqa: F401
        import mkdocstrings  # noqa: F401
    except ImportError as e:
        raise AssertionError(f"the docs extra is not installed ({e}): pip install -e '.[docs]'") from e
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=cwd, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    done = _mkdocs(REPO_ROOT / "mkdocs.yml", tmp_path / "site", REPO_ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    # The API reference was rendered from the docstrings, not left as a ':::' line.
    producer_page = (tmp_path / "site" / "reference" / "producer" / "index.html").read_text()
    assert 'id="kproducer.Producer.send"' in producer_page
    assert ":::" not in producer_page


def test_a_reference_that_does_not_resolve_fails_the_build(tmp_path: Path) -> None:
    # The same plugin settings as the site, on one page naming an object that does not exist.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Broken\n\n::: kproducer.NoSuchProducer\n")
    shutil.copy(REPO_ROOT / "docs" / "_hooks.py", tmp_path / "docs" / "_hooks.py")
    shutil.copytree(REPO_ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    config = (REPO_ROOT / "mkdocs.yml").read_text()
    config = config[: config.index("nav:")] + config[config.index("markdown_extensions:") :]
    (tmp_path / "mkdocs.yml").write_text(config)
    done = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site", tmp_path)
    assert done.returncode != 0
    assert "kproducer.NoSuchProducer" in done.stderr


def test_the_readme_and_contributing_links_lead_to_files() -> None:
    # Outside the site, so mkdocs does not check them: every relative link names a file that exists.
    for page in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md"):
        text = (REPO_ROOT / page).read_text()
        targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
        local = [t for t in targets if "://" not in t]
        assert local or page == "CHANGELOG.md", page
        missing = [t for t in local if not (REPO_ROOT / t).exists()]
        assert missing == [], f"{page} links to missing files: {missing}"
