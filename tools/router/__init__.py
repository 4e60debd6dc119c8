"""Offline work on the query router: oracle label files, threshold replays and quality-against-cost reports."""
