"""Path globs over a folder walk: what ingestion's allowlist (``[ingest] include`` / ``exclude``, ``fabric ingest
--include/--exclude``) and trust rules (``[ingest.trust] rules``) match against.

A glob matches the POSIX path of a file relative to the ingested folder (``decisions/2026-10-14-x.md``), case
sensitive: ``*`` and ``?`` stay within one folder name, ``[abc]`` is a character class, and a ``**`` segment spans
any number of folders (none included: ``**/x.md`` matches ``x.md`` too). A glob that matches one of the file's
folders covers everything under it, so a plain path works as well: ``decisions`` admits ``decisions/a.md``, exactly
as ``decisions/**`` does. Globs are relative: an absolute path, a ``..`` segment or an empty glob is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["PathGlob"]


def _segment(seg: str, glob: str) -> str:
    """The regex of one folder or file name of ``glob``."""
    out, i = [], 0
    while i < len(seg):
        ch = seg[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = seg.find("]", i + 2 if seg[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end < 0:
                raise ValueError(f"{glob!r}: unclosed '[' (a character class needs its ']')")
            body = seg[i + 1 : end].replace("\\", "\\\\")
            out.append(f"[^{body[1:]}]" if body.startswith("!") else f"[{body}]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _translate(glob: str) -> re.Pattern[str]:
    """The regex of ``glob`` (see the module docstring)."""
    parts = glob.split("/")
    out = []
    for n, seg in enumerate(parts):
        if seg == "**":
            out.append(".*" if n == len(parts) - 1 else "(?:[^/]+/)*")
            continue
        if "**" in seg:
            raise ValueError(f"{glob!r}: '**' must be a whole folder name (a/**/b), not part of one")
        out.append(_segment(seg, glob) + ("/" if n < len(parts) - 1 else ""))
    return re.compile("".join(out))


@dataclass(frozen=True, slots=True)
class PathGlob:
    """One compiled glob; :meth:`matches` a relative POSIX path.

    Raises:
        ValueError: an empty or absolute glob, a ``..`` segment, a misplaced ``**`` or an unclosed ``[``.
    """

    glob: str
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        text = self.glob.strip()
        while text.startswith("./"):
            text = text[2:]
        text = text.rstrip("/")
        if not text:
            raise ValueError(f"{self.glob!r}: an empty glob matches nothing")
        if text.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", text):
            raise ValueError(f"{self.glob!r}: globs are relative to the ingested folder, not absolute paths")
        if ".." in text.split("/"):
            raise ValueError(f"{self.glob!r}: '..' leaves the ingested folder")
        object.__setattr__(self, "_regex", _translate(text))

    def matches(self, rel: str) -> bool:
        """Whether ``rel`` (a relative POSIX path) or one of its folders matches."""
        parts = rel.split("/")
        return any(self._regex.fullmatch("/".join(parts[:n])) for n in range(len(parts), 0, -1))
