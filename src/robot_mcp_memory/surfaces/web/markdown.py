"""A small, safe markdown renderer for process documents shown in the dashboard.

Safety comes first and by construction: every piece of source text passes through
`html.escape` before any markup is added, and the only markup added is a fixed set of tags with
no attributes — except links, which are limited to ``http(s)://`` targets and carry
``rel="noopener noreferrer nofollow"``. Raw HTML in a document is therefore shown as text: a
stored ``<script>`` renders as ``&lt;script&gt;``. (The dashboard's Content-Security-Policy
forbids inline scripts as a second line of defence.)

Supported: ATX headings, paragraphs, ``-``/``*``/``+`` and numbered lists (one level), fenced
code blocks, ``>`` quotes, ``---`` rules, inline code, ``**bold**``, ``*em*``/``_em_`` and
``[text](https://…)`` links. Anything else is plain text, which is what process documents mostly are.
"""

from __future__ import annotations

import html
import re

# The closing ``#`` run is stripped in Python (`_heading_text`): a lazy ``(.*?)\s*#*\s*$`` tried
# every split of a run of spaces three ways, cubic in its length.
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s*\d{1,9}[.)]\s+(.*)$")
_RULE = re.compile(r"^\s*(?:-{3,}|\*{3,}|_{3,})\s*$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
# Linear time: a span cannot hold its own closing marker, so from each opening marker the engine
# scans only to the next one (with ``.+?`` it scanned to the end of the line from every opening:
# quadratic in a line of repeated openings, tests/surfaces/web/test_markdown_linear.py).
_BOLD = re.compile(r"\*\*(?=\S)((?:[^*]|\*(?!\*))+?)(?<=\S)\*\*")
_EM_STAR = re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])")
# An underscore inside a word (snake_case) neither opens nor closes: the scan from an opening still
# stops at the next underscore that could close, so it stays linear.
_EM_UNDERSCORE = re.compile(r"(?<![\w_])_(?=\S)((?:[^_]|(?<=\w)_(?=\w))+?)(?<=\S)_(?![\w_])")
# Linear time: the label holds no bracket and the target no parenthesis, so the scans from two
# openings never cover the same text (a label that could hold '[' was scanned again, up to 500
# characters, from every '[' of a line of them).
_LINK = re.compile(r"\[([^\[\]\n]{1,500})\]\((https?://[^\s()<>\"']{1,2000})\)")


def escape(text: str) -> str:
    return html.escape(text, quote=True)


def inline(text: str) -> str:
    """One line of inline markdown → safe HTML."""
    out: list[str] = []
    parts = text.split("`")
    for i, part in enumerate(parts):
        if i % 2 == 1 and i < len(parts) - 1:
            out.append(f"<code>{escape(part)}</code>")
            continue
        if i % 2 == 1:  # an unmatched backtick: keep it as text
            part = "`" + part
        out.append(_spans(part))
    return "".join(out)


def _spans(raw: str) -> str:
    links: list[str] = []

    def keep_link(m: re.Match[str]) -> str:
        label, url = m.group(1), m.group(2)
        links.append(f'<a href="{escape(url)}" rel="noopener noreferrer nofollow">{escape(label)}</a>')
        return f"\x00{len(links) - 1}\x00"

    text = escape(_LINK.sub(keep_link, raw.replace("\x00", "")))
    text = _BOLD.sub(r"<strong>\1</strong>", text)
    text = _EM_STAR.sub(r"<em>\1</em>", text)  # *max_force* keeps its underscore
    text = _EM_UNDERSCORE.sub(r"<em>\1</em>", text)
    return re.sub(r"\x00(\d+)\x00", lambda m: links[int(m.group(1))], text)


def _heading_text(text: str) -> str:
    """A heading's text without its optional closing run of ``#`` and the blanks around it."""
    return text.rstrip().rstrip("#").rstrip()


def render(markdown: str) -> str:
    """A markdown body → safe HTML."""
    lines = markdown.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    list_tag = ""
    quote: list[str] = []

    def flush() -> None:
        nonlocal list_tag
        if para:
            out.append("<p>" + "<br>".join(inline(x.strip()) for x in para) + "</p>")
            para.clear()
        if items:
            out.append(f"<{list_tag}>" + "".join(f"<li>{x}</li>" for x in items) + f"</{list_tag}>")
            items.clear()
            list_tag = ""
        if quote:
            out.append("<blockquote>" + "<br>".join(inline(x) for x in quote) + "</blockquote>")
            quote.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            marker = fence.group(1)
            code: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                code.append(lines[i])
                i += 1
            out.append("<pre><code>" + escape("\n".join(code)) + "</code></pre>")
            i += 1
            continue
        i += 1
        if not line.strip():
            flush()
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            out.append(f"<h{level}>{inline(_heading_text(heading.group(2)))}</h{level}>")
            continue
        if _RULE.match(line):
            flush()
            out.append("<hr>")
            continue
        bullet, numbered = _BULLET.match(line), _NUMBERED.match(line)
        if bullet or numbered:
            tag = "ul" if bullet else "ol"
            if para or quote or (items and list_tag != tag):
                flush()
            list_tag = tag
            items.append(inline((bullet or numbered).group(1)))  # type: ignore[union-attr] # one of them matched
            continue
        if line.lstrip().startswith(">"):
            if para or items:
                flush()
            quote.append(line.lstrip()[1:].strip())
            continue
        if items and line.startswith((" ", "\t")):
            items[-1] += " " + inline(line.strip())  # a continuation of the last list item
            continue
        if items or quote:
            flush()
        para.append(line)
    flush()
    return "\n".join(out)
