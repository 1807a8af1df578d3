"""A search query, parsed once where a find starts: every part of the find (the calibration
bound, the keyword list, the agreement re-ranking, each backend's primitives) reads these
fields and none of them reads the text again.

- `content`: the query's content words (`fts.content_terms`: function words dropped unless
  nothing else is left). An empty `content` means nothing is searchable.
- `phrases`: what the keyword leg ORs (`fts.phrases` of the content words): the words, adjacent
  ASCII pairs joined, dotted numbers written with and without their unit
  (`segment.number_variants`), the bigram phrases of Han-only runs.
- `slots`: the agreement slots the whole text names (`agreement.text_slots`): "off", "up" and
  "left" are function words to bm25 but name a value here, and so does the label "A" of "dock A".
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from robot_mcp_memory.search import agreement, fts
from robot_mcp_memory.search.agreement import Slots


@dataclass(frozen=True)
class Query:
    """One query's text and what it was parsed into (see the module docstring)."""

    text: str
    content: tuple[str, ...]
    phrases: tuple[str, ...]
    slots: Slots

    @classmethod
    def parse(cls, text: str) -> Query:
        """The query `text` parsed: a pure function of the text, remembered for the last
        `PARSED_CACHE` texts (a fleet's robots ask the same few instructions at mission start).
        Read-only: a parsed query is shared."""
        return _parse(text)

    @property
    def searchable(self) -> bool:
        """Whether the text holds a word to search for (else only a vector could find anything)."""
        return bool(self.content)


#: Texts whose parse `Query.parse` remembers.
PARSED_CACHE = 1024


@functools.lru_cache(maxsize=PARSED_CACHE)
def _parse(text: str) -> Query:
    content = tuple(fts.content_terms(text))
    phrases = tuple(fts.phrases(" ".join(content))) if content else ()
    return Query(text, content, phrases, agreement.text_slots(text))


__all__ = ["Query"]
