"""English function words left out of keyword queries (articles, pronouns, auxiliaries, prepositions, ...).

Natural-language questions ("What problems are there in making up descriptive titles?") fill an OR query with
words that match most of the corpus: they add nothing to BM25 (their IDF is near zero) but make FTS5 score
almost every row. The list holds only function words, no topic words, so it does not fit any one collection;
it was measured on SciFact and CISI (docs/eval.md). Direction particles (up, down, out, off, over, under, above,
below) stay searchable: "the service is down" is about an outage. A query made only of stopwords keeps its words.
"""

from __future__ import annotations

__all__ = ["ENGLISH_STOPWORDS"]

_WORDS = """
a about after again against all almost also although am among an and another any anyone anything are around as
at be because been before being between both but by can cannot could did do does doing done during each either
else etc even ever every few for from further had has have having he her here hers herself him himself his how
however i if in into is it its itself just least less let like many may me might more most much must my myself
neither no nor not now of often on once one only or other others otherwise our ours ourselves own per perhaps
please quite rather same shall she should since so some something somewhat still such than that the their theirs
them themselves then there thereby therefore these they this those though through thus to too toward towards
until upon us very via was we well were what whatever when whenever where whereas whether which while who whom
whose why will with within without would yet you your yours yourself yourselves
"""

ENGLISH_STOPWORDS: frozenset[str] = frozenset(_WORDS.split())
"""Lower-case English function words (177)."""
