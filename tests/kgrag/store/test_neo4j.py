"""The Neo4j store against a real Neo4j 5 server: the same answers as the folder it
was copied from, the CLI on a Neo4j URI, and the failures a user meets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kgrag.errors import InvalidParams, StoreError
from kgrag.search.stats import chunk_vertices, lookup_names, specificity, title_entity
from kgrag.store import open_store
from kgrag.store.base import GRAPHS

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def both(science_graph, science_neo4j):
    folder = open_store(science_graph).reader()
    store = open_store(science_neo4j)
    yield folder, store.reader()
    folder.close()
    store.close()


def test_records_are_the_same(both):
    a, b = both
    assert a.documents() == b.documents()
    assert a.chunks() == b.chunks()
    assert a.sentences() == b.sentences()
    assert a.entities() == b.entities()
    assert a.mentions() == b.mentions()
    assert a.relations() == b.relations()
    assert a.synonyms() == b.synonyms()
    assert a.communities() == b.communities() and a.communities(level=1) == b.communities(level=1)
    assert a.tree_nodes() == b.tree_nodes()
    some = [e.id for e in a.entities()[:5]]
    assert a.relations(touching=some) == b.relations(touching=some)
    assert a.counts() == b.counts()


def test_vector_indexes_are_made_for_the_kinds_searched_by_nearest_neighbour(both):
    from kgrag.store.ann import ANN_KINDS

    b = both[1]
    prefix = f"kg_{b.tag}__"
    found = b.connection.run(
        "SHOW VECTOR INDEXES YIELD name WHERE name STARTS WITH $p RETURN name", p=prefix
    )
    assert sorted(str(r[0])[len(prefix) :] for r in found) == sorted(f"{k}_vec" for k in ANN_KINDS)


def test_the_query_side_answers_the_same(both):
    a, b = both
    for kind in ("chunks", "sentences", "entities", "facts", "communities", "tree_nodes"):
        n = a.size(kind)
        assert b.size(kind) == n
        rows = np.arange(n)
        assert a.ids(kind, rows) == b.ids(kind, rows)
        assert np.array_equal(
            a.rows(kind, a.ids(kind, rows[::-1])), b.rows(kind, a.ids(kind, rows[::-1]))
        )
        assert np.allclose(np.asarray(a.matrix(kind)[rows[:7]]), b.matrix(kind)[rows[:7]])
    v = a.matrix("chunks")[[0, 5, 11]]
    for kind in ("chunks", "sentences", "entities", "facts", "communities", "tree_nodes"):
        exact, served = a.nearest(kind, v, 5), b.nearest(kind, v, 5)
        for x, y in zip(exact, served, strict=True):
            assert [r for r, _ in x] == [r for r, _ in y]
            assert np.allclose([s for _, s in x], [s for _, s in y], atol=1e-5)
    among = np.arange(0, a.size("entities"), 3)
    x, y = a.nearest("entities", v[0], 4, among)[0], b.nearest("entities", v[0], 4, among)[0]
    assert [r for r, _ in x] == [r for r, _ in y]
    assert np.allclose([s for _, s in x], [s for _, s in y], atol=1e-5)
    assert np.allclose(a.similarity("chunks", v[1]), b.similarity("chunks", v[1]), atol=1e-5)
    assert np.allclose(
        a.similarity("communities", v[1], np.array([5, 1])),
        b.similarity("communities", v[1], np.array([5, 1])),
        atol=1e-5,
    )
    vertices = np.arange(a.size("entities") + a.size("chunks"))
    for graph in GRAPHS:
        rows = (
            vertices
            if graph == "walk"
            else np.arange(a.size("entities" if graph == "relations" else "chunks"))
        )
        x, y = a.adjacency(graph, rows), b.adjacency(graph, rows)
        assert np.array_equal(x.indptr, y.indptr) and np.array_equal(x.indices, y.indices), graph
        assert np.allclose(np.asarray(x.data, dtype=float), np.asarray(y.data, dtype=float)), graph
        if graph == "relations":
            assert a.relation_ids(x.edge) == b.relation_ids(y.edge)
    assert np.array_equal(chunk_vertices(a), chunk_vertices(b))
    chunk_rows = np.arange(a.size("chunks"))
    assert np.array_equal(title_entity(a, chunk_rows), title_entity(b, chunk_rows))
    assert a.attribute("chunks", "title").tolist() == b.attribute("chunks", "title").tolist()
    for kind, names in (
        ("entities", ("chunks", "degree")),
        ("communities", ("level", "rating", "size", "id_rank", "canonical", "hierarchy")),
    ):
        for name in names:
            assert a.attribute(kind, name).tolist() == b.attribute(kind, name).tolist(), name
    keys = ["cancer", "cell", "no such name at all", *[e.name.lower() for e in a.entities()[:20]]]
    assert lookup_names(a, keys) == lookup_names(b, keys)
    sentences = [c.text.split(". ")[0] for c in a.chunks()[:5]]
    assert a.lookup("sentences", sentences) == b.lookup("sentences", sentences)
    with pytest.raises(InvalidParams, match="unknown graph"):
        b.adjacency("roads", np.array([0]))
    # BM25 from the same postings: the same hits and scores, to the bit, by kgrag.bm25
    # and by the Cypher query a server without it answers
    texts = [c.text for c in a.chunks()[:4]] + ["cell cancer treatment", "zzqx", "the of"]
    assert "kgrag.bm25" in b.connection.procedures()
    for server in (True, False):
        b.server_push = server
        try:
            for kind in ("chunks", "communities", "tree_nodes"):
                for text in texts:
                    for k in (1, 5):
                        x, y = a.search_sparse(text, k, kind), b.search_sparse(text, k, kind)
                        assert x == y, (server, kind, text)
        finally:
            b.server_push = True


def test_passage_texts_are_the_same_and_one_query(both):
    a, b = both
    chunks = [c.id for c in a.chunks()]
    wanted = [*chunks[:6], *chunks[-3:], "c:no-such-passage"]
    q = np.asarray(a.matrix("chunks")[2], dtype=np.float32)
    titled = 0
    b.size("sentences")  # counted once a version, then known
    for query in (q, None):
        x = a.passage_texts(wanted, query)
        asked: list[str] = []
        run = b.connection.run

        def counted(cypher: str, asked: list[str] = asked, run=run, **kw):
            asked.append(cypher)
            return run(cypher, **kw)

        b.connection.run = counted
        try:
            y = b.passage_texts(wanted, query)
        finally:
            b.connection.run = run
        assert len(asked) == 1
        assert sorted(x) == sorted(y) == sorted(wanted[:-1])
        for cid in x:
            assert x[cid] == y[cid], cid
            assert x[cid].text == a.chunks([cid])[0].text
            assert x[cid].sentences == tuple(a.sentences([cid]))
            assert bool(x[cid].similarity) == (query is not None)
            titled += x[cid].title_entity is not None
    assert titled  # the science graph's passages name their titles
    assert a.passage_texts([], q) == b.passage_texts([], q) == {}


def test_the_push_and_the_dense_scan_run_in_the_database(both):
    """kgrag.push gives the client's mass to the bit, cold and from its cache, and the
    client's own push (a server without the procedure) gives it too; kgrag.similarity
    gives the folder's cosines."""
    a, b = both
    assert {"kgrag.push", "kgrag.similarity", "kgrag.bm25"} <= b.connection.procedures()
    n = a.size("entities") + a.size("chunks")
    rng = np.random.default_rng(11)
    for _ in range(4):
        reset = np.zeros(n)
        reset[rng.choice(n, 12, replace=False)] = rng.random(12)
        reset[chunk_vertices(a)] += 0.02 * rng.random(a.size("chunks"))
        for eps in (1e-5, 1e-3):
            folder = a.pushed_pagerank(reset, 0.5, eps)
            assert folder.dtype == np.float32 and np.count_nonzero(folder) > 0
            assert np.array_equal(b.pushed_pagerank(reset, 0.5, eps), folder)
            b.server_push = False
            try:
                assert np.array_equal(b.pushed_pagerank(reset, 0.5, eps), folder)
            finally:
                b.server_push = True
    q = a.matrix("chunks")[[3]][0]
    served = b.similarity("chunks", q)
    assert served.dtype == np.float32 and served.shape == (a.size("chunks"),)
    assert np.allclose(served, a.similarity("chunks", q), atol=1e-6)
    bad = b.connection.run
    with pytest.raises(StoreError, match="outside"):
        bad("CALL kgrag.push('Nope', [5], [1.0], 3, 0.5, 1e-5, 10) YIELD mass RETURN mass")


def test_the_path_search_runs_in_the_database(both):
    """kgrag.paths gives the client's path lengths and predecessors, cold and from its
    cache, whatever stops the search (groups met, the length limit, the reached and
    offered caps, hubs), and a server without it answers the same from the client."""
    from kgrag.search.paths import PathFinder

    a, b = both
    assert "kgrag.paths" in b.connection.procedures()
    shipped = PathFinder(a).limits
    n = a.size("entities")
    degree = a.attribute("entities", "degree")
    hubs = np.argsort(-degree)[:3].tolist()  # the best connected, as seeds and as ways
    rng = np.random.default_rng(5)
    tried = reached = 0
    for limits in (
        shipped,
        replace(shipped, hub_degree=2, toll=1.0, generic=1.0),
        replace(shipped, max_reached=4),
        replace(shipped, max_offers=3),
        replace(shipped, limit=1.5),
    ):
        for seeds in (
            [hubs[0]],
            hubs,
            rng.choice(n, 4, replace=False).tolist(),
            [hubs[1], hubs[1]],
        ):
            far = rng.choice(n, 6, replace=False).tolist()
            for groups in (None, [], [{far[0]}], [{far[1], far[2]}, {far[3]}, set()], [set(far)]):
                folder = a.shortest_paths(seeds, groups, limits)
                assert b.shortest_paths(seeds, groups, limits) == folder, (limits, seeds, groups)
                b.server_push = False
                try:
                    assert b.shortest_paths(seeds, groups, limits) == folder
                finally:
                    b.server_push = True
                tried += 1
                reached += len(folder) > len(set(seeds))
    assert reached > tried // 3  # the searches went somewhere (an empty groups list stops at once)
    bad = b.connection.run
    with pytest.raises(StoreError, match="outside"):
        bad(
            "CALL kgrag.paths('Nope', [5], [], false, 4.5, 500, 10, 10, 20.0, 1.0, 3) "
            "YIELD rows RETURN rows"
        )


def test_what_a_reader_keeps_answers_as_the_store(science_graph, science_neo4j, monkeypatch):
    """Reads answered from what the reader kept (in any order, with repeats, past its
    budget) are the folder's answers."""
    import kgrag.store.neo4j.memo as n4

    monkeypatch.setattr(n4, "MEMO_NUMBERS", 500)  # far below one search's reads
    a = open_store(science_graph).reader()
    b = open_store(science_neo4j).reader()
    try:
        rng = np.random.default_rng(5)
        for _ in range(3):
            rows = rng.integers(0, a.size("chunks"), 40)
            erows = rng.integers(0, a.size("entities"), 40)
            assert a.ids("chunks", rows) == b.ids("chunks", rows)
            assert a.ids("entities", erows) == b.ids("entities", erows)
            for graph, r in (("mentions", rows), ("links", rows), ("relations", erows)):
                x, y = a.adjacency(graph, r), b.adjacency(graph, r)
                assert np.array_equal(x.indptr, y.indptr) and np.array_equal(x.indices, y.indices)
            assert np.array_equal(title_entity(a, rows), title_entity(b, rows))
            assert (
                a.attribute("chunks", "title", rows).tolist()
                == b.attribute("chunks", "title", rows).tolist()
            )
            assert np.array_equal(specificity(a, erows), specificity(b, erows))
            ids = a.ids("entities", erows)
            assert a.entities(ids) == b.entities(ids)
            assert np.array_equal(a.rows("entities", ids), b.rows("entities", ids))
            assert b.memo.held <= 500
    finally:
        a.close()
        b.close()


def test_searches_answer_the_same(science_graph, science_neo4j):
    import kgrag

    questions = json.loads((DATA / "science_questions.json").read_text())
    same = total = 0
    identical = dict.fromkeys(("local", "global", "drift"), 0)
    with kgrag.open(science_graph) as a, kgrag.open(science_neo4j) as b:
        for q in questions:
            for op in identical:
                x = [h["id"] for h in a.graph({"op": op, "query": q, "k": 10})["hits"]]
                y = [h["id"] for h in b.graph({"op": op, "query": q, "k": 10})["hits"]]
                identical[op] += x == y
                assert len(set(x) & set(y)) >= 0.8 * len(x), (op, q)
            cited = b.graph({"op": "global", "query": q})  # the summary read from Neo4j
            leaves = {c["id"]: c["leaves"] for c in cited["communities"]}
            assert cited["citations"], q
            assert all(c["passage"] in leaves[c["community"]] for c in cited["citations"])
            x = [h["id"] for h in a.retrieve({"query": q, "k": 10, "mode": "dense"})["hits"]]
            assert x == [
                h["id"] for h in b.retrieve({"query": q, "k": 10, "mode": "dense"})["hits"]
            ]
            x = [h["id"] for h in a.retrieve({"query": q, "k": 10})["hits"]]
            y = [h["id"] for h in b.retrieve({"query": q, "k": 10})["hits"]]
            same += x == y
            total += 1
    assert same == total  # hybrid: the same BM25 and the same dense ranks
    assert min(identical.values()) >= 0.8 * len(questions), identical


def test_the_long_document_route_answers_the_same(science_graph, science_neo4j):
    """Every query routed to the long-document model (``long_share`` 0), whose
    diversification reads the candidates' vectors (on Neo4j: one query by row)."""
    import kgrag
    from kgrag.search.local import LocalSearch, LocalSettings

    questions = json.loads((DATA / "science_questions.json").read_text())
    settings = LocalSettings(long_share=0.0)
    with kgrag.open(science_graph) as a, kgrag.open(science_neo4j) as b:
        searches = [LocalSearch(e.reader, e.encoder, settings) for e in (a, b)]
        same = 0
        for q in questions:
            x, y = ([c for c, _ in s.search(q, 10).passages] for s in searches)
            same += x == y
            assert len(set(x) & set(y)) >= 0.8 * len(x), q
    assert same >= 0.8 * len(questions)


def test_parameter_lists_reach_the_server_whole_and_are_not_formatted(neo4j_uri, caplog):
    """The driver formats each RUN's parameters for its debug log before it asks whether
    anything logs; the store's lists go as lists whose ``repr`` is their length, so an
    upload batch is packed for the wire and never printed (the values all arrive)."""
    import logging

    store = open_store(f"{neo4j_uri}/quiet-{uuid.uuid4().hex[:6]}")
    rows = [{"i": i, "vec": [float(i)] * 64} for i in range(2000)]
    with caplog.at_level(logging.DEBUG, logger="neo4j"):
        found = store.connection.run(
            "UNWIND $rows AS row RETURN count(row), sum(row.i), sum(row.vec[63])", rows=rows
        )
    assert list(found[0]) == [2000, sum(range(2000)), float(sum(range(2000)))]
    runs = [r.getMessage() for r in caplog.records if "C: RUN" in r.getMessage()]
    assert runs and any("<2000 items>" in m for m in runs)
    assert all(len(m) < 2000 for m in runs)


def _kgrag(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kgrag", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        timeout=600,
    )


def test_ingest_query_add_delete_through_the_cli(neo4j_uri, tmp_path, capsys):
    """The command line's ingest, query, info and delete on a Neo4j graph (run in this
    process: the models load once; the commands' own processes are tested elsewhere)."""
    from kgrag.cli.main import main

    def kgrag(*args: str) -> str:
        code = main(list(args))
        out = capsys.readouterr()
        assert code == 0, out.err
        return out.out

    graph = f"{neo4j_uri}/cli{uuid.uuid4().hex[:8]}"
    docs = [json.loads(line) for line in (DATA / "news.jsonl").read_text().splitlines()]
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps(d) + "\n" for d in docs[:4]))
    second.write_text("".join(json.dumps(d) + "\n" for d in docs[4:]))
    out = kgrag("ingest", str(first), "--graph", graph, "--quiet")
    assert "v000001" in out and graph in out
    out = kgrag("query", "--graph", graph, "-k", "2", "--json", docs[0]["text"][:80])
    hits = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert hits, out
    assert "v000002" in kgrag("ingest", str(second), "--graph", graph, "--quiet")
    info = json.loads(kgrag("info", "--graph", graph))
    assert info["indexVersion"] == "v000002" and info["versions"] == ["v000001", "v000002"]
    assert info["counts"]["documents"] == len(docs)
    with open_store(graph).reader() as r:
        doc_id = r.documents()[0].id
    assert "deleted 1" in kgrag("delete", "--graph", graph, doc_id)
    with open_store(graph).reader() as r:
        assert doc_id not in {d.id for d in r.documents()}
        assert r.counts()["documents"] == len(docs) - 1
    out = kgrag("query", "--graph", graph, "--op", "local", "-k", "2", docs[1]["text"][:80])
    assert out.strip()


def test_a_killed_ingest_leaves_the_previous_version_serving(neo4j_uri, tmp_path):
    graph = f"{neo4j_uri}/crash{uuid.uuid4().hex[:8]}"
    docs = [json.loads(line) for line in (DATA / "news.jsonl").read_text().splitlines()]
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps(d) + "\n" for d in docs[:3]))
    second.write_text("".join(json.dumps(d) + "\n" for d in docs[3:]))
    assert _kgrag("ingest", str(first), "--graph", graph, "--quiet").returncode == 0
    out = _kgrag(
        "ingest",
        str(second),
        "--graph",
        graph,
        "--quiet",
        env={"KGRAG_CRASH_AT": "neo4j-before-publish"},
    )
    assert out.returncode == -9
    store = open_store(graph)
    try:
        assert store.current() == "v000001"
        assert store._tags_written() - set(store.versions())  # the dead writer's half version
        with store.reader() as r:
            assert r.counts()["documents"] == 3
        # the next writer takes over the dead writer's lock and drops what it left
        assert _kgrag("ingest", str(second), "--graph", graph, "--quiet").returncode == 0
        assert store.current() == "v000002" and store._tags_written() == set(store.versions())
    finally:
        store.close()


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("neo4j://127.0.0.1:7687", "the path must be the graph's name"),
        ("neo4j://127.0.0.1:7687/a/b", "the path must be the graph's name"),
        ("neo4j://user:secret@127.0.0.1:7687/g", "credentials do not go in the URI"),
        ("neo4j://127.0.0.1:7687/g?db=x", "unknown URI option 'db'"),
        ("bolt://127.0.0.1:1/g", "Neo4j is unreachable"),
    ],
)
def test_bad_locations_give_one_clear_error(location, message):
    out = _kgrag("info", "--graph", location)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kgrag: error:") and message in lines[0], (
        out.stderr
    )
    assert "secret" not in out.stderr


def test_wrong_credentials_and_a_missing_graph(neo4j_uri):
    # the local server runs without authentication: credentials are ignored there, so a
    # missing graph is what a user meets
    out = _kgrag("query", "--graph", f"{neo4j_uri}/nothing-here", "x")
    assert out.returncode != 0 and "no graph here" in out.stderr
    with pytest.raises(StoreError, match="unreachable"):
        open_store("bolt://127.0.0.1:1/g")


def test_wrong_credentials_give_one_clear_line(tmp_path, launcher):
    """A server with authentication on (the launcher, as a team's server would run):
    the right password reaches it, a wrong or missing one gets one error line that
    names the refusal and never the password."""
    proc, uri = launcher.start(tmp_path / "auth", heap_mib=512, password="kgrag-Right-pw")
    try:
        right = {"KGRAG_NEO4J_USER": "neo4j", "KGRAG_NEO4J_PASSWORD": "kgrag-Right-pw"}
        out = _kgrag("query", "--graph", f"{uri}/nothing-here", "x", env=right)
        assert out.returncode != 0 and "no graph here" in out.stderr, out.stderr
        for env in ({**right, "KGRAG_NEO4J_PASSWORD": "kgrag-Wrong-pw"}, {}):
            out = _kgrag("query", "--graph", f"{uri}/g", "x", env=env)
            lines = out.stderr.strip().splitlines()
            assert out.returncode != 0 and len(lines) == 1, out.stderr
            assert lines[0].startswith("kgrag: error:") and "refused the credentials" in lines[0]
            assert "pw" not in out.stderr
    finally:
        proc.terminate()
        proc.wait(60)


def test_the_quantised_search_runs_in_the_database(science_graph, neo4j_uri):
    """With codes (kinds of at least ``ann_min_rows`` rows), kgrag.nearest finds the
    folder's exact nearest rows and scores; its candidates are the best by the codes
    as faiss decodes them (the low nibble the first sub-vector's); a version dropped
    takes its codebooks along."""
    from kgrag.store import copy_graph
    from kgrag.store.ann import ANN_KINDS, trained_pq

    location = f"{neo4j_uri}/coded"
    # (a kind of a dozen rows has too few distinct vectors for 16 centroids a code)
    target = open_store(location, keep_versions=1, retain_seconds=0, ann_min_rows=50)
    a = open_store(science_graph).reader()
    try:
        first = copy_graph(a, target)
        b = target.reader()
        assert "kgrag.nearest" in b.connection.procedures()
        coded = [k for k in ANN_KINDS if a.size(k) >= 50]
        assert sorted(b.manifest["pq_kinds"]) == sorted(coded) and len(coded) >= 2
        rng = np.random.default_rng(3)
        for kind in coded:
            n = a.size(kind)
            queries = a.matrix(kind)[rng.choice(n, 4, replace=False)]
            queries = queries + rng.normal(0, 0.05, queries.shape).astype(np.float32)
            for k in (1, 5, 12):
                exact, served = a.nearest(kind, queries, k), b.nearest(kind, queries, k)
                assert served == exact, (kind, k)  # rows and float32 scores, to the bit
            # the codes in the database decode as faiss decodes its own
            ((m, sub, centroids),) = b.connection.run(
                f"MATCH (n:`{b.labels['codebooks']}` {{kind: $kind}}) "
                "RETURN n.m, n.sub, n.centroids",
                kind=kind,
            )
            rows, codes = b.columns(
                f"MATCH (n:`{b.labels[kind]}`) WHERE n.row >= 0", ("n.row", "n.pq")
            )
            packed = np.zeros((n, (m + 1) // 2), dtype=np.uint8)
            packed[rows] = [np.frombuffer(c, dtype=np.uint8) for c in codes]
            nibbles = np.stack([packed & 15, packed >> 4], axis=2).reshape(n, -1)[:, :m]
            book = np.asarray(centroids, dtype=np.float32).reshape(m, 16, sub)
            decoded = book[np.arange(m), nibbles].reshape(n, m * sub)
            matrix = np.asarray(a.matrix(kind)[np.arange(n)], dtype=np.float32)
            index = trained_pq(matrix)  # held: its pq is a view into it
            pq = index.pq
            assert np.allclose(decoded, pq.decode(pq.compute_codes(matrix)), atol=1e-6)
            # the wide best by the codes are the candidates re-scored
            q = queries[0]
            wide = min(n, 9)
            by_code = decoded.astype(np.float64) @ q.astype(np.float64)
            found = b.connection.run(
                "CALL kgrag.nearest($label, $book, $kind, [$q], $wide, $wide, $n, '') "
                "YIELD row RETURN collect(row)",
                label=b.labels[kind],
                book=b.labels["codebooks"],
                kind=kind,
                q=q.tolist(),
                wide=wide,
                n=n,
            )[0][0]
            assert sorted(found) == sorted(np.argsort(-by_code, kind="stable")[:wide].tolist())
        with pytest.raises(StoreError, match="no codebook"):
            b.connection.run(
                "CALL kgrag.nearest($label, $book, 'nope', [[0.1]], 5, 5, 3, '') YIELD row "
                "RETURN row",
                label=b.labels["facts"],
                book=b.labels["codebooks"],
            )
        b.close()
        copy_graph(a, target)  # keep_versions 1: the first version goes, codebooks too
        from kgrag.store.neo4j.model import label, version_tag

        gone = label("codebooks", version_tag(target.name, first))
        assert target.connection.run(f"MATCH (n:`{gone}`) RETURN count(n)")[0][0] == 0
    finally:
        a.close()
        target.close()
