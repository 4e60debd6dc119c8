"""Lane adapters: one module per backend under a kind folder, all behind :class:`lanes.base.Lane`."""

__all__: list[str] = []
