package ragkit.opensearch;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.opensearch.Version;
import org.opensearch.action.admin.cluster.health.ClusterHealthResponse;
import org.opensearch.common.settings.Settings;
import org.opensearch.common.unit.TimeValue;
import org.opensearch.core.common.transport.TransportAddress;
import org.opensearch.env.Environment;
import org.opensearch.http.HttpServerTransport;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.plugins.Plugin;
import org.opensearch.plugins.PluginInfo;
import org.opensearch.transport.TransportService;

/**
 * Starts one or more real OpenSearch nodes in this JVM, with modules/plugins taken from the classpath.
 *
 * <pre>
 *   java ... ragkit.opensearch.Launcher [PORT|auto] [--nodes N]
 * </pre>
 *
 * PORT is node-1's HTTP port (default 9200; 0 or "auto" = any free port). Everything binds to 127.0.0.1,
 * data lives in a temp folder deleted at exit. When the cluster is yellow/green, exactly one line
 * {@code OPENSEARCH_URL=http://127.0.0.1:PORT} goes to stdout; logs go to stderr.
 * {@link ControlPlugin} adds {@code GET /_ragkit/nodes} and {@code POST /_ragkit/nodes/{id}/_stop|_start}.
 */
public final class Launcher {

    /** Modules and plugins (all on the classpath), with the names a distribution gives them. */
    private static final List<Spec> PLUGINS = List.of(
        new Spec("transport-netty4", "org.opensearch.transport.Netty4ModulePlugin"),
        new Spec("analysis-common", "org.opensearch.analysis.common.CommonAnalysisModulePlugin"),
        new Spec("analysis-kuromoji", "org.opensearch.plugin.analysis.kuromoji.AnalysisKuromojiPlugin"),
        new Spec("analysis-nori", "org.opensearch.plugin.analysis.nori.AnalysisNoriPlugin"),
        new Spec("lang-painless", "org.opensearch.painless.PainlessModulePlugin"),
        new Spec("opensearch-knn", "org.opensearch.knn.plugin.KNNPlugin", "lang-painless"),
        new Spec("ragkit-node-control", ControlPlugin.class.getName()));

    private record Spec(String name, String className, String... extendedPlugins) {}

    private static final String CLUSTER_NAME = "ragkit-" + Long.toHexString(System.nanoTime());
    // concurrent maps: describe() must never wait for the lock that startNode() holds for seconds
    private static final Map<Integer, Node> RUNNING = new ConcurrentSkipListMap<>();
    private static final Map<Integer, Integer> HTTP_PORTS = new ConcurrentSkipListMap<>();
    private static List<PluginInfo> plugins;
    private static Path baseDir;
    private static int nodeCount = 1;
    private static int firstPort = 9200;

    private Launcher() {}

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--nodes" -> nodeCount = Integer.parseInt(args[++i]);
                case "--port" -> firstPort = parsePort(args[++i]);
                default -> firstPort = parsePort(args[i]);
            }
        }
        baseDir = Files.createTempDirectory("ragkit-opensearch-");
        Runtime.getRuntime().addShutdownHook(new Thread(Launcher::shutdown, "ragkit-shutdown"));
        plugins = loadPlugins();
        try {
            for (int id = 1; id <= nodeCount; id++) {
                startNode(id);
            }
            ClusterHealthResponse health = anyNode().client().admin().cluster().prepareHealth()
                .setWaitForYellowStatus()
                .setWaitForNodes(Integer.toString(nodeCount))
                .setTimeout(TimeValue.timeValueSeconds(150))
                .get();
            if (health.isTimedOut()) {
                throw new IllegalStateException("cluster not ready: " + health.getStatus());
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
        System.out.println("OPENSEARCH_URL=" + httpUrl(1));
        System.out.flush();
        new CountDownLatch(1).await(); // node threads are daemons: keep the JVM alive until a signal
    }

    private static int parsePort(String s) {
        return s.equals("auto") ? 0 : Integer.parseInt(s);
    }

    private static List<PluginInfo> loadPlugins() throws ClassNotFoundException {
        List<PluginInfo> infos = new ArrayList<>();
        for (Spec spec : PLUGINS) {
            Class<? extends Plugin> c = Class.forName(spec.className()).asSubclass(Plugin.class);
            String version = Objects.requireNonNullElse(c.getPackage().getImplementationVersion(), Version.CURRENT.toString());
            infos.add(new PluginInfo(spec.name(), "classpath plugin", version, Version.CURRENT, "21", c.getName(),
                List.of(spec.extendedPlugins()), false));
        }
        return infos;
    }

    /** Starts node {@code id} (1-based), reusing its data folder and HTTP port if it ran before. */
    static synchronized void startNode(int id) throws Exception {
        if (id < 1 || id > nodeCount) {
            throw new IllegalArgumentException("no node " + id + " (nodes are 1.." + nodeCount + ")");
        }
        if (RUNNING.containsKey(id)) {
            throw new IllegalStateException("node " + id + " is already running");
        }
        Path home = baseDir.resolve("node-" + id);
        Files.createDirectories(home.resolve("config"));
        int httpPort = HTTP_PORTS.getOrDefault(id, id == 1 ? firstPort : 0);
        Settings.Builder settings = Settings.builder()
            .put("cluster.name", CLUSTER_NAME)
            .put("node.name", "node-" + id)
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("network.host", "127.0.0.1")
            .put("http.port", httpPort)
            .put("transport.port", 0)
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("indices.breaker.total.use_real_memory", false);
        if (nodeCount == 1) {
            settings.put("discovery.type", "single-node");
        } else {
            settings.putList("cluster.initial_cluster_manager_nodes", "node-1");
            settings.putList("discovery.seed_hosts", RUNNING.values().stream()
                .map(n -> n.injector().getInstance(TransportService.class).boundAddress().publishAddress())
                .map(TransportAddress::toString)
                .toList());
        }
        Environment env = InternalSettingsPreparer.prepareEnvironment(settings.build(), Map.of(), null, () -> "node-" + id);
        Node node = new EmbeddedNode(env, plugins);
        try {
            node.start();
        } catch (Exception e) {
            node.close();
            throw e;
        }
        RUNNING.put(id, node);
        HTTP_PORTS.put(id, node.injector().getInstance(HttpServerTransport.class).boundAddress().publishAddress().getPort());
    }

    /** Stops node {@code id}; its data folder stays so it can be started again. */
    static void stopNode(int id) throws IOException, InterruptedException {
        Node node;
        synchronized (Launcher.class) {
            node = RUNNING.remove(id);
        }
        if (node == null) {
            throw new IllegalStateException("node " + id + " is not running");
        }
        node.close();
        node.awaitClose(60, TimeUnit.SECONDS);
    }

    static boolean isRunning(int id) {
        return RUNNING.containsKey(id);
    }

    static String describe() {
        StringBuilder out = new StringBuilder("{\"cluster_name\":\"").append(CLUSTER_NAME).append("\",\"nodes\":[");
        for (int id = 1; id <= nodeCount; id++) {
            out.append(id > 1 ? "," : "")
                .append("{\"id\":").append(id)
                .append(",\"name\":\"node-").append(id)
                .append("\",\"running\":").append(RUNNING.containsKey(id))
                .append(",\"url\":").append(HTTP_PORTS.containsKey(id) ? "\"" + httpUrl(id) + "\"" : "null")
                .append('}');
        }
        return out.append("]}").toString();
    }

    private static String httpUrl(int id) {
        return "http://127.0.0.1:" + HTTP_PORTS.get(id);
    }

    private static Node anyNode() {
        return RUNNING.values().iterator().next();
    }

    private static void shutdown() {
        List<Node> nodes;
        synchronized (Launcher.class) {
            nodes = new ArrayList<>(RUNNING.values());
            RUNNING.clear();
        }
        for (Node node : nodes) {
            try {
                node.close();
                node.awaitClose(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                System.err.println("[ragkit] error while closing a node: " + e);
            }
        }
        if (baseDir != null) {
            try (Stream<Path> paths = Files.walk(baseDir)) {
                paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (IOException | UncheckedIOException e) {
                System.err.println("[ragkit] could not delete " + baseDir + ": " + e);
            }
        }
    }

    /** A node whose plugins come from the classpath instead of a plugins/ folder. */
    private static final class EmbeddedNode extends Node {
        EmbeddedNode(Environment env, List<PluginInfo> classpathPlugins) {
            super(env, classpathPlugins, true);
        }
    }
}
