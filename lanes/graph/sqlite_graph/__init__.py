"""The embedded graph backend: entities and relations in SQLite tables (``lane.py`` declares it), the writer,
its bulk path and extraction process, the neighbourhood cache and the ranking SQL.
"""
