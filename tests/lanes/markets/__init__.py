"""Tests of the markets lanes."""
