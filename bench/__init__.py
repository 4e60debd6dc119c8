"""Benchmarks behind ``fabric bench NAME``: one module per benchmark exposing ``add_arguments(parser)``
and ``run(args) -> dict`` (the ``--json`` payload). Figures are medians and same-run ratios, never
wall-clock assertions in tests.
"""

__all__ = ["BENCHES"]

BENCHES = (
    "budget", "fusion", "fusion_digest", "load", "adapters", "ingest_http", "instructions", "mcp", "tenants", "scale",
    "vector_stores", "faults", "encoder",
)  # fmt: skip
"""Benchmark module names under :mod:`bench`."""
