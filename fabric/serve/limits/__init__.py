"""How much the service takes on: per-tenant rate and concurrency limits, the HTTP server's own limits, and
admission of searches (a bounded number running, a bounded queue, the rest shed fast).
"""
