"""Entity and relation extraction shared by the graph backends (a helper, never a backend): the extractor, the
relation rules, the process pool of large ingests and a chunk's graph.
"""
