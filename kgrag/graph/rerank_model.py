"""The fitted rerank model of local search (:mod:`kgrag.graph.rerank`).

Written by benchmarks/fit_rerank.py; do not edit by hand.

    fitted on: musique100, hotpotqa100
    checked on: 2wiki_dev180, 2wiki_heldout
    candidates per question (depth): 50
    C (inverse L2 strength): 0.1

Recall@2 / Recall@5 as the fit measured them:

    musique100: 100 questions;
        local 53.67 / 69.25;
        reranked 56.0 / 73.83 (in-sample);
        55.5 / 72.83 (5-fold CV)
    hotpotqa100: 100 questions;
        local 79.0 / 92.5;
        reranked 82.0 / 93.5 (in-sample);
        81.5 / 93.5 (5-fold CV)
    2wiki_dev180: 180 questions;
        local 64.44 / 73.06;
        reranked 77.08 / 93.33 (held out)
    2wiki_heldout: 40 questions;
        local 73.33 / 84.58;
        reranked 86.67 / 97.5 (held out)
"""

from .rerank import FEATURES, RerankModel

MODEL = RerankModel(
    features=FEATURES,
    mean=(
        2.9770885598520995,  # fused_rank
        3.000726544278124,  # ppr_rank
        3.0261814838581067,  # dense_rank
        0.2948602842983279,  # dense
        4.08430959648192,  # bm25_rank
        0.023618140319539547,  # title_in_query
        0.47960702590056564,  # seeds_named
        0.10939196600237312,  # seed_weight
        0.01845787436737124,  # linked_from_top1
        0.0165723925771559,  # linked_from_top3
        0.022228837947801925,  # bridged
        0.03919817405974,  # shares_top1
        0.2730352378806985,  # ppr_share
        0.021534186761933114,  # linked_from_named
        0.0009923588369554431,  # title_subsumed
    ),
    scale=(
        0.8810484002607827,  # fused_rank
        0.9321545351302779,  # ppr_rank
        0.9719137397354256,  # dense_rank
        0.09752924156382152,  # dense
        1.4585559479792394,  # bm25_rank
        0.1518562602179585,  # title_in_query
        0.9985132961569974,  # seeds_named
        0.3939901798030608,  # seed_weight
        0.13460007890491793,  # linked_from_top1
        0.12766263502461697,  # linked_from_top3
        0.14742698773049465,  # bridged
        0.1940661670928731,  # shares_top1
        0.16971679557494668,  # ppr_share
        0.15824001045962616,  # linked_from_named
        0.03148609313481662,  # title_subsumed
    ),
    weights=(
        -0.8644889414443163,  # fused_rank
        -0.10013206812446195,  # ppr_rank
        0.12126930555692858,  # dense_rank
        -0.03548841929104347,  # dense
        -0.5371867810932008,  # bm25_rank
        0.3445007077441924,  # title_in_query
        -0.18878429714952663,  # seeds_named
        0.33189037953378764,  # seed_weight
        -0.07914671996485936,  # linked_from_top1
        0.12620329107667996,  # linked_from_top3
        0.4129692300972792,  # bridged
        0.07870939181373943,  # shares_top1
        0.1979087117421975,  # ppr_share
        0.017765143126439807,  # linked_from_named
        -0.1405948211446732,  # title_subsumed
    ),
    intercept=-4.946080416600915,
)
