"""The shipped demo corpus (package data under ``corpus/``) used by ``fabric demo``."""

__all__: list[str] = []
