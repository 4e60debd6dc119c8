"""Markets lanes (quotes)."""

__all__: list[str] = []
