package kgrag.neo4j;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.kernel.api.procedure.GlobalProcedures;
import org.neo4j.kernel.internal.GraphDatabaseAPI;

/**
 * Runs Neo4j Community in this process with Bolt on 127.0.0.1 and authentication off.
 *
 * <pre>java -cp CLASSPATH kgrag.neo4j.Launcher HOME [PORT] [PAGECACHE_MIB]</pre>
 *
 * With KGRAG_NEO4J_AUTH_PASSWORD in the environment, authentication is on instead and
 * the user neo4j has that password (as a server a team runs would have; the tests use
 * it to check how wrong credentials are reported).
 *
 * HOME holds the database files. PORT 0 (the default) takes a free port. Once the
 * database answers, the launcher writes its Bolt URI to HOME/bolt.uri (atomically)
 * and prints it as its last line; it stops cleanly on SIGTERM or SIGINT. It registers
 * kgrag's procedures ({@link Push}, {@link Similarity}, {@link Bm25}, {@link PathSearch},
 * {@link Nearest}), which a server a team runs loads from this jar in
 * its plugins folder.
 */
public final class Launcher {
    private Launcher() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 1 || args.length > 3) {
            System.err.println("usage: Launcher HOME [PORT] [PAGECACHE_MIB]");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int port = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        long pagecache = (args.length > 2 ? Long.parseLong(args[2]) : 512L) * 1024 * 1024;
        if (port == 0) {
            port = freePort();
        }
        String password = System.getenv("KGRAG_NEO4J_AUTH_PASSWORD");
        boolean auth = password != null && !password.isEmpty();
        Files.createDirectories(home);
        Path uriFile = home.resolve("bolt.uri");
        Files.deleteIfExists(uriFile);
        DatabaseManagementService dbms =
                new DatabaseManagementServiceBuilder(home)
                        .setConfig(BoltConnector.enabled, true)
                        .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
                        .setConfig(HttpConnector.enabled, false)
                        .setConfig(GraphDatabaseSettings.auth_enabled, auth)
                        .setConfig(GraphDatabaseSettings.pagecache_memory, pagecache)
                        .build();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime()
                .addShutdownHook(
                        new Thread(
                                () -> {
                                    try {
                                        Files.deleteIfExists(uriFile);
                                    } catch (IOException ignored) {
                                        // the file is advisory
                                    }
                                    dbms.shutdown();
                                    stopped.countDown();
                                }));
        if (auth) { // the embedded API is not authenticated: it sets the password
            dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME)
                    .executeTransactionally(
                            "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED",
                            java.util.Map.of("password", password));
        }
        GraphDatabaseService db = dbms.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME);
        // kgrag's procedures (kgrag.push); a server of its own loads them from this jar
        GlobalProcedures procedures =
                ((GraphDatabaseAPI) db).getDependencyResolver().resolveDependency(GlobalProcedures.class);
        procedures.registerProcedure(Push.class);
        procedures.registerProcedure(Similarity.class);
        procedures.registerProcedure(Bm25.class);
        procedures.registerProcedure(PathSearch.class);
        procedures.registerProcedure(Nearest.class);
        db.executeTransactionally("RETURN 1");
        String uri = "bolt://127.0.0.1:" + port;
        Path tmp = home.resolve("bolt.uri.tmp");
        Files.writeString(tmp, uri + "\n", StandardCharsets.UTF_8);
        Files.move(tmp, uriFile, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        System.out.println(uri);
        System.out.flush();
        stopped.await();
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            socket.setReuseAddress(true);
            return socket.getLocalPort();
        }
    }
}
