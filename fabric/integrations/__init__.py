"""Framework retrievers over the fabric (optional extras), each in-process or against a remote ``fabric serve``.

- :mod:`fabric.integrations.langchain`: ``FabricRetriever``, a LangChain ``BaseRetriever``
  (``pip install 'retrieval-fabric[langchain]'``);
- :mod:`fabric.integrations.llamaindex`: ``FabricRetriever``, a LlamaIndex ``BaseRetriever``
  (``[llamaindex]``);
- :mod:`fabric.integrations.haystack`: ``FabricRetriever``, a Haystack 2 ``@component`` (``[haystack]``).

They share :class:`~fabric.integrations.source.FabricSource` (engine or HTTP client, blocking or async). This
package imports no framework: each module imports its own when it is imported.

Floor: imports :mod:`fabric.client` and the query floor; never serve or the CLI.
"""

__all__: list[str] = []
