"""web lanes."""

__all__: list[str] = []
