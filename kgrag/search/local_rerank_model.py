"""The fitted rerank model of local search (:mod:`kgrag.search.local_rerank`).

Written by benchmarks/fit_rerank.py; do not edit by hand.

    fitted on: musique100, hotpotqa100
    checked on: 2wiki_dev180, 2wiki_heldout
    candidates per question (depth): 50
    C (inverse L2 strength): 0.1

Recall@2 / Recall@5 as the fit measured them:

    musique100: 100 questions;
        local 53.0 / 68.58;
        reranked 56.5 / 74.17 (in-sample);
        55.33 / 73.83 (5-fold CV)
    hotpotqa100: 100 questions;
        local 76.5 / 90.5;
        reranked 81.0 / 94.5 (in-sample);
        80.5 / 94.5 (5-fold CV)
    2wiki_dev180: 180 questions;
        local 65.56 / 74.31;
        reranked 79.72 / 94.17 (held out)
    2wiki_heldout: 40 questions;
        local 75.83 / 85.83;
        reranked 90.42 / 97.5 (held out)
"""

from kgrag.search.local_rerank import FEATURES, RerankModel

MODEL = RerankModel(
    features=FEATURES,
    mean=(
        3.066770469107528,  # fused_rank
        3.2594728477332846,  # ppr_rank
        3.2989655732126364,  # dense_rank
        0.2742363270484887,  # dense
        4.165199277045408,  # bm25_rank
        0.02149954832881662,  # title_in_query
        0.4409214092140921,  # seeds_named
        0.09928824247197977,  # seed_weight
        0.017253839205058717,  # linked_from_top1
        0.015266485998193316,  # linked_from_top3
        0.02005420054200542,  # bridged
        0.07055103884372177,  # shares_top1
        0.2628483351031882,  # ppr_share
        0.01960252935862692,  # linked_from_named
        0.0009033423667570009,  # title_subsumed
        4.233222248965432,  # hop_rank
        0.026834445693149054,  # hop_share
    ),
    scale=(
        0.8878805004639017,  # fused_rank
        1.2501274635148711,  # ppr_rank
        1.3000102345380027,  # dense_rank
        0.11684629355532954,  # dense
        1.430423291962627,  # bm25_rank
        0.14504246878232654,  # title_in_query
        0.9482005304027095,  # seeds_named
        0.3698033857919029,  # seed_weight
        0.13021576032779594,  # linked_from_top1
        0.12261084945247305,  # linked_from_top3
        0.14018569678331574,  # bridged
        0.2560734069789322,  # shares_top1
        0.16783135343822342,  # ppr_share
        0.1511014217947417,  # linked_from_named
        0.03004207614872011,  # title_subsumed
        1.4699651584852909,  # hop_rank
        0.14283710178545622,  # hop_share
    ),
    weights=(
        -0.7517318891491411,  # fused_rank
        -0.17494653154637288,  # ppr_rank
        0.17647684010588752,  # dense_rank
        -0.06299875752976587,  # dense
        -0.4272396437829172,  # bm25_rank
        0.3336188607100087,  # title_in_query
        -0.1813001654402359,  # seeds_named
        0.2859323629768891,  # seed_weight
        -0.03446202111181117,  # linked_from_top1
        0.09758135408463936,  # linked_from_top3
        0.3034190012141477,  # bridged
        -0.05824484935929811,  # shares_top1
        0.18451126674615814,  # ppr_share
        0.028652922233327296,  # linked_from_named
        -0.12926618029229778,  # title_subsumed
        -0.47462861886812463,  # hop_rank
        -0.12331989862952895,  # hop_share
    ),
    intercept=-4.924544848546366,
)
