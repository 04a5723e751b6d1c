package kgrag.neo4j;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;

import org.neo4j.graphdb.Label;
import org.neo4j.graphdb.Node;
import org.neo4j.graphdb.ResourceIterator;
import org.neo4j.graphdb.Transaction;
import org.neo4j.procedure.Context;
import org.neo4j.procedure.Description;
import org.neo4j.procedure.Mode;
import org.neo4j.procedure.Name;
import org.neo4j.procedure.Procedure;

/**
 * Nearest neighbours as the embedded store finds them for its large kinds: every row's
 * product-quantised code is scored against the query (the folder's codebook: 4 bits a
 * sub-vector, two codes a byte, the low nibble first, as faiss packs them), the best
 * {@code wide} codes are re-scored exactly (the stored vector's dot product with the
 * query in double precision, rounded to float) and the best {@code k} of those come
 * back, ties by row. No neighbour is missed for want of a graph edge, as an HNSW search
 * can miss one. A version's codes are read once per build (see {@link BuildCache}):
 * 48 bytes a MiniLM row.
 */
public final class Nearest {
    @Context public Transaction tx;

    /** One neighbour of query number {@code query}. */
    public static final class Hit {
        public long query;
        public long row;
        public double score;

        public Hit(long query, long row, double score) {
            this.query = query;
            this.row = row;
            this.score = score;
        }
    }

    /** A kind's codebook and codes by row, with each row's node. */
    static final class Codes {
        final float[] centroids; // [m][16][sub]
        final int m;
        final int sub;
        final int width; // bytes a row
        final byte[] codes; // row r at r * width
        final long[] node; // row r's node id

        Codes(float[] centroids, int m, int sub, byte[] codes, long[] node) {
            this.centroids = centroids;
            this.m = m;
            this.sub = sub;
            this.width = (m + 1) / 2;
            this.codes = codes;
            this.node = node;
        }
    }

    @Procedure(name = "kgrag.nearest", mode = Mode.READ)
    @Description(
            "kgrag.nearest(label, codebook, kind, queries, wide, k, n, build): for each query,"
                    + " the best k of label's rows (0..n-1) among the wide best by their"
                    + " product-quantised codes (pq, under the codebook node of kind), by the"
                    + " exact dot product of their vec; with build the codes are kept")
    public Stream<Hit> nearest(
            @Name("label") String label,
            @Name("codebook") String codebook,
            @Name("kind") String kind,
            @Name("queries") List<List<Double>> queries,
            @Name("wide") long wide,
            @Name("k") long k,
            @Name("n") long n,
            @Name(value = "build", defaultValue = "") String build) {
        int rows = Props.rows("kgrag.nearest", n);
        String key = "pq:" + label + "@" + build + "/" + rows;
        Codes c =
                build.isEmpty()
                        ? read(label, codebook, kind, rows)
                        : BuildCache.get(
                                key, Codes.class, (long) rows * 3 + 6144, () -> read(label, codebook, kind, rows));
        int keep = (int) Math.max(0, Math.min(Math.min(wide, rows), Integer.MAX_VALUE));
        int best = (int) Math.max(0, Math.min(k, keep));
        List<Hit> out = new ArrayList<>();
        for (int qi = 0; qi < queries.size(); qi++) {
            List<Double> query = queries.get(qi);
            if (query.size() != c.m * c.sub) {
                throw new IllegalArgumentException(
                        "kgrag.nearest: the query has " + query.size() + " dimensions, "
                                + kind + "'s codes " + c.m * c.sub);
            }
            double[] q = new double[query.size()];
            for (int j = 0; j < q.length; j++) {
                q[j] = query.get(j);
            }
            int[] candidates = candidates(c, q, keep);
            exact(c, q, candidates, best, qi, out);
        }
        return out.stream();
    }

    /** The rows of the best {@code keep} code scores (in no particular order). */
    private static int[] candidates(Codes c, double[] q, int keep) {
        // a table per byte: the two sub-vectors' scores summed for each of its 256 values
        float[] one = new float[c.m * 16];
        for (int s = 0; s < c.m; s++) {
            for (int code = 0; code < 16; code++) {
                double sum = 0;
                int at = (s * 16 + code) * c.sub;
                for (int d = 0; d < c.sub; d++) {
                    sum += q[s * c.sub + d] * c.centroids[at + d];
                }
                one[s * 16 + code] = (float) sum;
            }
        }
        float[] pair = new float[c.width * 256];
        for (int b = 0; b < c.width; b++) {
            for (int v = 0; v < 256; v++) {
                float lo = one[2 * b * 16 + (v & 15)];
                float hi = 2 * b + 1 < c.m ? one[(2 * b + 1) * 16 + (v >>> 4)] : 0f;
                pair[b * 256 + v] = lo + hi;
            }
        }
        int rows = c.node.length;
        float[] score = new float[rows];
        byte[] codes = c.codes;
        int width = c.width;
        for (int r = 0; r < rows; r++) {
            float s = 0;
            int at = r * width;
            for (int b = 0; b < width; b++) {
                s += pair[(b << 8) | (codes[at + b] & 0xff)];
            }
            score[r] = s;
        }
        return top(score, keep);
    }

    /** The rows of the {@code keep} highest scores, ties to the lower row (a min-heap). */
    static int[] top(float[] score, int keep) {
        int[] heap = new int[keep];
        int size = 0;
        for (int r = 0; r < score.length; r++) {
            if (size < keep) {
                heap[size] = r;
                up(heap, size++, score);
            } else if (keep > 0 && worse(heap[0], r, score)) {
                heap[0] = r;
                down(heap, size, score);
            }
        }
        return Arrays.copyOf(heap, size);
    }

    /** Whether row a ranks below row b (lower score, or equal and a higher row). */
    private static boolean worse(int a, int b, float[] score) {
        return score[a] < score[b] || (score[a] == score[b] && a > b);
    }

    private static void up(int[] heap, int i, float[] score) {
        while (i > 0) {
            int parent = (i - 1) / 2;
            if (!worse(heap[i], heap[parent], score)) {
                return;
            }
            int t = heap[i];
            heap[i] = heap[parent];
            heap[parent] = t;
            i = parent;
        }
    }

    private static void down(int[] heap, int size, float[] score) {
        int i = 0;
        while (true) {
            int l = 2 * i + 1;
            int r = l + 1;
            int least = i;
            if (l < size && worse(heap[l], heap[least], score)) {
                least = l;
            }
            if (r < size && worse(heap[r], heap[least], score)) {
                least = r;
            }
            if (least == i) {
                return;
            }
            int t = heap[i];
            heap[i] = heap[least];
            heap[least] = t;
            i = least;
        }
    }

    /** The best {@code best} candidates by their stored vectors' exact scores, into out. */
    @SuppressWarnings("deprecation") // node ids: stable while the version's nodes live
    private void exact(Codes c, double[] q, int[] candidates, int best, int qi, List<Hit> out) {
        float[] exact = new float[candidates.length];
        for (int i = 0; i < candidates.length; i++) {
            int row = candidates[i];
            double[] vec = Props.doubles(tx.getNodeById(c.node[row]).getProperty("vec", null), "vec");
            if (vec.length != q.length) {
                throw new IllegalStateException(
                        "kgrag.nearest: row " + row + " has " + vec.length + " dimensions, the query "
                                + q.length);
            }
            double s = 0;
            for (int j = 0; j < q.length; j++) {
                s += vec[j] * q[j];
            }
            exact[i] = (float) s;
        }
        Integer[] order = new Integer[candidates.length];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        Arrays.sort(
                order,
                (a, b) ->
                        exact[a] != exact[b]
                                ? Float.compare(exact[b], exact[a])
                                : Integer.compare(candidates[a], candidates[b]));
        for (int i = 0; i < Math.min(best, order.length); i++) {
            out.add(new Hit(qi, candidates[order[i]], exact[order[i]]));
        }
    }

    @SuppressWarnings("deprecation")
    private Codes read(String label, String codebook, String kind, int rows) {
        Node book = tx.findNode(Label.label(codebook), "kind", kind);
        if (book == null) {
            throw new IllegalStateException("kgrag.nearest: no codebook of " + kind + " in " + codebook);
        }
        int m = ((Number) book.getProperty("m")).intValue();
        int sub = ((Number) book.getProperty("sub")).intValue();
        double[] centroids = Props.doubles(book.getProperty("centroids", null), "centroids");
        if (centroids.length != m * 16 * sub) {
            throw new IllegalStateException("kgrag.nearest: the codebook of " + kind + " is malformed");
        }
        float[] cent = new float[centroids.length];
        for (int i = 0; i < cent.length; i++) {
            cent[i] = (float) centroids[i];
        }
        int width = (m + 1) / 2;
        byte[] codes = new byte[Math.multiplyExact(rows, width)];
        long[] node = new long[rows];
        boolean[] seen = new boolean[rows];
        try (ResourceIterator<Node> nodes = tx.findNodes(Label.label(label))) {
            while (nodes.hasNext()) {
                Node x = nodes.next();
                if (!(x.getProperty("row", null) instanceof Long r) || r < 0) {
                    continue;
                }
                if (r >= rows) {
                    throw new IllegalArgumentException(
                            "kgrag.nearest: " + label + " has row " + r + " beyond n = " + rows);
                }
                if (!(x.getProperty("pq", null) instanceof byte[] code) || code.length != width) {
                    throw new IllegalStateException("kgrag.nearest: row " + r + " of " + label + " has no code");
                }
                System.arraycopy(code, 0, codes, (int) (r * width), width);
                node[(int) (long) r] = x.getId();
                seen[(int) (long) r] = true;
            }
        }
        for (int i = 0; i < rows; i++) {
            if (!seen[i]) {
                throw new IllegalStateException("kgrag.nearest: " + label + " lacks row " + i);
            }
        }
        return new Codes(cent, m, sub, codes, node);
    }
}
