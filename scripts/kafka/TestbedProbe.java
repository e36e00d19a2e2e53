// Readiness probe for scripts/testbed: checks many Kafka endpoints from one JVM, because starting
// a JVM per check costs seconds on a 2-core machine.
//
// Usage: TestbedProbe TIMEOUT_MS LABEL BOOTSTRAP CONFIG MIN_NODES [LABEL BOOTSTRAP CONFIG MIN_NODES ...]
//   CONFIG is a client properties file (security settings) or "-" for plain defaults.
//   MIN_NODES is how many brokers DescribeCluster must list (a multi-broker cluster is ready only
//   once every broker registered).
// For each endpoint it retries DescribeCluster until it succeeds or TIMEOUT_MS has passed overall.
// Prints "ok LABEL cluster.id=ID ms=N" per endpoint on stdout, the last error of each failed one on
// stderr, and exits 0 only when every endpoint answered.

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;

public final class TestbedProbe {
    /** Longest single attempt, so one stuck attempt cannot eat the whole budget. */
    private static final long ATTEMPT_MAX_MS = 5_000;
    /** Pause between rounds: brokers take seconds to start, polling faster only burns CPU. */
    private static final long ROUND_PAUSE_MS = 300;

    private static final class Endpoint {
        final String label;
        final Properties props;
        final int minNodes;
        String lastError = "not tried";

        Endpoint(String label, Properties props, int minNodes) {
            this.label = label;
            this.props = props;
            this.minNodes = minNodes;
        }
    }

    private TestbedProbe() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length < 5 || (args.length - 1) % 4 != 0) {
            System.err.println("usage: TestbedProbe TIMEOUT_MS LABEL BOOTSTRAP CONFIG MIN_NODES [LABEL BOOTSTRAP CONFIG MIN_NODES ...]");
            System.exit(2);
        }
        final long timeoutMs;
        try {
            timeoutMs = Long.parseLong(args[0]);
        } catch (NumberFormatException e) {
            System.err.println("TestbedProbe: TIMEOUT_MS is not a number: " + args[0]);
            System.exit(2);
            return;
        }
        List<Endpoint> pending = new ArrayList<>();
        for (int i = 1; i < args.length; i += 4) {
            final int minNodes;
            try {
                minNodes = Integer.parseInt(args[i + 3]);
            } catch (NumberFormatException e) {
                System.err.println("TestbedProbe: MIN_NODES of " + args[i] + " is not a number: " + args[i + 3]);
                System.exit(2);
                return;
            }
            try {
                pending.add(new Endpoint(args[i], clientProps(args[i], args[i + 1], args[i + 2]), minNodes));
            } catch (IOException e) {
                System.err.println("TestbedProbe: cannot read client config " + args[i + 2] + ": " + e);
                System.exit(2);
            }
        }

        final long startNs = System.nanoTime();
        final long deadlineNs = startNs + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (!pending.isEmpty()) {
            for (Iterator<Endpoint> it = pending.iterator(); it.hasNext(); ) {
                Endpoint ep = it.next();
                long remainingMs = TimeUnit.NANOSECONDS.toMillis(deadlineNs - System.nanoTime());
                if (remainingMs <= 0) {
                    break;
                }
                String clusterId = attempt(ep, Math.min(remainingMs, ATTEMPT_MAX_MS));
                if (clusterId != null) {
                    long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNs);
                    System.out.println("ok " + ep.label + " cluster.id=" + clusterId + " ms=" + tookMs);
                    System.out.flush();
                    it.remove();
                }
            }
            if (pending.isEmpty() || System.nanoTime() - deadlineNs >= 0) {
                break;
            }
            Thread.sleep(ROUND_PAUSE_MS);
        }
        for (Endpoint ep : pending) {
            System.err.println("TestbedProbe: " + ep.label + " did not answer within " + timeoutMs + " ms; last error: " + ep.lastError);
        }
        System.exit(pending.isEmpty() ? 0 : 1);
    }

    private static Properties clientProps(String label, String bootstrap, String configPath) throws IOException {
        Properties props = new Properties();
        if (!"-".equals(configPath)) {
            try (InputStream in = Files.newInputStream(Path.of(configPath))) {
                props.load(in);
            }
        }
        props.setProperty(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.setProperty(AdminClientConfig.CLIENT_ID_CONFIG, "strait-testbed-probe-" + label);
        // Fail fast and retry ourselves: the defaults would wait up to a minute on a dead port.
        props.setProperty(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        props.setProperty(AdminClientConfig.SOCKET_CONNECTION_SETUP_TIMEOUT_MS_CONFIG, "2000");
        props.setProperty(AdminClientConfig.SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS_CONFIG, "2000");
        props.setProperty(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "100");
        props.setProperty(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        props.setProperty(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        props.setProperty(AdminClientConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "500");
        return props;
    }

    /**
     * One DescribeCluster round trip; returns the cluster id once at least the endpoint's MIN_NODES
     * brokers are listed, or null after recording why not.
     */
    private static String attempt(Endpoint ep, long budgetMs) throws InterruptedException {
        Properties props = new Properties();
        props.putAll(ep.props);
        props.setProperty(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, Long.toString(Math.max(budgetMs, 1)));
        // A fresh client per attempt: after an authentication failure a client may keep failing.
        Admin admin;
        try {
            admin = Admin.create(props);
        } catch (RuntimeException e) {
            ep.lastError = "cannot create admin client: " + e;
            return null;
        }
        try {
            DescribeClusterResult result =
                admin.describeCluster(new DescribeClusterOptions().timeoutMs((int) Math.min(budgetMs, Integer.MAX_VALUE)));
            String clusterId = result.clusterId().get(budgetMs + 1_000, TimeUnit.MILLISECONDS);
            int nodes = result.nodes().get(budgetMs + 1_000, TimeUnit.MILLISECONDS).size();
            if (nodes < ep.minNodes) {
                ep.lastError = "only " + nodes + " of " + ep.minNodes + " brokers registered";
                return null;
            }
            return clusterId;
        } catch (ExecutionException e) {
            ep.lastError = String.valueOf(e.getCause());
            return null;
        } catch (TimeoutException e) {
            ep.lastError = "no answer within " + budgetMs + " ms";
            return null;
        } finally {
            admin.close(Duration.ofMillis(200));
        }
    }
}
