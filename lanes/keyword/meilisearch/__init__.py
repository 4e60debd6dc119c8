"""The Meilisearch keyword backend: the lane (``lane.py`` declares it) and its store writer."""
