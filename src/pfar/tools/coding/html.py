"""HTML as markdown, for a model to read: headings, links, lists and code kept; scripts,
styles and page chrome that carries no text dropped."""

from __future__ import annotations

import re
from typing import Final

_DROPPED: Final = ("script", "style", "noscript", "template", "svg", "canvas", "iframe")
_BLANK_RUNS: Final = re.compile(r"\n{3,}")


def html_to_markdown(html: str) -> str:
    """Markdown for `html`: the page's title first (as a heading), then its body."""
    # imported on first use: a fetch is rare, and the kernel starts faster without them
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup.find_all(_DROPPED):
        tag.decompose()
    if soup.head is not None:
        soup.head.decompose()
    body = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    body = _BLANK_RUNS.sub("\n\n", body).strip()
    return f"# {title}\n\n{body}" if title else body
