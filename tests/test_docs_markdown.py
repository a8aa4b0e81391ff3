"""The README and docs render as written: every fenced code block is closed."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_code_fence_is_closed(page: Path) -> None:
    fences = [
        n
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if line.lstrip().startswith("```")
    ]
    assert len(fences) % 2 == 0, f"{page.name}: the fence at line {fences[-1]} is not closed"
