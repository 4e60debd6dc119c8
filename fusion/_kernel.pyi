from collections.abc import Callable, Mapping, Sequence
from typing import Any

def title_join(hits: Sequence[Any], t: float, groups: Any, title_key: Callable[[str], str]) -> int | None: ...
def collect_rows(
    lanes: Sequence[Sequence[Any]], lane_stages: Sequence[int]
) -> tuple[list[str], list[Any], list[int], list[int], list[list[int]], list[list[float]]] | None: ...
def build_items(
    rows: Sequence[int],
    lane_rows: Sequence[list[int]],
    lane_names: tuple[str, ...],
    components: tuple[str | None, ...],
    native: Sequence[list[float]],
    rrf: list[float],
    base: list[float],
    total: list[float],
    stage: list[int],
    hits: list[Any],
    factors: Sequence[tuple[str, list[float]]],
    lane_order: dict[int, list[int]],
    merged: dict[int, list[str]],
    item_type: type,
) -> list[Any] | None: ...
def merge_rows(
    rows: list[list[int]],
    native: list[list[float]],
    norm: list[list[float]],
    ids: list[str],
    hits: list[Any],
    stage: list[int],
    best: list[int],
    root: list[int],
    members: list[int],
) -> tuple[
    list[str],
    list[Any],
    list[int],
    list[int],
    dict[int, list[str]],
    dict[int, list[int]],
    list[list[int]],
    list[list[float]],
    list[list[float]],
]: ...
def rrf_sums(rows: list[list[int]], weights: list[float], n: int, k: int, lanes: Sequence[int]) -> list[float]: ...
def rank_rows(
    w_base: float,
    base: list[float],
    factors: Sequence[tuple[float, list[float]]],
    norm: float,
    stage: list[int],
    best: list[int],
    ids: list[str],
    stage_first: bool,
) -> tuple[list[float] | None, list[int]] | None: ...
def score_base(
    rows: list[list[int]],
    norm: list[list[float]],
    weights: list[float],
    n: int,
    lane_order: dict[int, list[int]],
    combmnz: bool,
    ceiling: float,
) -> list[float]: ...
def minmax(scores: Sequence[float]) -> list[float] | None: ...
def url_groups(hits: Sequence[Any], groups: Any, url_key: Callable[[str], str]) -> list[tuple[int, str]] | None: ...
def sig_groups(
    sigs: Sequence[int | None],
    hits: Sequence[Any],
    groups: Any,
    max_bits: int,
    limit: int,
    all_pairs: int,
    norm_text: Callable[[str], str],
) -> tuple[int, int, int] | None: ...
def domain_diversity(hits: Sequence[Any]) -> list[float]: ...
def recency(hits: Sequence[Any], edges: list[Any], scores: list[float]) -> list[float] | None: ...
def authority(
    hits: Sequence[Any],
    authority_of: Callable[[str], float],
    default: float,
    table: Mapping[str, Any],
    bonus: float,
) -> list[float]: ...
def quality(hits: Sequence[Any], good: float) -> list[float] | None: ...
def varies(column: Sequence[float]) -> bool: ...
def column(hits: Sequence[Any], name: str) -> list[Any]: ...
def simhash_ascii(texts: Sequence[str]) -> list[int | None] | None: ...
