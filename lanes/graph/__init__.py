"""graph lanes."""

__all__: list[str] = []
