package kgrag.neo4j;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
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
 * kgrag's provenance path search, run in the database: multi-source shortest paths over
 * the relations stored on the entity nodes ({@code rel}: the neighbours' rows, {@code
 * rel_len}: the lengths), reading each round's entities and the passage counts ({@code
 * a_chunks}) of the entities they reach beside the data, so a local search asks one query
 * for its paths instead of two a round.
 *
 * <p>The rules are kgrag.store.kernels.path_rounds', step for step, so both give the same
 * lengths and predecessors: rounds of equal length (lengths are multiples of 0.5, exact in
 * a double), each settling its entities in ascending row order; a round offers every edge
 * of its entities (as stored) whose end is within the limit, a hub's (more than
 * hubDegree relations) only from a seed; an end more than generic passages mention costs
 * toll more; the best offer to an entity is the shortest, then the one from the better
 * seed, then from the lower row. It stops when an entity of every group is settled (with
 * groups), past maxReached settled entities, or before a round that would bring the
 * offers past maxOffers.
 *
 * <p>Registered by the launcher; a server a team runs takes the launcher's jar in its
 * plugins folder (kgrag searches from the client where it is missing).
 */
public final class PathSearch {
    @Context public Transaction tx;

    /** Each reached entity's row, path length and predecessor row (-9999 at a seed),
     * and how many entity nodes were read from the store. */
    public static final class Found {
        public List<Long> rows;
        public List<Double> lengths;
        public List<Long> preds;
        public long reads;

        public Found(List<Long> rows, List<Double> lengths, List<Long> preds, long reads) {
            this.rows = rows;
            this.lengths = lengths;
            this.preds = preds;
            this.reads = reads;
        }
    }

    /** One entity's relations (neighbour rows and lengths, as stored) and how many
     * passages mention it. */
    static final class Entity {
        final int[] rel;
        final double[] len;
        final long chunks;

        Entity(int[] rel, double[] len, long chunks) {
            this.rel = rel;
            this.len = len;
            this.chunks = chunks;
        }
    }

    private static final long SEED = -9999L;

    @Procedure(name = "kgrag.paths", mode = Mode.READ)
    @Description(
            "kgrag.paths(label, seeds, groups, useGroups, limit, hubDegree, maxReached, maxOffers,"
                    + " generic, toll, n, build): shortest paths from the seed entity rows (best"
                    + " first) over the rel / rel_len lists of label's nodes (keyed by row), as"
                    + " kgrag's path search finds them; with build (a stamp of the version) the"
                    + " entities read are kept for later calls")
    public Stream<Found> paths(
            @Name("label") String label,
            @Name("seeds") List<Long> seeds,
            @Name("groups") List<List<Long>> groups,
            @Name("useGroups") boolean useGroups,
            @Name("limit") double limit,
            @Name("hubDegree") long hubDegree,
            @Name("maxReached") long maxReached,
            @Name("maxOffers") long maxOffers,
            @Name("generic") double generic,
            @Name("toll") double toll,
            @Name("n") long n,
            @Name(value = "build", defaultValue = "") String build) {
        int size = Props.rows("kgrag.paths", n);
        Label by = Label.label(label);
        String key = "paths:" + label + "@" + build + "/" + size;
        BuildCache.Rows<Entity> cache = BuildCache.Rows.of(key, build, size);
        long[] reads = {0};
        Map<Integer, Double> dist = new HashMap<>();
        Map<Integer, Integer> pred = new HashMap<>();
        Map<Integer, Integer> root = new HashMap<>(); // the rank of the seed a path starts at
        TreeMap<Double, List<Integer>> pending = new TreeMap<>();
        List<Integer> first = new ArrayList<>();
        for (int i = 0; i < seeds.size(); i++) {
            int v = Props.index("kgrag.paths", "entity", seeds.get(i), size);
            dist.put(v, 0.0);
            pred.put(v, (int) SEED);
            root.put(v, i); // a repeated seed takes its last rank, as the client's dict does
            first.add(v);
        }
        pending.put(0.0, first);
        // the groups each entity is a member of, and how many groups have a settled member
        Map<Integer, List<Integer>> memberOf = new HashMap<>();
        int nGroups = useGroups && groups != null ? groups.size() : 0;
        for (int g = 0; g < nGroups; g++) {
            for (Long x : groups.get(g)) {
                int member = Props.index("kgrag.paths", "entity", x, size);
                memberOf.computeIfAbsent(member, k -> new ArrayList<>()).add(g);
            }
        }
        boolean[] met = new boolean[nGroups];
        int nMet = 0;
        Set<Integer> settled = new HashSet<>();
        long offers = 0;
        while (!pending.isEmpty()) {
            double length = pending.firstKey();
            if (length > limit) {
                break;
            }
            int[] batch =
                    pending.remove(length).stream()
                            .filter(v -> !settled.contains(v) && dist.get(v) == length)
                            .mapToInt(Integer::intValue)
                            .sorted()
                            .distinct()
                            .toArray();
            for (int v : batch) {
                settled.add(v);
                for (int g : memberOf.getOrDefault(v, List.of())) {
                    if (!met[g]) {
                        met[g] = true;
                        nMet++;
                    }
                }
            }
            if (useGroups && nMet == nGroups) {
                break;
            }
            if (settled.size() > maxReached) { // the rest is too far to explain anything
                break;
            }
            // this round's offers: (end, length, rank of the seed, from)
            List<double[]> offered = new ArrayList<>();
            long kept = 0;
            for (int u : batch) {
                Entity e = entity(by, u, size, cache, reads);
                // a hub (a concept hundreds of entities co-occur with) is an end, not a way
                if (e.rel.length > hubDegree && length != 0.0) {
                    continue;
                }
                int rank = root.get(u);
                for (int i = 0; i < e.rel.length; i++) {
                    int v = e.rel[i];
                    double tolled = entity(by, v, size, cache, reads).chunks > generic ? toll : 0.0;
                    double d = length + e.len[i] + tolled;
                    if (d <= limit) {
                        offered.add(new double[] {v, d, rank, u});
                        kept++;
                    }
                }
            }
            offers += kept;
            if (offers > maxOffers && length > 0) { // this round would read too far
                break;
            }
            // the best offer to each entity: shortest, then from the better seed, lower row
            offered.sort(
                    (a, b) -> {
                        for (int i = 0; i < 4; i++) {
                            int c = Double.compare(a[i], b[i]);
                            if (c != 0) {
                                return c;
                            }
                        }
                        return 0;
                    });
            int last = -1;
            for (double[] o : offered) {
                int x = (int) o[0];
                if (x == last) {
                    continue;
                }
                last = x;
                if (settled.contains(x)) {
                    continue;
                }
                double dx = o[1];
                int rx = (int) o[2];
                Double before = dist.get(x);
                if (before == null || dx < before || (dx == before && rx < root.get(x))) {
                    dist.put(x, dx);
                    pred.put(x, (int) o[3]);
                    root.put(x, rx);
                    pending.computeIfAbsent(dx, k -> new ArrayList<>()).add(x);
                }
            }
        }
        int[] reached = dist.keySet().stream().mapToInt(Integer::intValue).sorted().toArray();
        List<Long> rows = new ArrayList<>(reached.length);
        List<Double> lengths = new ArrayList<>(reached.length);
        List<Long> preds = new ArrayList<>(reached.length);
        for (int v : reached) {
            rows.add((long) v);
            lengths.add(dist.get(v));
            preds.add((long) pred.get(v));
        }
        return Stream.of(new Found(rows, lengths, preds, reads[0]));
    }

    private Entity entity(Label by, int v, int size, BuildCache.Rows<Entity> cache, long[] reads) {
        Entity found = cache.get(v);
        if (found != null) {
            return found;
        }
        Node node = tx.findNode(by, "row", (long) v);
        reads[0]++;
        if (node == null) {
            found = new Entity(new int[0], new double[0], 0L);
        } else {
            long[] rel = Props.longs(node.getProperty("rel", null), "rel");
            double[] len = Props.doubles(node.getProperty("rel_len", null), "rel_len");
            if (rel.length != len.length) {
                throw new IllegalStateException(
                        "kgrag.paths: entity " + v + " has rel and rel_len of different lengths");
            }
            int[] r = new int[rel.length];
            for (int i = 0; i < rel.length; i++) {
                r[i] = Props.index("kgrag.paths", "entity", rel[i], size);
            }
            Object chunks = node.getProperty("a_chunks", 0L);
            found = new Entity(r, len, ((Number) chunks).longValue());
        }
        cache.keep(v, found, 3L * found.rel.length + 2);
        return found;
    }

}
