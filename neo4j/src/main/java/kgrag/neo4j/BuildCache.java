package kgrag.neo4j;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * What kgrag's procedures keep between calls, per build of a published version: a
 * version's nodes do not change once published, and a key names the build (the label
 * and the version's creation stamp), so a label written again by another build is
 * another entry. Least recently used first out; at most {@link #BUDGET} numbers in all
 * (system property kgrag.cache.numbers, default 64 Mi, 256 MiB of floats; 0 keeps
 * nothing), beyond which the procedures read from the store each time.
 */
final class BuildCache {
    static final long BUDGET = Long.getLong("kgrag.cache.numbers", 64L << 20);

    private static final Map<String, Entry> BY_KEY = new LinkedHashMap<>(16, 0.75f, true);
    private static long held;

    private BuildCache() {}

    /** A cached value and the numbers it holds. */
    static final class Entry {
        final Object value;
        long numbers;

        Entry(Object value) {
            this.value = value;
        }
    }

    /** Per-row values of one build, kept as they are first read: row i's at i, null until
     * kept; each counted against the budget as it is kept (what does not fit is read
     * again next time). */
    static final class Rows<T> {
        private final String key;
        private final Object[] values;

        private Rows(String key, int size) {
            this.key = key;
            values = new Object[size];
        }

        /** The rows kept under key for one build (none without a build: read each time). */
        @SuppressWarnings("unchecked")
        static <T> Rows<T> of(String key, String build, int size) {
            if (build.isEmpty()) {
                return new Rows<>(key, 0);
            }
            return BuildCache.get(key, Rows.class, size, () -> new Rows<T>(key, size));
        }

        /** Row i's value, or null when it is not kept. */
        @SuppressWarnings("unchecked")
        T get(int i) {
            return i < values.length ? (T) values[i] : null;
        }

        /** Keep row i's value (final-field objects only: safely published), room allowing. */
        void keep(int i, T value, long numbers) {
            if (i < values.length && grow(key, numbers)) {
                values[i] = value;
            }
        }
    }

    /** The value kept under key, made by make (and kept, room allowing, counting numbers
     * against the budget) when missing. */
    static <T> T get(String key, Class<T> type, long numbers, Supplier<T> make) {
        synchronized (BuildCache.class) {
            Entry found = BY_KEY.get(key);
            if (found != null && type.isInstance(found.value)) {
                return type.cast(found.value);
            }
        }
        T value = make.get();
        synchronized (BuildCache.class) {
            if (BUDGET > 0 && !BY_KEY.containsKey(key)) {
                BY_KEY.put(key, new Entry(value));
                if (!grow(key, numbers)) {
                    BY_KEY.remove(key);
                }
            }
        }
        return value;
    }

    /** Count numbers more against key's entry; false (nothing counted) when they do not
     * fit even after letting the least recently used other entries go. */
    static synchronized boolean grow(String key, long numbers) {
        Entry entry = BY_KEY.get(key);
        if (entry == null || numbers > BUDGET) {
            return false;
        }
        Iterator<Map.Entry<String, Entry>> eldest = BY_KEY.entrySet().iterator();
        while (held + numbers > BUDGET && eldest.hasNext()) {
            Map.Entry<String, Entry> e = eldest.next();
            if (!e.getKey().equals(key)) {
                held -= e.getValue().numbers;
                eldest.remove();
            }
        }
        if (held + numbers > BUDGET) {
            return false;
        }
        held += numbers;
        entry.numbers += numbers;
        return true;
    }
}
