"""Embedders: MiniLM in process (OpenVINO, ONNX Runtime or torch), a remote OpenAI-compatible endpoint, and
the content-hash cache in front of them. Imports :mod:`fabric.core`, :mod:`fabric.settings` and :mod:`fabric.net`.
"""
