"""LangChain: :class:`FabricRetriever`, a ``langchain_core`` ``BaseRetriever`` (sync ``invoke``, async ``ainvoke``).

Install with ``pip install 'retrieval-fabric[langchain]'``. Each result item becomes a ``Document`` whose
``page_content`` is the passage and whose ``metadata`` carries the id, the score ledger (``score_total``,
``score_lexical``, ``score_semantic``, ``score_graph``, every contribution and raw score), the lanes that found it,
its rank per lane and every lane's status::

    retriever = FabricRetriever.from_url("http://127.0.0.1:8080", limit=5)      # or .from_engine(engine)
    docs = retriever.invoke("deployment strategy")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from fabric.client import SearchPage
from fabric.integrations.source import FabricSource, SourceConstructors, item_metadata, request_params

__all__ = ["FabricRetriever", "to_documents"]


def to_documents(page: SearchPage) -> list[Document]:
    """One ``Document`` per item, in the fabric's order (``id`` set to the item id)."""
    return [Document(id=it.id, page_content=it.text, metadata=item_metadata(it, page)) for it in page.items]


class FabricRetriever(SourceConstructors, BaseRetriever):
    """Federated hybrid retrieval as a LangChain retriever (see the module docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    source: FabricSource
    """The engine or service answering (:class:`~fabric.integrations.source.FabricSource`)."""
    limit: int = 10
    """Documents per query (the API's ``limit`` / ``top_k``)."""
    weights: dict[str, float] | None = None
    """Per-request lane weights, e.g. ``{"semantic": 2.0}``."""
    fusion: str | None = None
    """Fusion mode override: ``rrf``, ``append_fill``, ``score_minmax``, ``score_dbsf`` or ``score_zscore``."""
    mode: str | None = None
    """Query mode (per-lane budgets): ``simple``, ``technical``, ``research``, ``multimedia``."""
    lanes: list[str] | None = None
    """Restrict to these lanes."""

    def _params(self) -> dict[str, Any]:
        weights: Mapping[str, float] | None = self.weights
        lanes: Sequence[str] | None = self.lanes
        return request_params(limit=self.limit, weights=weights, fusion=self.fusion, mode=self.mode, lanes=lanes)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return to_documents(self.source.search(query, **self._params()))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return to_documents(await self.source.asearch(query, **self._params()))
