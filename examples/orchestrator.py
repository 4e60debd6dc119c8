"""An asyncio orchestrator over one knowledge base: ingest while concurrent searches run, then page and explain.

Run it from anywhere (``python examples/orchestrator.py [HOME]``); the home defaults to a temporary folder. It
ingests the demo notes shipped with the package, then fans out searches with ``asyncio.gather`` while a second
ingest of fresh entries runs beside them, and prints each answer's first item with its score ledger.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from importlib.resources import files
from pathlib import Path

import fabric

QUESTIONS = (
    "Reciprocal Rank Fusion",
    "what happens when the embedding model is down",
    "how long are receipts kept",
    "which lane answers graph questions",
)
FRESH = [
    {"id": "ops-1", "title": "On-call rotation", "text": "The on-call engineer rotates every Monday at 09:00 UTC."},
    {"id": "ops-2", "title": "Incident review", "text": "Every incident gets a written review within five days."},
]


async def main(home: Path) -> None:
    async with fabric.open(home=home) as kb:
        report = await kb.ingest(Path(str(files("fabric.demo").joinpath("corpus"))))
        print(f"ingested {report.docs} notes into {home}")
        searches = [kb.search(q, top_k=3) for q in QUESTIONS]
        *answers, fresh = await asyncio.gather(*searches, kb.ingest(FRESH))
        for question, answer in zip(QUESTIONS, answers, strict=True):
            top = answer.items[0]
            print(f"{question!r}: {answer.total} found; first {top.title!r} total={top.score_total:.3f} "
                  f"lexical={top.score_lexical:.3f} semantic={top.score_semantic:.3f}")  # fmt: skip
        print(f"meanwhile ingested {fresh.docs} fresh entries")
        rota = await kb.search("who is on call", top_k=1)
        print(f"'who is on call': {rota.items[0].id}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="kb-"))))
