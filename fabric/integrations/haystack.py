"""Haystack 2: :class:`FabricRetriever`, a ``@component`` with ``run`` and ``run_async`` returning ``documents``.

Install with ``pip install 'retrieval-fabric[haystack]'``. Each result item becomes a ``Document`` (``id`` = the
item id, ``score`` = ``score_total``) whose ``meta`` carries the score ledger, lanes and lane status; it drops into
a pipeline where a BM25 or embedding retriever would go::

    pipeline = Pipeline()
    pipeline.add_component("retriever", FabricRetriever.from_url("http://127.0.0.1:8080", top_k=5))
    pipeline.add_component("prompt", PromptBuilder(template=...))
    pipeline.connect("retriever.documents", "prompt.documents")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from fabric.client import SearchPage
from fabric.integrations.source import FabricSource, SourceConstructors, item_metadata, request_params

__all__ = ["FabricRetriever", "to_documents"]


def to_documents(page: SearchPage) -> list[Document]:
    """One ``Document`` per item, in the fabric's order."""
    return [
        Document(id=it.id, content=it.text, meta=item_metadata(it, page), score=it.score_total) for it in page.items
    ]


@component
class FabricRetriever(SourceConstructors):
    """Federated hybrid retrieval as a Haystack component (see the module docstring).

    Args:
        source: the engine or service answering.
        top_k: documents per query (the API's ``top_k`` / ``limit``); ``run`` may override it.
        weights: per-request lane weights, e.g. ``{"semantic": 2.0}``; ``run`` may override them.
        fusion: fusion mode override (``rrf``, ``append_fill``, ``score_minmax``, ``score_dbsf``, ``score_zscore``).
        mode: query mode (``simple``, ``technical``, ``research``, ``multimedia``).
        lanes: restrict to these lanes.
    """

    def __init__(
        self,
        source: FabricSource,
        *,
        top_k: int = 10,
        weights: Mapping[str, float] | None = None,
        fusion: str | None = None,
        mode: str | None = None,
        lanes: Sequence[str] | None = None,
    ) -> None:
        self.source = source
        self.top_k = top_k
        self.weights = dict(weights) if weights is not None else None
        self.fusion, self.mode = fusion, mode
        self.lanes = list(lanes) if lanes is not None else None

    def to_dict(self) -> dict[str, Any]:
        """Haystack's serialisation (``Pipeline.dumps``): the source as :meth:`FabricSource.to_dict` describes it
        (never an API key: a loaded pipeline reads it from ``FABRIC_API_KEY``), and the defaults."""
        return default_to_dict(
            self, source=self.source.to_dict(), top_k=self.top_k, weights=self.weights, fusion=self.fusion,
            mode=self.mode, lanes=self.lanes,
        )  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FabricRetriever:
        """The component :meth:`to_dict` describes (``Pipeline.loads``)."""
        params = dict(data.get("init_parameters", {}))
        params["source"] = FabricSource.from_dict(params["source"])
        return default_from_dict(cls, {**data, "init_parameters": params})

    def _params(self, top_k: int | None, weights: Mapping[str, float] | None) -> dict[str, Any]:
        return request_params(
            limit=top_k if top_k is not None else self.top_k,
            weights=weights if weights is not None else self.weights,
            fusion=self.fusion,
            mode=self.mode,
            lanes=self.lanes,
        )

    @component.output_types(documents=list[Document])
    def run(
        self, query: str, top_k: int | None = None, weights: dict[str, float] | None = None
    ) -> dict[str, list[Document]]:
        """Retrieve the documents for ``query``."""
        return {"documents": to_documents(self.source.search(query, **self._params(top_k, weights)))}

    @component.output_types(documents=list[Document])
    async def run_async(
        self, query: str, top_k: int | None = None, weights: dict[str, float] | None = None
    ) -> dict[str, list[Document]]:
        """Retrieve the documents for ``query`` (async pipelines)."""
        return {"documents": to_documents(await self.source.asearch(query, **self._params(top_k, weights)))}
