"""The RCP/1 tool methods beside ``retrieve`` and ``graph``: ``embed`` (§7.3),
``rerank`` (§7.6), ``query/transform`` (§7.8), ``memory/build`` and
``memory/recall`` (§7.17).

Each is a plain function over one :class:`~kgrag.retrieval.pipeline.Retriever`:
the method's params object in, its result object out, errors from
:mod:`kgrag.errors` (plus :class:`TooLarge`, -32013, for a batch above a limit).
Unknown fields, ``_meta`` among them, are ignored (§4.6). A text Content block
is the same as its bare string; any other block is -32005 ``modality``.

The memory is the graph itself (HippoRAG): ``memory/build`` names the live
index and adds nothing; ``memory/recall`` returns the entities and facts the
local search links a query to, the entry points of its personalized PageRank.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.errors import InvalidParams, NotFound, PayloadTooLarge, Unsupported
from kgrag.rcp.params import (
    EmbedParams,
    MemoryBuildParams,
    MemoryRecallParams,
    RerankParams,
    TransformParams,
    validate,
)
from kgrag.retrieval.hits import HitOptions
from kgrag.retrieval.stages import finite
from kgrag.text.tokens import count_tokens

if TYPE_CHECKING:
    from kgrag.retrieval.pipeline import Retriever
    from kgrag.search.local import LocalResult

#: most inputs one ``embed`` call takes (the capability's ``batchLimit``)
EMBED_BATCH_LIMIT = 256
ENCODINGS = ("json", "f32-base64")
#: most queries one ``query/transform`` returns; a larger ``n`` is clamped (§15.5)
TRANSFORM_MAX_N = 10
MEMORY_SCOPES = ("global",)
_JSON_DIGITS = 7

_cache_lock = threading.Lock()
_tokens: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


#: a batch above a limit this engine states in its capabilities; ``data.field`` names it
TooLarge = PayloadTooLarge


def _object(params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise InvalidParams("params must be an object", field="params")
    return params


def _key(params: dict[str, Any], name: str, synonym: str) -> str:
    """The name the caller gave a parameter that has a synonym, for error paths."""
    return synonym if name not in params and synonym in params else name


def _text(value: Any, field: str) -> str:
    """A string or a text Content block as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        kind = value["type"]
        if kind != "text":
            raise Unsupported(
                f"{field} is a {kind!r} block; this engine handles text only", option="modality"
            )
        if isinstance(value.get("text"), str):
            return str(value["text"])
        raise InvalidParams(f"{field}.text must be a string", field=f"{field}.text")
    raise InvalidParams(f"{field} must be a string or a Content block", field=field)


def _query(value: Any) -> str:
    """The query as text: a string, a text block, or a list of text blocks; never blank."""
    if isinstance(value, list):
        text = " ".join(_text(block, f"query.{i}") for i, block in enumerate(value))
    else:
        text = _text(value, "query")
    if not text.strip():
        raise InvalidParams("query must not be empty", field="query")
    return text


# -- embed -----------------------------------------------------------------------------


def embed(retriever: Retriever, params: Any) -> dict[str, Any]:
    """``{"vectors"}``: one unit vector per input, as JSON floats or, with
    ``encoding`` f32-base64, little-endian float32 blobs plus ``encoding`` and
    ``dimension`` (§7.3.1)."""
    import rcp

    raw = _object(params)
    p = validate(EmbedParams, raw)
    key = _key(raw, "inputs", "texts")
    if p.encoding not in ENCODINGS:
        offered = ", ".join(ENCODINGS)
        raise Unsupported(
            f"encoding {p.encoding!r} is not offered (offered: {offered})", option="encoding"
        )
    if len(p.inputs) > EMBED_BATCH_LIMIT:
        raise TooLarge(
            f"{len(p.inputs)} inputs exceed batchLimit {EMBED_BATCH_LIMIT}",
            field=key,
            limit=EMBED_BATCH_LIMIT,
        )
    texts = [_text(value, f"{key}.{i}") for i, value in enumerate(p.inputs)]
    dim = retriever.encoder.dim
    matrix = retriever.encoder.encode(texts) if texts else np.zeros((0, dim), np.float32)
    matrix = np.nan_to_num(np.asarray(matrix, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    if p.encoding == "json":
        rows = np.round(matrix.astype(np.float64), _JSON_DIGITS).tolist()
    else:
        rows = matrix.tolist()  # float32 values, packed back to float32 exactly
    payload, meta = rcp.encode_vectors(rows, p.encoding)
    result: dict[str, Any] = {"vectors": payload, **meta}
    if p.encoding != "json":
        result["dimension"] = dim  # also for an empty batch, where the codec says 0
    return result


def embed_capability(retriever: Retriever) -> dict[str, Any]:
    """The ``embed`` capability (§6.1): what :func:`embed` produces and accepts."""
    models = retriever.reader.manifest.get("models", {})
    return {
        "dimension": retriever.encoder.dim,
        "identity": str(models.get("embedding") or retriever.encoder.model_id),
        "batchLimit": EMBED_BATCH_LIMIT,
        "normalized": True,
        "modalities": ["text"],
        "encodings": list(ENCODINGS),
    }


# -- rerank ----------------------------------------------------------------------------


def rerank(retriever: Retriever, params: Any) -> dict[str, Any]:
    """``{"scores", "order", "results"}``: ``scores[i]`` is passage i's (higher is
    better); ``order`` (indices) and ``results`` (``{index, score}``) run best first,
    cut to ``topN``. Ties keep input order."""
    raw = _object(params)
    p = validate(RerankParams, raw)
    key = _key(raw, "passages", "documents")
    query = _query(p.query)
    method = _rerank_method(retriever, p.method)
    limit = retriever.config.max_candidates
    if len(p.passages) > limit:
        raise TooLarge(
            f"{len(p.passages)} {key} exceed maxCandidates {limit}", field=key, limit=limit
        )
    passages = [_text(value, f"{key}.{i}") for i, value in enumerate(p.passages)]
    values = [finite(float(v)) for v in retriever.reranker(method).score(query, passages)]
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))[: p.topN]
    scores = [round(v, 6) for v in values]
    return {
        "scores": scores,
        "order": order,
        "results": [{"index": i, "score": scores[i]} for i in order],
    }


def _rerank_method(retriever: Retriever, asked: str | None) -> str:
    offered = retriever.rerank_methods()
    if not offered:
        raise Unsupported("this engine offers no rerank method", option="method")
    if asked is None:
        return offered[0]
    if asked not in offered:
        listed = ", ".join(offered)
        raise Unsupported(
            f"rerank method {asked!r} is not offered (offered: {listed})", option="method"
        )
    return asked


def rerank_capability(retriever: Retriever) -> dict[str, Any] | None:
    """The ``rerank`` capability, or None when no method loads here."""
    methods = retriever.rerank_methods()
    if not methods:
        return None
    return {"methods": methods, "maxCandidates": retriever.config.max_candidates}


# -- query/transform -------------------------------------------------------------------


def transform_query(retriever: Retriever, params: Any) -> dict[str, Any]:
    """``{"queries"}`` (and HyDE's ``hypothetical`` passage): the query transformed by
    ``method`` without an LLM, at most ``n`` (clamped to 10) queries."""
    from kgrag.retrieval.transform import transform
    from kgrag.text.nlp import load_spacy

    p = validate(TransformParams, _object(params))
    query = _query(p.query)
    offered = retriever.transform_methods()
    if p.method not in offered:
        listed = ", ".join(offered)
        raise Unsupported(
            f"transform method {p.method!r} is not offered (offered: {listed})", option="method"
        )
    if p.method == "hyde":
        retriever.facts.prepare()  # the name index, built once whichever call comes first
    out = transform(
        query,
        p.method,
        nlp=load_spacy(retriever.reader.manifest.get("models", {}).get("spacy", "auto")),
        facts=retriever.facts,
        n=min(p.n, TRANSFORM_MAX_N),
    )
    result: dict[str, Any] = {"queries": list(out.queries)}
    if out.hypothetical:
        result["hypothetical"] = out.hypothetical
    return result


def transform_capability(retriever: Retriever) -> dict[str, Any]:
    return {"methods": retriever.transform_methods()}


# -- memory ----------------------------------------------------------------------------


def memory_build(retriever: Retriever, params: Any) -> dict[str, Any]:
    """``{"memoryId", "tokens"}``: the memory is the graph of the live index, so this
    builds nothing; ``tokens`` counts the text of its chunks."""
    p = validate(MemoryBuildParams, _object(params))
    if p.scope not in MEMORY_SCOPES:
        raise Unsupported(
            f"memory scope {p.scope!r} is not offered (offered: global)", option="scope"
        )
    if p.documents:
        raise Unsupported(
            "memory/build takes no inline documents: add them with index/add first; "
            "the memory is the graph built over the live index",
            option="documents",
        )
    return {"memoryId": _memory_id(retriever, p.memoryId), "tokens": _chunk_tokens(retriever)}


def memory_recall(retriever: Retriever, params: Any) -> dict[str, Any]:
    """``{"clues", "hits"}``: the entities and facts the local search seeds from the
    query, best first, each with its entity ids and a weight in (0, 1] relative to the
    best; and the local search's top ``n`` chunk hits (deduplicated by ``sessionId``
    like every other search). ``n`` is clamped to maxK."""
    from kgrag.rcp.feedback import sink_hits

    p = validate(MemoryRecallParams, _object(params))
    query = _query(p.query)
    _memory_id(retriever, p.memoryId)
    flags = retriever.flags()  # before any work, as every search takes it
    n = min(p.n, retriever.config.max_k)
    graph_hits = retriever.graph_hits
    call = graph_hits.local(query, n)
    hits = graph_hits.local_hits(HitOptions(include_text=True), call, ("chunk",), n)
    hits = retriever.sessions.fresh(p.sessionId, hits)  # as graph local deduplicates
    hits, _ = sink_hits(hits, flags, by_unit=True)  # reported hits sink, as in graph local
    return {"clues": _clues(retriever, call.found, n), "hits": hits}


def _clues(retriever: Retriever, found: LocalResult, n: int) -> list[dict[str, Any]]:
    """Linked facts and seed entities of one local search, best ``n`` first; a fact
    goes before an entity of the same weight, then ids break ties."""
    nodes, facts = retriever.sources["node"], retriever.sources["triplet"]
    node_row, fact_row = nodes.row_of, facts.row_of
    ranked: list[tuple[float, int, str, str, list[str]]] = []
    for rid, sim in found.facts:
        if rid in fact_row:
            item = facts.items[fact_row[rid]]
            ends = list(dict.fromkeys([item.meta["src"], item.meta["dst"]]))
            ranked.append((float(sim), 0, rid, item.text, ends))
    for eid, weight in found.seeds.items():
        name = nodes.items[node_row[eid]].text if eid in node_row else eid
        ranked.append((float(weight), 1, eid, name, [eid]))
    top = max((w for w, *_ in ranked), default=0.0)
    if top <= 0:
        return []
    ranked.sort(key=lambda c: (-c[0], c[1], c[2]))
    clues = []
    for weight, _, _, text, seeds in ranked[:n]:
        scaled = round(weight / top, 6)
        if scaled <= 0:
            break
        clues.append({"query": text, "seedIds": seeds, "weight": scaled})
    return clues


def _memory_id(retriever: Retriever, asked: str | None) -> str:
    """This version's memory id; a different one names no memory here."""
    current = f"mem:{retriever.reader.index_version}"
    if asked is not None and asked != current:
        raise NotFound(f"memory {asked!r} does not exist; this engine serves {current}", id=asked)
    return current


def _chunk_tokens(retriever: Retriever) -> int:
    with _cache_lock:
        if retriever not in _tokens:
            _tokens[retriever] = sum(count_tokens(c.text) for c in retriever.reader.chunks())
        return _tokens[retriever]


def memory_capability() -> dict[str, Any]:
    return {"scopes": list(MEMORY_SCOPES), "clues": True}
