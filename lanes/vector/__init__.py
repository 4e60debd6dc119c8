"""vector lanes."""

__all__: list[str] = []
