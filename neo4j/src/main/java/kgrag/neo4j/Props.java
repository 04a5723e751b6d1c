package kgrag.neo4j;

import java.util.Arrays;

/** Node properties the procedures read, as Java arrays whatever width they were stored in. */
final class Props {
    private Props() {}

    /** A procedure's row count n as an int (an array size), or a clear error. */
    static int rows(String procedure, long n) {
        if (n < 0 || n > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(procedure + ": n out of range: " + n);
        }
        return (int) n;
    }

    /** A stored row or vertex number v as an index below size, or a clear error. */
    static int index(String procedure, String what, long v, int size) {
        if (v < 0 || v >= size) {
            throw new IllegalArgumentException(
                    procedure + ": " + what + " " + v + " outside 0.." + (size - 1));
        }
        return (int) v;
    }

    /** A list of integers (absent: empty). */
    static long[] longs(Object value, String name) {
        if (value == null) {
            return new long[0];
        }
        if (value instanceof long[] a) {
            return a;
        }
        if (value instanceof int[] a) {
            return Arrays.stream(a).asLongStream().toArray();
        }
        throw new IllegalStateException("kgrag: property " + name + " is not a list of integers");
    }

    /** A list of floats (absent: empty). */
    static double[] doubles(Object value, String name) {
        if (value == null) {
            return new double[0];
        }
        if (value instanceof double[] a) {
            return a;
        }
        if (value instanceof float[] a) {
            double[] out = new double[a.length];
            for (int i = 0; i < a.length; i++) {
                out[i] = a[i];
            }
            return out;
        }
        throw new IllegalStateException("kgrag: property " + name + " is not a list of floats");
    }
}
