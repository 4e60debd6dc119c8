"""The ArangoDB graph backend: the lane (``lane.py`` declares it) and its store writer."""
