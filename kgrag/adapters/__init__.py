"""kgrag where users already work: agent hosts and retrieval frameworks.

Each adapter is one module behind its own extra, imported only when used:

- :mod:`.mcp`: ``kgrag serve --mcp``, the searches as Model Context Protocol tools
  (``pip install 'kgrag[mcp]'``);
- :mod:`.langchain`: ``KgragRetriever``, a LangChain ``BaseRetriever``
  (``pip install 'kgrag[langchain]'``);
- :mod:`.llamaindex`: ``KgragRetriever``, a LlamaIndex ``BaseRetriever``
  (``pip install 'kgrag[llamaindex]'``).

:mod:`.base` holds what the framework retrievers share: one search call and the
metadata a hit carries into a framework's document.
"""
