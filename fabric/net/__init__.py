"""Outbound HTTP: one guarded aiohttp session, the allow-list checked at connect time, and the web lanes'
response cache. Imports :mod:`fabric.core` and :mod:`fabric.settings`.
"""
