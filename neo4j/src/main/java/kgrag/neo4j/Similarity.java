package kgrag.neo4j;

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
 * The cosine of a query vector with every row of a vector kind, in row order: the one
 * full scan a local search makes (the stored vectors are unit length, so the cosine is
 * the dot product), computed in double precision and rounded to float. The matrix of
 * one build is kept after the first call (see {@link BuildCache}); a Cypher scan with
 * vector.similarity.cosine costs ~20 µs a row, this ~0.1 µs once the matrix is held.
 */
public final class Similarity {
    @Context public Transaction tx;

    /** The scores, row i at i (float32, little-endian). */
    public static final class Scores {
        public byte[] score;

        public Scores(byte[] score) {
            this.score = score;
        }
    }

    /** A kind's vectors by row, one after another. */
    static final class Matrix {
        final float[] values;
        final int dim;

        Matrix(float[] values, int dim) {
            this.values = values;
            this.dim = dim;
        }
    }

    @Procedure(name = "kgrag.similarity", mode = Mode.READ)
    @Description(
            "kgrag.similarity(label, query, n, build): the dot product of query with the vec"
                    + " of label's nodes by row (0..n-1); with build (a stamp of the version)"
                    + " the matrix is kept for later calls")
    public Stream<Scores> similarity(
            @Name("label") String label,
            @Name("query") List<Double> query,
            @Name("n") long n,
            @Name(value = "build", defaultValue = "") String build) {
        int rows = Props.rows("kgrag.similarity", n);
        int dim = query.size();
        String key = "vec:" + label + "@" + build + "/" + rows + "x" + dim;
        Matrix m =
                build.isEmpty()
                        ? read(label, rows, dim)
                        : BuildCache.get(
                                key, Matrix.class, (long) rows * dim, () -> read(label, rows, dim));
        double[] q = new double[dim];
        for (int j = 0; j < dim; j++) {
            q[j] = query.get(j);
        }
        float[] out = new float[rows];
        float[] v = m.values;
        for (int i = 0; i < rows; i++) {
            double s = 0;
            int at = i * dim;
            for (int j = 0; j < dim; j++) {
                s += v[at + j] * q[j];
            }
            out[i] = (float) s;
        }
        java.nio.ByteBuffer bytes =
                java.nio.ByteBuffer.allocate(4 * rows).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        bytes.asFloatBuffer().put(out);
        return Stream.of(new Scores(bytes.array()));
    }

    private Matrix read(String label, int rows, int dim) {
        float[] values = new float[Math.multiplyExact(rows, dim)];
        boolean[] seen = new boolean[rows];
        try (ResourceIterator<Node> nodes = tx.findNodes(Label.label(label))) {
            while (nodes.hasNext()) {
                Node node = nodes.next();
                Object row = node.getProperty("row", null);
                if (!(row instanceof Long r) || r < 0) {
                    continue;
                }
                if (r >= rows) {
                    throw new IllegalArgumentException(
                            "kgrag.similarity: " + label + " has row " + r + " beyond n = " + rows);
                }
                float[] vec = floats(node.getProperty("vec", null));
                if (vec.length != dim) {
                    throw new IllegalArgumentException(
                            "kgrag.similarity: row " + r + " of " + label + " has " + vec.length
                                    + " dimensions, the query " + dim);
                }
                System.arraycopy(vec, 0, values, (int) (r * dim), dim);
                seen[(int) (long) r] = true;
            }
        }
        for (int i = 0; i < rows; i++) {
            if (!seen[i]) {
                throw new IllegalStateException("kgrag.similarity: " + label + " lacks row " + i);
            }
        }
        return new Matrix(values, dim);
    }

    private static float[] floats(Object value) {
        if (value instanceof float[] a) {
            return a;
        }
        if (value instanceof double[] a) {
            float[] out = new float[a.length];
            for (int i = 0; i < a.length; i++) {
                out[i] = (float) a[i];
            }
            return out;
        }
        return new float[0];
    }
}
