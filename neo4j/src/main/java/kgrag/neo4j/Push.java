package kgrag.neo4j;

import java.util.Arrays;
import java.util.List;
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
 * kgrag's PageRank push, run in the database: the rounds read the walk columns of the
 * active vertices from the vertices' nodes ({@code walk}: the rows, {@code walk_w}: the
 * weights, a column of M = A D^-1), so a local search asks one query for its walk instead
 * of a query per round that ships every active column to the client.
 *
 * <p>The arithmetic is kgrag.store.kernels.pushed_pagerank's, in float32 and in its order
 * (the active vertices ascending, each column's entries as stored, each product rounded
 * then summed into the vertex's entry), so both give the same mass to the bit:
 *
 * <pre>
 * p = 0; x = r
 * each round: p += (1 - d) x; active = {v : x[v] &gt; eps}; x = d (M[:, active] x[active])
 * </pre>
 *
 * <p>Registered by the launcher; a server a team runs takes the launcher's jar in its
 * plugins folder (kgrag falls back to pushing from the client where it is missing).
 */
public final class Push {
    @Context public Transaction tx;

    /** The mass of every vertex (float32, little-endian: one value the driver decodes
     * at once, not a list of n), and how many columns were read from the store. */
    public static final class Mass {
        public byte[] mass;
        public long reads;

        public Mass(byte[] mass, long reads) {
            this.mass = mass;
            this.reads = reads;
        }
    }

    @Procedure(name = "kgrag.push", mode = Mode.READ)
    @Description(
            "kgrag.push(label, vertices, reset, n, damping, eps, rounds, build): approximate"
                    + " personalized PageRank over the walk columns of label's nodes (keyed by"
                    + " vertex); reset is the normalised reset mass of vertices; with build"
                    + " (a stamp of the version) the columns read are kept for later calls")
    public Stream<Mass> push(
            @Name("label") String label,
            @Name("vertices") List<Long> vertices,
            @Name("reset") List<Double> reset,
            @Name("n") long n,
            @Name("damping") double damping,
            @Name("eps") double eps,
            @Name("rounds") long rounds,
            @Name(value = "build", defaultValue = "") String build) {
        if (vertices.size() != reset.size()) {
            throw new IllegalArgumentException("kgrag.push: vertices and reset differ in length");
        }
        int size = Props.rows("kgrag.push", n);
        Label by = Label.label(label);
        String key = "walk:" + label + "@" + build + "/" + size;
        BuildCache.Rows<Column> cache = BuildCache.Rows.of(key, build, size);
        float d = (float) damping;
        float keep = (float) (1.0 - damping);
        float threshold = (float) eps;
        float[] p = new float[size];
        float[] x = new float[size];
        float[] y = new float[size];
        boolean[] inY = new boolean[size];
        int[] live = new int[size]; // the vertices where x may be nonzero, each once
        int nLive = 0;
        for (int i = 0; i < vertices.size(); i++) {
            int v = Props.index("kgrag.push", "vertex", vertices.get(i), size);
            if (!inY[v]) {
                inY[v] = true;
                live[nLive++] = v;
            }
            x[v] = (float) (double) reset.get(i);
        }
        for (int i = 0; i < nLive; i++) {
            inY[live[i]] = false;
        }
        int[] active = new int[size];
        int[] touched = new int[size];
        long reads = 0;
        for (long round = 0; round < rounds; round++) {
            int nActive = 0;
            for (int i = 0; i < nLive; i++) {
                int v = live[i];
                p[v] += keep * x[v];
                if (x[v] > threshold) {
                    active[nActive++] = v;
                }
            }
            if (nActive == 0) {
                break;
            }
            Arrays.sort(active, 0, nActive); // numpy's flatnonzero order
            int nTouched = 0;
            for (int a = 0; a < nActive; a++) {
                int v = active[a];
                Column column = cache.get(v);
                if (column == null) {
                    column = read(by, v, size);
                    reads++;
                    cache.keep(v, column, 2L * column.rows.length + 4);
                }
                float xv = x[v];
                int[] rows = column.rows;
                float[] weights = column.weights;
                for (int e = 0; e < rows.length; e++) {
                    int u = rows[e];
                    if (!inY[u]) {
                        inY[u] = true;
                        touched[nTouched++] = u;
                    }
                    y[u] += weights[e] * xv; // scipy's csc product, in float32
                }
            }
            for (int i = 0; i < nLive; i++) {
                x[live[i]] = 0f;
            }
            for (int i = 0; i < nTouched; i++) {
                int u = touched[i];
                x[u] = d * y[u];
                y[u] = 0f;
                inY[u] = false;
                live[i] = u;
            }
            nLive = nTouched;
        }
        java.nio.ByteBuffer out =
                java.nio.ByteBuffer.allocate(4 * size).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        out.asFloatBuffer().put(p);
        return Stream.of(new Mass(out.array(), reads));
    }

    /** One vertex's walk column. */
    static final class Column {
        final int[] rows;
        final float[] weights;

        Column(int[] rows, float[] weights) {
            this.rows = rows;
            this.weights = weights;
        }
    }

    private Column read(Label by, int v, int size) {
        Node node = tx.findNode(by, "vertex", (long) v);
        if (node == null) {
            return new Column(new int[0], new float[0]);
        }
        long[] rows = Props.longs(node.getProperty("walk", null), "walk");
        double[] weights = Props.doubles(node.getProperty("walk_w", null), "walk_w");
        if (rows.length != weights.length) {
            throw new IllegalStateException(
                    "kgrag.push: vertex " + v + " has walk and walk_w of different lengths");
        }
        int[] r = new int[rows.length];
        float[] w = new float[rows.length];
        for (int e = 0; e < rows.length; e++) {
            r[e] = Props.index("kgrag.push", "vertex", rows[e], size);
            w[e] = (float) weights[e]; // stored from float32: exact
        }
        return new Column(r, w);
    }

}
