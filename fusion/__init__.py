"""Pure, deterministic fusion: RRF and score fusion, boosts, ranking, dedup, cursors, citations.

No I/O, no clock, no randomness. Imports only :mod:`fabric.core.models`, :mod:`fabric.core.errors` and config types.
"""

__all__: list[str] = []
