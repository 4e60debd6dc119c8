"""LlamaIndex: :class:`FabricRetriever`, a ``llama_index.core`` ``BaseRetriever`` (``_retrieve`` and ``_aretrieve``).

Install with ``pip install 'retrieval-fabric[llamaindex]'``. Each result item becomes a ``NodeWithScore`` whose
score is ``score_total`` and whose ``TextNode`` (``id_`` = the item id) carries the score ledger, lanes and lane
status in its metadata; only ``title`` and ``url`` are shown to the LLM and the embedder::

    retriever = FabricRetriever.from_url("http://127.0.0.1:8080", limit=5)      # or .from_engine(engine)
    nodes = retriever.retrieve("deployment strategy")
    engine = RetrieverQueryEngine.from_args(retriever, llm=...)                 # as any retriever
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from fabric.client import SearchPage
from fabric.integrations.source import FabricSource, SourceConstructors, item_metadata, request_params

__all__ = ["FabricRetriever", "to_nodes"]

_SHOWN = ("title", "url")


def to_nodes(page: SearchPage) -> list[NodeWithScore]:
    """One ``NodeWithScore`` per item, in the fabric's order."""
    out = []
    for it in page.items:
        meta = item_metadata(it, page)
        hidden = [k for k in meta if k not in _SHOWN]
        node = TextNode(
            id_=it.id,
            text=it.text,
            metadata=meta,
            excluded_llm_metadata_keys=hidden,
            excluded_embed_metadata_keys=hidden,
        )
        out.append(NodeWithScore(node=node, score=it.score_total))
    return out


class FabricRetriever(SourceConstructors, BaseRetriever):
    """Federated hybrid retrieval as a LlamaIndex retriever (see the module docstring).

    Args:
        source: the engine or service answering.
        limit: nodes per query (the API's ``limit`` / ``top_k``).
        weights: per-request lane weights, e.g. ``{"semantic": 2.0}``.
        fusion: fusion mode override (``rrf``, ``append_fill``, ``score_minmax``, ``score_dbsf``, ``score_zscore``).
        mode: query mode (``simple``, ``technical``, ``research``, ``multimedia``).
        lanes: restrict to these lanes.
        callback_manager: LlamaIndex callbacks.
    """

    def __init__(
        self,
        source: FabricSource,
        *,
        limit: int = 10,
        weights: Mapping[str, float] | None = None,
        fusion: str | None = None,
        mode: str | None = None,
        lanes: Sequence[str] | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager)
        self.source = source
        self.params = request_params(limit=limit, weights=weights, fusion=fusion, mode=mode, lanes=lanes)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return to_nodes(self.source.search(query_bundle.query_str, **self.params))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return to_nodes(await self.source.asearch(query_bundle.query_str, **self.params))
