"""Local search's rerank model for candidates from long documents.

Which queries it reranks: :func:`kgrag.search.local_rerank.long_document`.

Written by benchmarks/fit_rerank.py; do not edit by hand.

    fitted on: GraphRAG-Bench medical (Fact Retrieval, Complex Reasoning)
    candidates per question (depth): 50
    C (inverse L2 strength): 0.1
    diversity (LocalSettings.long_diversity): 0.4

The share of the evidence's content words in the top 2 / top 5 as the fit measured them:

    medical Fact Retrieval: 1098 questions;
        local 67.98 / 79.15;
        reranked 73.18 / 82.64;
        reranked and diversified 74.26 / 83.84 (in-sample);
        74.42 / 84.0 (5-fold CV)
    medical Complex Reasoning: 509 questions;
        local 54.91 / 67.68;
        reranked 57.19 / 70.07;
        reranked and diversified 58.6 / 71.15 (in-sample);
        58.61 / 71.18 (5-fold CV)
"""

from kgrag.search.local_rerank import FEATURES, RerankModel

LONG_MODEL = RerankModel(
    features=FEATURES[:15],
    mean=(
        2.969555339035882,  # fused_rank
        2.9722539389865132,  # ppr_rank
        2.986741227462951,  # dense_rank
        0.4787391256539159,  # dense
        3.9634257461841993,  # bm25_rank
        0.0006222775357809583,  # title_in_query
        1.4425264467952708,  # seeds_named
        0.06131133435381694,  # seed_weight
        0.0,  # linked_from_top1
        0.0,  # linked_from_top3
        0.0,  # bridged
        0.07945239576851276,  # shares_top1
        0.5830961318486547,  # ppr_share
        0.0,  # linked_from_named
        0.0,  # title_subsumed
    ),
    scale=(
        0.8802226893066942,  # fused_rank
        0.8829216961526161,  # ppr_rank
        0.9059454900836522,  # dense_rank
        0.09328030190799645,  # dense
        1.3739231836704835,  # bm25_rank
        0.024937728574399663,  # title_in_query
        1.210543224737302,  # seeds_named
        0.18730949680984985,  # seed_weight
        1.0,  # linked_from_top1
        1.0,  # linked_from_top3
        1.0,  # bridged
        0.270443547852854,  # shares_top1
        0.19539058760154154,  # ppr_share
        1.0,  # linked_from_named
        1.0,  # title_subsumed
    ),
    weights=(
        -0.0018463934861261133,  # fused_rank
        0.07344602035146915,  # ppr_rank
        -0.13067076077040354,  # dense_rank
        0.24571507600523065,  # dense
        -0.8619527595065318,  # bm25_rank
        -0.05066998136155692,  # title_in_query
        0.23451562248245597,  # seeds_named
        -0.029287449999677924,  # seed_weight
        0.0,  # linked_from_top1
        0.0,  # linked_from_top3
        0.0,  # bridged
        0.062046289972195946,  # shares_top1
        0.16539361222833848,  # ppr_share
        0.0,  # linked_from_named
        0.0,  # title_subsumed
    ),
    intercept=-3.8332586116420204,
)
