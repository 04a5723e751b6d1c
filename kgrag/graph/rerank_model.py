"""The fitted rerank model of local search (:mod:`kgrag.graph.rerank`).

Written by benchmarks/fit_rerank.py; do not edit by hand.

    fitted on: musique100, hotpotqa100
    checked on: 2wiki_heldout
    candidates per question (depth): 50
    C (inverse L2 strength): 0.1

Recall@2 / Recall@5 as the fit measured them:

    musique100: 100 questions;
        local 53.67 / 69.25;
        reranked 55.5 / 73.42 (in-sample);
        54.67 / 72.58 (5-fold CV)
    hotpotqa100: 100 questions;
        local 79.0 / 92.5;
        reranked 81.5 / 93.5 (in-sample);
        80.0 / 93.0 (5-fold CV)
    2wiki_heldout: 40 questions;
        local 73.33 / 84.58;
        reranked 85.42 / 94.17 (held out)
"""

from .rerank import FEATURES, RerankModel

MODEL = RerankModel(
    features=FEATURES,
    mean=(
        2.9695553390354363,  # fused_rank
        2.9753899003929445,  # ppr_rank
        3.000511123531032,  # dense_rank
        0.29665208048522473,  # dense
        4.075908210315798,  # bm25_rank
        0.0238,  # title_in_query
        0.4827,  # seeds_named
        0.11017665454042412,  # seed_weight
        0.0147,  # linked_from_top1
        0.0104,  # linked_from_top3
        0.0147,  # bridged
        0.039,  # shares_top1
        0.27386490686424075,  # ppr_share
    ),
    scale=(
        0.8802226893067775,  # fused_rank
        0.8866342758315975,  # ppr_rank
        0.9277604070743766,  # dense_rank
        0.09550082314013864,  # dense
        1.460429897551865,  # bm25_rank
        0.15242558840299797,  # title_in_query
        1.001349444499799,  # seeds_named
        0.3953922389270143,  # seed_weight
        0.12034911715504679,  # linked_from_top1
        0.10144870625098601,  # linked_from_top3
        0.12034911715504679,  # bridged
        0.19359493795036276,  # shares_top1
        0.1699154238624478,  # ppr_share
    ),
    weights=(
        -0.9909481914030129,  # fused_rank
        0.04135713338747994,  # ppr_rank
        0.17995951803999194,  # dense_rank
        -0.03799344829885138,  # dense
        -0.5520312790067541,  # bm25_rank
        0.3107864626549777,  # title_in_query
        -0.1656210837478877,  # seeds_named
        0.329557069992451,  # seed_weight
        0.12603854831617212,  # linked_from_top1
        0.1047418803380034,  # linked_from_top3
        0.12603854831617212,  # bridged
        0.06711190566048379,  # shares_top1
        0.23192842896089536,  # ppr_share
    ),
    intercept=-4.924327697153341,
)
