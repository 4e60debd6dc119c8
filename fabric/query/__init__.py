"""Answering a query: validate, pre-flight, bind constraints, route, plan, execute the lanes under their
budgets (retries, fallbacks, penalties, bulkheads), fuse, page and cite.

:class:`fabric.query.engine.Engine` is the entry point. Imports the floors below it (core, settings, net,
embed), the lanes (through :mod:`lanes.registry` and :mod:`lanes.base`) and :mod:`fusion`; never ingest,
serve, eval or the CLI.
"""
