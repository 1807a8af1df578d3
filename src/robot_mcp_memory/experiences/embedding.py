"""The embedder-facing half of `MemoryVectors`, the same for every storage adapter.

Both vector adapters (SQLite, PostgreSQL) hold an optional `ResilientEmbedder`; what they say
about embedding does not depend on where the vectors live, so it is written once here.
Invariant: with no embedder (or one that is off or down) every method answers None, never raises.
"""

from __future__ import annotations

from collections.abc import Sequence

from robot_mcp_memory.experiences.ports import Embedded
from robot_mcp_memory.search.resilient import Offload, ResilientEmbedder


class EmbedsWith:
    """Mixin for a vector adapter whose `embedder` attribute is its (optional) embedder."""

    embedder: ResilientEmbedder | None

    def would_embed(self) -> bool:
        emb = self.embedder
        return emb is not None and emb.would_embed()

    def embed(self, texts: Sequence[str]) -> list[Embedded | None]:
        """One (model id, vector) per text, or None each when the embedder is off or down."""
        emb = self.embedder
        out = emb.embed(list(texts)) if emb is not None and texts else None
        model_id = emb.model_id if emb is not None else None
        if out is None or model_id is None:
            return [None] * len(texts)
        return [(model_id, out[i]) for i in range(len(texts))]

    async def query_vector(self, text: str, offload: Offload) -> Embedded | None:
        emb = self.embedder
        return None if emb is None else await emb.query_vector(text, offload)
