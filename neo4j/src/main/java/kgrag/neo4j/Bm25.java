package kgrag.neo4j;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.neo4j.graphdb.Label;
import org.neo4j.graphdb.Node;
import org.neo4j.graphdb.Transaction;
import org.neo4j.procedure.Context;
import org.neo4j.procedure.Description;
import org.neo4j.procedure.Mode;
import org.neo4j.procedure.Name;
import org.neo4j.procedure.Procedure;

/**
 * BM25 over a version's postings ((:Bm25Term {kind, term, idf, docs, tf, lens}) and
 * (:Bm25Index {kind, avgdl})), scored as the embedded store scores them (FTS5's
 * formula per posting in double precision, summed per document in the query's term
 * order), so scores are the folder's to the bit. One call instead of a Cypher query that
 * unwinds every posting as a row.
 */
public final class Bm25 {
    @Context public Transaction tx;

    /** The best documents' ids and scores, best first (every document tied with the last). */
    public static final class Hits {
        public List<String> id;
        public List<Double> score;

        public Hits(List<String> id, List<Double> score) {
            this.id = id;
            this.score = score;
        }
    }

    @Procedure(name = "kgrag.bm25", mode = Mode.READ)
    @Description(
            "kgrag.bm25(tag, kind, docLabel, terms, k1, b, limit): BM25 of the terms over the"
                    + " postings of Bm25Term_<tag> of kind; the best limit documents of"
                    + " docLabel (by their bm25 number), ties at the last kept")
    public Stream<Hits> bm25(
            @Name("tag") String tag,
            @Name("kind") String kind,
            @Name("docLabel") String docLabel,
            @Name("terms") List<String> terms,
            @Name("k1") double k1,
            @Name("b") double b,
            @Name("limit") long limit) {
        Node index = tx.findNode(Label.label("Bm25Index_" + tag), "kind", kind);
        if (index == null || terms.isEmpty() || limit <= 0) {
            return Stream.of(new Hits(List.of(), List.of()));
        }
        double avgdl = ((Number) index.getProperty("avgdl")).doubleValue();
        Label termLabel = Label.label("Bm25Term_" + tag);
        Map<Long, double[]> score = new HashMap<>();
        for (String term : terms) {
            Node t = null;
            try (var found = tx.findNodes(termLabel, "kind", kind, "term", term)) {
                if (found.hasNext()) {
                    t = found.next();
                }
            }
            if (t == null) {
                continue;
            }
            double idf = ((Number) t.getProperty("idf")).doubleValue();
            long[] docs = (long[]) t.getProperty("docs");
            long[] tf = (long[]) t.getProperty("tf");
            long[] lens = (long[]) t.getProperty("lens");
            for (int j = 0; j < docs.length; j++) {
                double f = (double) tf[j];
                double s = idf * ((f * (k1 + 1.0)) / (f + k1 * (1 - b + b * (double) lens[j] / avgdl)));
                score.computeIfAbsent(docs[j], d -> new double[1])[0] += s;
            }
        }
        long[] docs = new long[score.size()];
        double[] values = new double[score.size()];
        int i = 0;
        for (Map.Entry<Long, double[]> e : score.entrySet()) {
            docs[i] = e.getKey();
            values[i++] = e.getValue()[0];
        }
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int keep = (int) Math.min(limit, sorted.length);
        double cut = keep == 0 ? Double.POSITIVE_INFINITY : sorted[sorted.length - keep];
        Label doc = Label.label(docLabel);
        List<Object[]> best = new ArrayList<>();
        for (int j = 0; j < docs.length; j++) {
            if (values[j] >= cut) {
                Node n = tx.findNode(doc, "bm25", docs[j]);
                if (n != null) {
                    best.add(new Object[] {n.getProperty("id"), values[j]});
                }
            }
        }
        best.sort((x, y) -> Double.compare((double) y[1], (double) x[1]));
        List<String> ids = new ArrayList<>();
        List<Double> scores = new ArrayList<>();
        for (Object[] hit : best) {
            ids.add((String) hit[0]);
            scores.add((Double) hit[1]);
        }
        return Stream.of(new Hits(ids, scores));
    }
}
