"""feeds lanes."""

__all__: list[str] = []
