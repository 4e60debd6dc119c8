"""Developer tooling kept out of the wheel: the HTTP fault proxy of the fault benchmarks and tests, the router's
label, tuning and evaluation code, and the offline fusion tuning. ``fabric router`` and ``fabric tune`` import it
lazily from a repository checkout (:mod:`fabric.cli.checkout`).
"""
