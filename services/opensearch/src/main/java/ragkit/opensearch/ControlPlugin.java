package ragkit.opensearch;

import java.util.List;
import java.util.function.Supplier;

import org.opensearch.cluster.metadata.IndexNameExpressionResolver;
import org.opensearch.cluster.node.DiscoveryNodes;
import org.opensearch.common.settings.ClusterSettings;
import org.opensearch.common.settings.IndexScopedSettings;
import org.opensearch.common.settings.Settings;
import org.opensearch.common.settings.SettingsFilter;
import org.opensearch.core.rest.RestStatus;
import org.opensearch.node.Node;
import org.opensearch.plugins.ActionPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.rest.BaseRestHandler;
import org.opensearch.rest.BytesRestResponse;
import org.opensearch.rest.RestChannel;
import org.opensearch.rest.RestController;
import org.opensearch.rest.RestHandler;
import org.opensearch.rest.RestRequest;
import org.opensearch.transport.client.node.NodeClient;

/**
 * Test-only REST endpoints to stop and start nodes of the in-JVM cluster, served by every node:
 * <ul>
 *   <li>{@code GET  /_ragkit/nodes} - ids, names, running state and HTTP URLs of all nodes</li>
 *   <li>{@code POST /_ragkit/nodes/{id}/_stop} - close node {id} (its data folder is kept)</li>
 *   <li>{@code POST /_ragkit/nodes/{id}/_start} - start node {id} again; it rejoins the cluster</li>
 * </ul>
 * Stop/start answer when done, except when a node is asked to stop itself: it answers 202 first, then stops.
 */
public class ControlPlugin extends Plugin implements ActionPlugin {

    private final String localNodeName;

    public ControlPlugin(Settings settings) {
        this.localNodeName = Node.NODE_NAME_SETTING.get(settings);
    }

    @Override
    public List<RestHandler> getRestHandlers(Settings settings, RestController restController, ClusterSettings clusterSettings,
                                             IndexScopedSettings indexScopedSettings, SettingsFilter settingsFilter,
                                             IndexNameExpressionResolver resolver, Supplier<DiscoveryNodes> nodesInCluster) {
        return List.of(new Handler());
    }

    private final class Handler extends BaseRestHandler {
        @Override
        public String getName() {
            return "ragkit_node_control";
        }

        @Override
        public List<Route> routes() {
            return List.of(
                new Route(RestRequest.Method.GET, "/_ragkit/nodes"),
                new Route(RestRequest.Method.POST, "/_ragkit/nodes/{id}/_stop"),
                new Route(RestRequest.Method.POST, "/_ragkit/nodes/{id}/_start"));
        }

        @Override
        protected RestChannelConsumer prepareRequest(RestRequest request, NodeClient client) {
            if (request.method() == RestRequest.Method.GET) {
                return channel -> reply(channel, RestStatus.OK);
            }
            int id = request.paramAsInt("id", -1);
            boolean stop = request.path().endsWith("/_stop");
            boolean self = stop && ("node-" + id).equals(localNodeName);
            // Never block a network thread: stopping/starting a node takes seconds.
            return channel -> new Thread(() -> {
                boolean answered = false;
                try {
                    if (self) { // answer before this node's HTTP server goes away
                        if (!Launcher.isRunning(id)) {
                            throw new IllegalStateException("node " + id + " is not running");
                        }
                        channel.sendResponse(new BytesRestResponse(RestStatus.ACCEPTED, "application/json",
                            "{\"stopping\":" + id + "}"));
                        answered = true;
                        Launcher.stopNode(id);
                    } else if (stop) {
                        Launcher.stopNode(id);
                    } else {
                        Launcher.startNode(id);
                    }
                    if (!answered) {
                        reply(channel, RestStatus.OK);
                    }
                } catch (Exception e) {
                    if (answered) {
                        e.printStackTrace();
                    } else {
                        channel.sendResponse(new BytesRestResponse(RestStatus.CONFLICT, "application/json",
                            "{\"error\":\"" + String.valueOf(e.getMessage()).replace("\"", "'") + "\"}"));
                    }
                }
            }, "ragkit-node-control").start();
        }

        private void reply(RestChannel channel, RestStatus status) {
            channel.sendResponse(new BytesRestResponse(status, "application/json", Launcher.describe()));
        }
    }
}
