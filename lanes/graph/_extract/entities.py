"""Entity extraction and normalisation for the embedded graph (the router policy, simplified GraphRAG).

:class:`EntityExtractor` is the plug-in point: anything with ``extract(text) -> Extraction`` (a REBEL or GLiNER
wrapper, say) can replace :class:`RuleExtractor`, the default that needs no model and no network:

- capitalised spans (``Qdrant Local Mode``, ``Reciprocal Rank Fusion``), skipping sentence-initial stopwords;
- acronyms and identifiers: ``RRF``, ``IL-6``, ``p53``, ``E1042``, commit SHAs, paths like ``lanes/base.py``;
- noun-phrase-ish bigrams: consecutive content words (no stopword, ≥ 3 letters) inside a run of content words;
- relations: entities co-occurring in a sentence, predicate ``co_occurs``: each entity with its next two
  neighbours, and every pair of named entities (capitalised spans, identifiers) of the sentence; plus directed
  semantic edges ``Entity --predicate--> Entity`` from verb patterns between neighbouring entities
  (:mod:`lanes.graph._extract.relations`: ``Vitamin D reduces fracture risk`` → ``(vitamin d, reduce, fracture risk)``).

Normalisation is applied identically to chunk and query entities: lowercase, ``.``/``'`` removed, other
punctuation to spaces, whitespace collapsed, then the alias table (``{"u.s.": "united states", ...}``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from lanes.graph._extract.relations import verb_triples

__all__ = ["STOPWORDS", "EntityExtractor", "Extraction", "RuleExtractor", "normalize_entity", "query_ngrams"]

_STOP_TEXT = """
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having he
her here hers him his how i if in into is it its itself just may me might more most must my no nor not now
of off on once only or other our out over own same she should so some such than that the their them then
there these they this those through to too under until up upon very via was we were what when where which
while who whom why will with within without would you your yet however therefore thus whether using used use
show shows shown showed between among across per versus vs one two three new
"""
STOPWORDS = frozenset(_STOP_TEXT.split())
"""Words never taken as entities or entity edges."""

_SENT = re.compile(r"(?<=[.!?])\s+|\n+")
_CAPS = re.compile(r"\b[A-Z][\w-]*(?:\s+(?:of|the|for|de|la)\s+[A-Z][\w-]*|\s+[A-Z][\w-]*)*")
_IDENT = re.compile(
    r"(?<![\w/])(?:(?:[A-Z]\.){2,}"  # dotted acronyms: U.S.
    r"|[A-Z]{2,}[A-Za-z0-9]*(?:-[A-Za-z0-9]+)*"  # acronyms: RRF, BM25, IL-6
    r"|[A-Za-z]+-?\d+[A-Za-z0-9]*"  # p53, E1042, ingest2
    r"|[0-9a-f]{7,40}(?=\b)"  # commit SHAs
    r"|[\w.-]+/[\w./-]*\w)"  # paths
)
_WORD = re.compile(r"[A-Za-z][A-Za-z-]*[A-Za-z]")
_NORM_CACHE = 1 << 18
"""Labels whose normalised name an extractor remembers (a corpus repeats its bigrams and names)."""


def normalize_entity(text: str, aliases: Mapping[str, str] | None = None) -> str:
    """The router policy normalisation: lowercase, strip punctuation, collapse whitespace, then the alias table."""
    low = " ".join(text.lower().split())
    if aliases and low in aliases:
        return aliases[low]
    norm = re.sub(r"[.'’]", "", low)
    norm = " ".join(re.sub(r"[^\w]+", " ", norm).split())
    if aliases:
        norm = aliases.get(norm, norm)
    return norm


def query_ngrams(text: str, max_n: int = 3) -> list[str]:
    """Normalised 1..max_n-grams of ``text`` (unigrams that are stopwords left out), for entity lookup."""
    words = normalize_entity(text).split()
    out: list[str] = []
    for n in range(1, max_n + 1):
        for i in range(len(words) - n + 1):
            gram = words[i : i + n]
            if n == 1 and (gram[0] in STOPWORDS or len(gram[0]) < 2):
                continue
            if gram[0] in STOPWORDS or gram[-1] in STOPWORDS:
                continue
            out.append(" ".join(gram))
    return list(dict.fromkeys(out))


@dataclass(frozen=True, slots=True)
class Extraction:
    """Entities (``normalised → surface label``) and ``(subject, predicate, object)`` triples of normalised names."""

    entities: dict[str, str] = field(default_factory=dict)
    relations: list[tuple[str, str, str]] = field(default_factory=list)


class EntityExtractor(Protocol):
    """Extracts entities and relations from a text; implementations must be deterministic and thread-safe."""

    def extract(self, text: str) -> Extraction:
        """Entities and triples of ``text``, normalised with the extractor's alias table."""
        ...


class RuleExtractor:
    """The default rule-based extractor (see the module docstring)."""

    def __init__(self, aliases: Mapping[str, str] | None = None, *, max_entities: int = 64) -> None:
        self.aliases = {normalize_entity(k): normalize_entity(v) for k, v in (aliases or {}).items()}
        self.aliases.update({" ".join(k.lower().split()): normalize_entity(v) for k, v in (aliases or {}).items()})
        self.max_entities = max_entities
        self._norms: dict[str, str] = {}  # label → normalised name, with this extractor's alias table

    def _sentence_entities(self, sentence: str) -> list[tuple[str, str, bool, int, int]]:
        """(normalised, label, strong, start, end) in sentence order; strong = capitalised span or identifier."""
        found: list[tuple[int, str, bool, int]] = []
        for cm in _CAPS.finditer(sentence):
            words = cm.group(0).split()
            while words and words[0].lower() in STOPWORDS:
                words = words[1:]
            if words and (len(words) > 1 or cm.start() > 0 or len(words[0]) > 3):
                found.append((cm.start(), " ".join(words), True, cm.end()))
        found += [(im.start(), im.group(0), True, im.end()) for im in _IDENT.finditer(sentence)]
        found += self._bigrams(sentence)
        out: list[tuple[str, str, bool, int, int]] = []
        norms = self._norms
        for start, label, strong, end in sorted(found):
            norm = norms.get(label)
            if norm is None:
                if len(norms) >= _NORM_CACHE:
                    norms.clear()
                norm = norms[label] = normalize_entity(label, self.aliases)
            if len(norm) >= 2 and norm not in STOPWORDS:
                out.append((norm, label, strong, start, end))
        return out

    @staticmethod
    def _bigrams(sentence: str) -> list[tuple[int, str, bool, int]]:
        """Consecutive content words (lowercase-initial, no stopword, ≥ 3 letters) of ``sentence`` as
        ``(start, "w1 w2", False, end)``; capitalised words belong to capitalised spans, so they break a run."""
        out: list[tuple[int, str, bool, int]] = []
        prev: tuple[int, str] | None = None
        for m in _WORD.finditer(sentence):
            text = m.group()
            word = text.lower()
            if text[0].islower() and word not in STOPWORDS and len(word) >= 3:
                start = m.start()
                if prev is not None:
                    out.append((prev[0], f"{prev[1]} {word}", False, start + len(word)))
                prev = (start, word)
            else:
                prev = None
        return out

    def extract(self, text: str) -> Extraction:
        """Entities, co-occurrence triples and verb-pattern triples of ``text``."""
        entities: dict[str, str] = {}
        relations: dict[tuple[str, str, str], None] = {}
        for sentence in _SENT.split(text):
            found = self._sentence_entities(sentence)
            ents = list(dict.fromkeys(n for n, _, _, _, _ in found))
            strong = list(dict.fromkeys(n for n, _, s, _, _ in found if s))[:8]
            for norm, label, _, _, _ in found:
                entities.setdefault(norm, label)
            for triple in verb_triples(sentence, [(a, b, n) for n, _, _, a, b in found]):
                relations[triple] = None
            for i, subj in enumerate(ents):  # each entity with its next two neighbours
                for obj in ents[i + 1 : i + 3]:
                    relations[(subj, "co_occurs", obj)] = None
            for i, subj in enumerate(strong):  # named entities of a sentence are all linked
                for obj in strong[i + 1 :]:
                    relations[(subj, "co_occurs", obj)] = None
            if len(entities) >= self.max_entities:
                break
        keep = dict(list(entities.items())[: self.max_entities])
        rels = [r for r in relations if r[0] in keep and r[2] in keep]
        return Extraction(entities=keep, relations=rels)
