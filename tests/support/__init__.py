"""Helpers shared by the test suites: loopback HTTP servers (:mod:`.http`), embedded-store fixtures
(:mod:`.embedded`), engine settings with fake lanes (:mod:`.settings`) and synthetic lane outcomes (:mod:`.hits`)."""
