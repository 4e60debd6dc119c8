"""Tests of the store-writer helpers and the chunk contract."""
