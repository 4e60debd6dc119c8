"""Sentence splitting for citation alignment, in one pass over the text (linear time, no I/O, no models).

The text is read as whitespace-separated tokens, each looked at once with its successor:

- ``!`` or ``?`` (possibly with more ``.!?`` and closing quotes or brackets after it) before whitespace ends a
  sentence;
- a single ``.`` does too, except after a title or a reference word that never ends one (``Dr.``, ``Prof.``,
  ``Fig.``, ``No.``, ``e.g.``, ``vs.``, ...: :data:`_NEVER_FINAL`), after an initial (``J. R. R. Tolkien``), and
  after a list number opening a line (``1. First item``); after an abbreviation that may end a sentence (``etc.``,
  ``et al.``, ``p.m.``, ``U.S.``, a lower-case letter, a month: :data:`_MAYBE_FINAL`), and after an ellipsis
  (``...``, ``…``), the sentence ends only when the next word starts with a capital letter or a digit;
- a period inside a token never ends a sentence (``2.5``, ``example.com``, ``U.S.A`` before more text);
- a line break ends a sentence at a blank line, after a line that opens with a block marker (a heading ``#``, a
  list item ``-``, ``*``, ``+``, ``1.``, a quote ``>``, a table row ``|``, a fence), and before such a line; a
  line break inside running text (hard-wrapped prose) does not;
- a sentence longer than :data:`MAX_SENTENCE_CHARS` is cut at the last whitespace before the limit (a token longer
  than the limit is cut at the limit), which bounds the work of comparing any one sentence with any one passage.

Sentences are slices of the text (inner whitespace kept), never empty. Every step is a string method over one
token or the whitespace after it, so the time taken grows linearly with the text: the previous splitter (pysbd)
took quadratic time, and cubic on some inputs (``"a) b) c) "`` repeated), where one request could hold a core
for minutes.
"""

from __future__ import annotations

import re

__all__ = ["MAX_SENTENCE_CHARS", "split_sentences"]

MAX_SENTENCE_CHARS = 1_000
"""The longest sentence :func:`split_sentences` returns, in characters."""

_TOKEN = re.compile(r"\S+")
_CLOSERS = "\"'”’)]»"
_OPENERS = "\"'“‘([«"
_TERMINALS = ".!?…"

_NEVER_FINAL = frozenset(
    ["mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "rev", "hon", "gen", "col", "capt", "lt", "sgt", "gov", "sen",
     "rep", "pres", "mt", "fig", "figs", "eq", "eqs", "no", "nos", "vol", "vols", "p", "pp", "ch", "sec", "art", "ref",
     "refs", "dept", "approx", "ca", "cf", "vs", "viz", "e.g", "i.e"]
)  # fmt: skip
"""Words whose period never ends a sentence: titles and references that a name or number follows."""

_MAYBE_FINAL = frozenset(
    ["etc", "al", "inc", "ltd", "co", "corp", "bros", "esp", "ft", "min", "max", "jan", "feb", "mar", "apr", "jun",
     "jul", "aug", "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "e.u", "u.n"]
)  # fmt: skip
"""Abbreviations that end a sentence only before a capital letter."""

_BLOCK_STARTS = ("#", ">", "|", "```", "~~~")


def _capital(token: str | None) -> bool:
    """Whether ``token`` starts (after opening quotes or brackets) with a capital letter."""
    if token is None:
        return True
    head = token.lstrip(_OPENERS)
    return bool(head) and head[0].isupper()


def _list_number(token: str) -> bool:
    return 2 <= len(token) <= 4 and token[-1] in ".)" and token[:-1].isdigit()


def _block_marker(token: str) -> bool:
    """Whether a line opening with ``token`` is a block of its own (heading, list item, quote, table, fence)."""
    return token in ("-", "*", "+", "•") or token.startswith(_BLOCK_STARTS) or _list_number(token)


def _initials(word: str) -> bool:
    """One or more capital letters each followed by a period inside the word: ``J``, ``C.F`` (``C.F. Smith``)."""
    return all(len(p) == 1 and p.isupper() for p in word.split("."))


def _abbreviation(word: str) -> bool:
    """An abbreviation that may end a sentence: a listed one, one letter, or dotted letters (``p.m``, ``a.k.a``)."""
    if len(word) == 1 and word.isalpha():
        return True
    parts = word.split(".")
    return len(parts) > 1 and all(0 < len(p) <= 3 and p.isalpha() for p in parts)


def _ends_sentence(token: str, following: str | None, *, opens: bool) -> bool:
    """Whether the sentence ends with ``token`` (see the module docstring); ``following`` is the next token,
    ``opens``: the token opens a line or a sentence."""
    body = token.rstrip(_CLOSERS)
    if not body or body[-1] not in _TERMINALS:
        return False
    core = body.rstrip(_TERMINALS)
    run = body[len(core) :]
    if "!" in run or "?" in run:
        return True
    if run != ".":  # an ellipsis: the sentence goes on unless a capital follows
        return _capital(following)
    word = core.lstrip(_OPENERS)
    if word.lower() in _MAYBE_FINAL:
        return _capital(following)
    if word.lower() in _NEVER_FINAL or _initials(word) or (opens and _list_number(token)):
        return False
    return _capital(following) if _abbreviation(word) else True


def _spans(text: str) -> list[tuple[int, int]]:
    """Token spans, a token longer than :data:`MAX_SENTENCE_CHARS` cut into pieces of that length."""
    out: list[tuple[int, int]] = []
    for m in _TOKEN.finditer(text):
        a, b = m.span()
        while b - a > MAX_SENTENCE_CHARS:
            out.append((a, a + MAX_SENTENCE_CHARS))
            a += MAX_SENTENCE_CHARS
        out.append((a, b))
    return out


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (see the module docstring); empty or blank text has none."""
    spans = _spans(text)
    sentences: list[str] = []
    first = 0  # the index of the current sentence's first token
    block_line = False  # the current line opens with a block marker
    for i, (a, b) in enumerate(spans):
        opens_line = i == 0 or "\n" in text[spans[i - 1][1] : a]
        token = text[a:b]
        if opens_line:
            block_line = _block_marker(token)
        if first < i and b - spans[first][0] > MAX_SENTENCE_CHARS:  # too long: cut before this token
            sentences.append(text[spans[first][0] : spans[i - 1][1]])
            first = i
        if i + 1 == len(spans):
            end = True
        else:
            c, d = spans[i + 1]
            gap, following = text[b:c], text[c:d]
            breaks = gap.count("\n")
            end = (breaks > 1 or (breaks == 1 and (block_line or _block_marker(following)))) or _ends_sentence(
                token, following, opens=opens_line or first == i
            )
        if end:
            sentences.append(text[spans[first][0] : b])
            first = i + 1
    return sentences
