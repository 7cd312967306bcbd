"""The README is a front door that fits in ten minutes of reading, and every link it gives leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)|<img[^>]*\ssrc=\"([^\"]+)\"")


def relative_links(text: str) -> list[str]:
    found = [a or b for a, b in LINK.findall(text)]
    return [link for link in found if not re.match(r"[a-z][a-z0-9+.-]*:|#", link)]


def test_the_readme_is_at_most_12000_bytes():
    size = README.stat().st_size
    assert size <= 12_000, f"README.md is {size} bytes; move detail to a docs/ page and link it (at most 12,000)"


def test_every_relative_link_of_the_readme_names_a_file_that_exists():
    links = relative_links(README.read_text())
    assert any(link.startswith("docs/") for link in links), "the README links no docs page"
    missing = [link for link in links if not (REPO / link.split("#")[0]).exists()]
    assert missing == [], f"README.md links files that do not exist: {missing}"


def test_relative_links_are_found_in_markdown_and_img_tags():
    text = '[a](docs/a.md) [b](https://x.org) <img src="docs/p.png" alt="p"> [c](#top) [d](x.md#part)'
    assert relative_links(text) == ["docs/a.md", "docs/p.png", "x.md#part"]
