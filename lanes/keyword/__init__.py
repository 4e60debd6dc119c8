"""keyword lanes."""

__all__: list[str] = []
