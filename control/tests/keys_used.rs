//! Every key the catalogue marks as used (`Support::Used`, which `strait check` prints as read by
//! strait) reaches the component it configures: for each, a file with the key set is compared
//! with one without it, through the component's own input (the shards' fetch and produce
//! settings and connections, the admin clients, topic management's schedules, the offsets
//! duty's settings, the heartbeat pairs, the filters and the replication policy). Keys that
//! are only validated here are listed in [`ELSEWHERE`] with the test that shows them.
//! No broker is needed.
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use strait_control::config::keys::{self, KeyDef, Support};
use strait_control::config::{Mm2Config, StaticEnv, load_with};
use strait_control::duties::heartbeats;
use strait_control::duties::offsets::OffsetsSettings;
use strait_control::duties::topics::TopicSync;
use strait_control::plan::{FlowPlan, flow_plan};

const BASE: &str = "clusters = A, B\n\
    A.bootstrap.servers = a:9092\n\
    B.bootstrap.servers = b:9092\n\
    A->B.enabled = true\n\
    replication.factor = 1\n";

/// What a component takes from the configuration, as text to compare.
#[derive(Debug, Clone, Copy)]
enum View {
    /// The shards' fetch settings and source connection.
    Fetch,
    /// The shards' produce settings and target connection.
    Produce,
    /// The admin clients' connections.
    Admin,
    /// Every connection of the flow (cluster-wide connection keys).
    Conns,
    /// Topic management's schedules and remote topics' replication factor.
    Topics,
    /// The offsets duty's settings, offset-syncs and checkpoints topics.
    Offsets,
    /// The heartbeat pairs.
    Heartbeats,
    /// Which topics and groups are replicated, how remote topics are named, which configs are
    /// copied.
    Filters,
    /// The flows that run.
    Flows,
    /// `strait offsets import-mm2|export-mm2`: MM2's offsets topic.
    Migrate,
    /// strait's progress topic, as it is created.
    Progress,
    /// Whether the flow forwards exactly-once (the run gives it transactions).
    Transactions,
}

fn load(text: &str) -> Result<Mm2Config, String> {
    let env = StaticEnv::new().file("/cfg/mm2.properties", text);
    load_with(Path::new("/cfg/mm2.properties"), &env).map_err(|e| e.to_string())
}

fn plan(cfg: &Mm2Config) -> FlowPlan {
    let f = cfg.flow("A", "B").expect("flow A->B");
    flow_plan(cfg, f).expect("plan")
}

fn view(v: View, cfg: &Mm2Config, t0: Instant) -> String {
    let p = plan(cfg);
    match v {
        View::Fetch => format!(
            "{:?} {:?} {:?}",
            p.fetch, p.source_fetch, p.start_at_earliest
        ),
        View::Produce => format!("{:?} {:?}", p.produce, p.target_produce),
        View::Admin => format!("{:?} {:?}", p.source_admin, p.target_admin),
        View::Conns => unreachable!("compared as values by `differs`"),
        View::Topics => format!("{:?} {}", TopicSync::new(&p, t0), p.replication_factor),
        View::Offsets => {
            let c = &p.config;
            format!(
                "{:?} {} {} {} {} {}",
                OffsetsSettings::from_flow(c),
                c.offset_syncs_topic(),
                c.clients.offset_syncs_producer.client.cluster,
                c.checkpoints_topic(),
                c.offset_syncs_topic_replication_factor.value,
                c.checkpoints_topic_replication_factor.value
            )
        }
        View::Heartbeats => format!("{:?}", heartbeats::plans(cfg).0),
        View::Filters => {
            let topics = [
                "orders",
                "A.orders",
                "x.internal",
                "heartbeats",
                "__x",
                "y-1",
            ];
            let groups = ["g1", "console-consumer-1", "other"];
            format!(
                "{:?} {:?} {} {:?}",
                topics.map(|t| (p.should_replicate)(t)),
                groups.map(|g| p.config.group_filter.should_replicate_group(g)),
                (p.remote_name)("orders"),
                p.config.config_property_filter
            )
        }
        View::Flows => format!(
            "{:?}",
            cfg.enabled_flows().map(|f| f.name()).collect::<Vec<_>>()
        ),
        View::Migrate => p.config.mm2_offsets_topic.value.clone(),
        View::Progress => p.progress_replication_factor.to_string(),
        // What `run::start::open_flow` builds the flow's exactly-once state from.
        View::Transactions => format!(
            "{} {} {}",
            p.config.exactly_once.value,
            p.config.transaction_boundary_interval_ms.value,
            p.config
                .clients
                .target_producer
                .transaction_timeout_ms
                .value
        ),
    }
}

/// Whether `v` differs between two configurations. Connections are compared as values: their
/// `Debug` hides secrets.
fn differs(v: View, b: &Mm2Config, a: &Mm2Config, t0: Instant) -> bool {
    match v {
        View::Conns => {
            let (pb, pa) = (plan(b), plan(a));
            pb.source_fetch != pa.source_fetch
                || pb.target_produce != pa.target_produce
                || pb.source_admin != pa.source_admin
                || pb.target_admin != pa.target_admin
                || pb.source_bootstrap != pa.source_bootstrap
                || pb.target_bootstrap != pa.target_bootstrap
        }
        _ => view(v, b, t0) != view(v, a, t0),
    }
}

/// `(key, extra lines both files hold, the line that sets the key, the view it must change)`.
/// Keys are named without scope, as in the catalogue.
type Probe = (&'static str, &'static str, &'static str, View);

const SSL: &str = "A.security.protocol = SSL\n";
const SASL: &str = "A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = PLAIN\nA.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";\n";
const OIDC: &str = "A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = OAUTHBEARER\nA.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\nA.sasl.oauthbearer.token.endpoint.url = https://idp.example/token\nA.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId=\"c\" clientSecret=\"s\";\n";
const PEM_KS: &str = "A.security.protocol = SSL\nA.ssl.keystore.type = PEM\n";

static PROBES: &[Probe] = &[
    // Connections (every client of the cluster).
    (
        "bootstrap.servers",
        "",
        "A.bootstrap.servers = a2:9092\n",
        View::Conns,
    ),
    (
        "security.protocol",
        "",
        "A.security.protocol = SSL\n",
        View::Conns,
    ),
    (
        "ssl.enabled.protocols",
        SSL,
        "A.ssl.enabled.protocols = TLSv1.3\n",
        View::Conns,
    ),
    (
        "ssl.endpoint.identification.algorithm",
        SSL,
        "A.ssl.endpoint.identification.algorithm =\n",
        View::Conns,
    ),
    (
        "ssl.truststore.type",
        SSL,
        "A.ssl.truststore.type = PEM\nA.ssl.truststore.location = /x/ca.pem\n",
        View::Conns,
    ),
    (
        "ssl.truststore.location",
        SSL,
        "A.ssl.truststore.location = /x/ts.jks\n",
        View::Conns,
    ),
    (
        "ssl.truststore.password",
        "A.security.protocol = SSL\nA.ssl.truststore.location = /x/ts.jks\n",
        "A.ssl.truststore.password = pw\n",
        View::Conns,
    ),
    (
        "ssl.truststore.certificates",
        "A.security.protocol = SSL\nA.ssl.truststore.type = PEM\n",
        "A.ssl.truststore.certificates = -----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\n",
        View::Conns,
    ),
    (
        "ssl.keystore.type",
        SSL,
        "A.ssl.keystore.type = PKCS12\nA.ssl.keystore.location = /x/ks\nA.ssl.keystore.password = pw\n",
        View::Conns,
    ),
    (
        "ssl.keystore.location",
        SSL,
        "A.ssl.keystore.location = /x/ks.jks\nA.ssl.keystore.password = pw\n",
        View::Conns,
    ),
    (
        "ssl.keystore.password",
        "A.security.protocol = SSL\nA.ssl.keystore.location = /x/ks.jks\nA.ssl.keystore.password = pw\n",
        "A.ssl.keystore.password = pw2\n",
        View::Conns,
    ),
    (
        "ssl.key.password",
        "A.security.protocol = SSL\nA.ssl.keystore.type = PEM\nA.ssl.keystore.location = /x/k.pem\n",
        "A.ssl.key.password = pw\n",
        View::Conns,
    ),
    (
        "ssl.keystore.key",
        PEM_KS,
        "A.ssl.keystore.key = -----BEGIN PRIVATE KEY-----\\nMIIB\\n-----END PRIVATE KEY-----\nA.ssl.keystore.certificate.chain = -----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\n",
        View::Conns,
    ),
    (
        "ssl.keystore.certificate.chain",
        PEM_KS,
        "A.ssl.keystore.key = -----BEGIN PRIVATE KEY-----\\nMIIB\\n-----END PRIVATE KEY-----\nA.ssl.keystore.certificate.chain = -----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\n",
        View::Conns,
    ),
    (
        "sasl.mechanism",
        SASL,
        "A.sasl.mechanism = SCRAM-SHA-256\nA.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"p\";\n",
        View::Conns,
    ),
    (
        "sasl.jaas.config",
        SASL,
        "A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"v\" password=\"p\";\n",
        View::Conns,
    ),
    (
        "sasl.login.refresh.window.factor",
        OIDC,
        "A.sasl.login.refresh.window.factor = 0.6\n",
        View::Conns,
    ),
    (
        "sasl.login.refresh.window.jitter",
        OIDC,
        "A.sasl.login.refresh.window.jitter = 0.01\n",
        View::Conns,
    ),
    (
        "sasl.login.refresh.min.period.seconds",
        OIDC,
        "A.sasl.login.refresh.min.period.seconds = 30\n",
        View::Conns,
    ),
    (
        "sasl.login.refresh.buffer.seconds",
        OIDC,
        "A.sasl.login.refresh.buffer.seconds = 120\n",
        View::Conns,
    ),
    (
        "sasl.login.connect.timeout.ms",
        OIDC,
        "A.sasl.login.connect.timeout.ms = 5000\n",
        View::Conns,
    ),
    (
        "sasl.login.read.timeout.ms",
        OIDC,
        "A.sasl.login.read.timeout.ms = 5000\n",
        View::Conns,
    ),
    (
        "sasl.login.retry.backoff.ms",
        OIDC,
        "A.sasl.login.retry.backoff.ms = 200\n",
        View::Conns,
    ),
    (
        "sasl.login.retry.backoff.max.ms",
        OIDC,
        "A.sasl.login.retry.backoff.max.ms = 20000\n",
        View::Conns,
    ),
    (
        "sasl.oauthbearer.token.endpoint.url",
        OIDC,
        "A.sasl.oauthbearer.token.endpoint.url = https://idp2.example/token\n",
        View::Conns,
    ),
    (
        "sasl.oauthbearer.scope",
        OIDC,
        "A.sasl.oauthbearer.scope = kafka\n",
        View::Conns,
    ),
    (
        "sasl.oauthbearer.sub.claim.name",
        OIDC,
        "A.sasl.oauthbearer.sub.claim.name = user\n",
        View::Conns,
    ),
    (
        "sasl.oauthbearer.client.credentials.client.id",
        OIDC,
        "A.sasl.oauthbearer.client.credentials.client.id = c2\n",
        View::Conns,
    ),
    (
        "sasl.oauthbearer.client.credentials.client.secret",
        OIDC,
        "A.sasl.oauthbearer.client.credentials.client.secret = s2\n",
        View::Conns,
    ),
    // The replication consumer (fetching).
    ("client.id", "", "A.consumer.client.id = me\n", View::Fetch),
    (
        "fetch.min.bytes",
        "",
        "A.consumer.fetch.min.bytes = 100\n",
        View::Fetch,
    ),
    (
        "fetch.max.bytes",
        "",
        "A.consumer.fetch.max.bytes = 1000000\n",
        View::Fetch,
    ),
    (
        "fetch.max.wait.ms",
        "",
        "A.consumer.fetch.max.wait.ms = 100\n",
        View::Fetch,
    ),
    (
        "max.partition.fetch.bytes",
        "",
        "A.consumer.max.partition.fetch.bytes = 2000000\n",
        View::Fetch,
    ),
    (
        "isolation.level",
        "",
        "A.consumer.isolation.level = read_uncommitted\n",
        View::Fetch,
    ),
    (
        "auto.offset.reset",
        "",
        "A.consumer.auto.offset.reset = latest\n",
        View::Fetch,
    ),
    (
        "reconnect.backoff.ms",
        "",
        "A.consumer.reconnect.backoff.ms = 7\n",
        View::Fetch,
    ),
    (
        "reconnect.backoff.max.ms",
        "",
        "A.consumer.reconnect.backoff.max.ms = 7000\n",
        View::Fetch,
    ),
    (
        "retry.backoff.ms",
        "",
        "A.consumer.retry.backoff.ms = 7\n",
        View::Fetch,
    ),
    (
        "retry.backoff.max.ms",
        "",
        "A.consumer.retry.backoff.max.ms = 7000\n",
        View::Fetch,
    ),
    (
        "request.timeout.ms",
        "",
        "A.consumer.request.timeout.ms = 7000\n",
        View::Fetch,
    ),
    (
        "socket.connection.setup.timeout.ms",
        "",
        "A.consumer.socket.connection.setup.timeout.ms = 7000\n",
        View::Fetch,
    ),
    (
        "sasl.oauthbearer.header.urlencode",
        OIDC,
        "A.sasl.oauthbearer.header.urlencode = true\n",
        View::Conns,
    ),
    // The admin clients and the producer take their own client keys.
    (
        "request.timeout.ms",
        "",
        "A.admin.request.timeout.ms = 7000\n",
        View::Admin,
    ),
    ("client.id", "", "B.admin.client.id = me\n", View::Admin),
    (
        "socket.connection.setup.timeout.ms",
        "",
        "B.admin.socket.connection.setup.timeout.ms = 7000\n",
        View::Admin,
    ),
    (
        "client.id",
        "",
        "B.producer.client.id = me\n",
        View::Produce,
    ),
    (
        "request.timeout.ms",
        "",
        "B.producer.request.timeout.ms = 7000\n",
        View::Produce,
    ),
    (
        "retry.backoff.ms",
        "",
        "B.producer.retry.backoff.ms = 7\n",
        View::Produce,
    ),
    // The replication producer.
    (
        "max.in.flight.requests.per.connection",
        "",
        "B.producer.max.in.flight.requests.per.connection = 2\n",
        View::Produce,
    ),
    (
        "max.request.size",
        "",
        "B.producer.max.request.size = 2097152\n",
        View::Produce,
    ),
    (
        "delivery.timeout.ms",
        "",
        "B.producer.delivery.timeout.ms = 30000\n",
        View::Produce,
    ),
    (
        "batch.size",
        "",
        "B.producer.batch.size = 1024\n",
        View::Produce,
    ),
    // Topic management, offsets, heartbeats, filters, flows.
    (
        "refresh.topics.enabled",
        "",
        "refresh.topics.enabled = false\n",
        View::Topics,
    ),
    (
        "refresh.topics.interval.seconds",
        "",
        "refresh.topics.interval.seconds = 77\n",
        View::Topics,
    ),
    (
        "sync.topic.configs.enabled",
        "",
        "sync.topic.configs.enabled = false\n",
        View::Topics,
    ),
    (
        "sync.topic.configs.interval.seconds",
        "",
        "sync.topic.configs.interval.seconds = 77\n",
        View::Topics,
    ),
    (
        "sync.topic.acls.enabled",
        "",
        "sync.topic.acls.enabled = false\n",
        View::Topics,
    ),
    (
        "sync.topic.acls.interval.seconds",
        "",
        "sync.topic.acls.interval.seconds = 77\n",
        View::Topics,
    ),
    (
        "replication.factor",
        "",
        "replication.factor = 3\n",
        View::Topics,
    ),
    ("offset.lag.max", "", "offset.lag.max = 7\n", View::Offsets),
    (
        "offset-syncs.topic.location",
        "",
        "offset-syncs.topic.location = target\n",
        View::Offsets,
    ),
    (
        "emit.offset-syncs.enabled",
        "",
        "emit.offset-syncs.enabled = false\n",
        View::Offsets,
    ),
    (
        "offset-syncs.topic.replication.factor",
        "",
        "offset-syncs.topic.replication.factor = 1\n",
        View::Offsets,
    ),
    (
        "checkpoints.topic.replication.factor",
        "",
        "checkpoints.topic.replication.factor = 1\n",
        View::Offsets,
    ),
    (
        "refresh.groups.enabled",
        "",
        "refresh.groups.enabled = false\n",
        View::Offsets,
    ),
    (
        "refresh.groups.interval.seconds",
        "",
        "refresh.groups.interval.seconds = 77\n",
        View::Offsets,
    ),
    (
        "emit.checkpoints.enabled",
        "",
        "emit.checkpoints.enabled = false\n",
        View::Offsets,
    ),
    (
        "emit.checkpoints.interval.seconds",
        "",
        "emit.checkpoints.interval.seconds = 77\n",
        View::Offsets,
    ),
    (
        "sync.group.offsets.enabled",
        "",
        "sync.group.offsets.enabled = true\n",
        View::Offsets,
    ),
    (
        "sync.group.offsets.interval.seconds",
        "",
        "sync.group.offsets.interval.seconds = 77\n",
        View::Offsets,
    ),
    (
        "admin.timeout.ms",
        "",
        "admin.timeout.ms = 7000\n",
        View::Offsets,
    ),
    (
        "offset.flush.interval.ms",
        "",
        "B.offset.flush.interval.ms = 7000\n",
        View::Offsets,
    ),
    (
        "exactly.once.source.support",
        "",
        "B.exactly.once.source.support = enabled\n",
        View::Transactions,
    ),
    (
        "transaction.boundary.interval.ms",
        "",
        "A->B.transaction.boundary.interval.ms = 500\n",
        View::Transactions,
    ),
    (
        "transaction.timeout.ms",
        "",
        "B.producer.transaction.timeout.ms = 30000\n",
        View::Transactions,
    ),
    (
        "emit.heartbeats.enabled",
        "",
        "emit.heartbeats.enabled = false\n",
        View::Heartbeats,
    ),
    (
        "emit.heartbeats.interval.seconds",
        "",
        "emit.heartbeats.interval.seconds = 7\n",
        View::Heartbeats,
    ),
    (
        "heartbeats.topic.replication.factor",
        "",
        "heartbeats.topic.replication.factor = 1\n",
        View::Heartbeats,
    ),
    ("topics", "", "A->B.topics = orders\n", View::Filters),
    (
        "topics.exclude",
        "",
        "A->B.topics.exclude = y-.*\n",
        View::Filters,
    ),
    ("groups", "", "A->B.groups = g1\n", View::Filters),
    (
        "groups.exclude",
        "",
        "A->B.groups.exclude = g.*\n",
        View::Filters,
    ),
    (
        "config.properties.exclude",
        "",
        "A->B.config.properties.exclude = retention.ms\n",
        View::Filters,
    ),
    (
        "use.defaults.from",
        "",
        "A->B.use.defaults.from = source\n",
        View::Filters,
    ),
    (
        "heartbeats.replication.enabled",
        "A->B.topics = orders\n",
        "heartbeats.replication.enabled = false\n",
        View::Filters,
    ),
    (
        "replication.policy.separator",
        "",
        "replication.policy.separator = _\n",
        View::Filters,
    ),
    (
        "replication.policy.internal.topic.separator.enabled",
        "replication.policy.separator = _\n",
        "replication.policy.internal.topic.separator.enabled = false\n",
        View::Offsets,
    ),
    (
        "enabled",
        "",
        "A->B.enabled = false\nB->A.enabled = true\n",
        View::Flows,
    ),
    (
        "clusters",
        "",
        "clusters = A, B, C\nC.bootstrap.servers = c:9092\nC->B.enabled = true\n",
        View::Flows,
    ),
    (
        "offset.storage.topic",
        "",
        "B.offset.storage.topic = my-offsets\n",
        View::Migrate,
    ),
    (
        "offset.storage.replication.factor",
        "",
        "B.offset.storage.replication.factor = 1\n",
        View::Progress,
    ),
];

/// Keys marked used whose component this test cannot reach without brokers or the binary,
/// with where they are shown to work.
static ELSEWHERE: &[(&str, &str)] = &[
    (
        "strait.api.ssl.keystore.location",
        "the binary's run options; control/tests/api_v1.rs api_over_tls (HTTPS only, strait ctl --tls-ca)",
    ),
    (
        "strait.api.ssl.keystore.password",
        "the binary's run options (a PKCS#12 or JKS store for the API, loaded by the data plane's key store reader, tested in tests/tests/security.rs)",
    ),
    (
        "strait.api.ssl.key.password",
        "the binary's run options (an encrypted PEM key for the API, loaded as ssl.key.password is)",
    ),
    (
        "strait.group.id",
        "the binary's group options; control/tests/group.rs (a member with other topics under one group id is refused)",
    ),
    (
        "strait.group.cluster",
        "the binary's group options (main.rs group_options: the coordination cluster's bootstrap and admin settings); the default, the first flow's target, in control/tests/group.rs",
    ),
    (
        "strait.group.instance.id",
        "the binary's group options; tests/tests/faults.rs (every scenario runs a static member: strait-sigkill's restarts take their place back at once) and control/tests/group.rs (a second process with the same id stops the first)",
    ),
    (
        "strait.group.session.timeout.ms",
        "the binary's group options; control/tests/group.rs (6 s sessions: a killed member's partitions move within it)",
    ),
    (
        "strait.group.heartbeat.interval.ms",
        "the binary's group options; control/tests/group.rs (1 s)",
    ),
    (
        "strait.group.rebalance.timeout.ms",
        "the binary's group options; control/tests/group.rs (10 s)",
    ),
    (
        "strait.health.stall.timeout.ms",
        "the binary's run options; tests/tests/faults.rs target outages (3 s: /health/ready 503 while the target is away)",
    ),
    (
        "strait.metrics.per.partition",
        "the binary's run options; api::metrics tests (per_partition_series_can_be_turned_off)",
    ),
    (
        "acks",
        "validated only: the idempotent replication producer needs acks=all (-1), anything else is refused with the key and line; the shards produce with acks=all",
    ),
    (
        "strait.shards",
        "the binary's run options (main.rs); `--shards` and the shard count in control/tests/datapath.rs",
    ),
    (
        "strait.io",
        "the binary's run options; io selection logged at start, tests/connection.rs runs both drivers",
    ),
    (
        "strait.api.listen",
        "the binary's run options; every API test listens on 127.0.0.1:0 (control/tests/api_v1.rs)",
    ),
    (
        "strait.api.token",
        "the binary's run options; control/tests/api_v1.rs (token from ${file:...})",
    ),
    (
        "strait.api.command.queue",
        "the binary's run options; api::rest tests (a full command queue answers 503)",
    ),
    (
        "strait.memory.bytes",
        "the binary's run options; run::tests (the budget split between shards)",
    ),
    (
        "strait.progress.topic.replication.factor",
        "FlowPlan.progress_replication_factor, used when the progress topic is created (every test bed config sets it to 1; control/tests/mm2_sample.rs runs without it)",
    ),
    (
        "strait.mapping.max.runs.per.partition",
        "FlowPlan.mapping_max_runs: the progress store's and translator's bound; store::mapping and offsets::mapping tests, control/tests/translate.rs (a partition with more runs than its bound)",
    ),
    (
        "strait.on.lost.position",
        "the binary's run options; control/tests/controlplane.rs (recreated topics)",
    ),
    (
        "strait.metrics.enabled",
        "owned by the metrics work (issue 11 item 2)",
    ),
    (
        "strait.cpus",
        "the binary's run options (run::start places the shards and the control thread); control/tests/cpus.rs reads the threads' CPUs back from /proc",
    ),
    (
        "strait.cpus.pin",
        "the binary's run options (run::start pins no thread when false); control/tests/cpus.rs strait_cpus_pin_false_*",
    ),
    (
        "strait.verify.enabled",
        "the binary's run options (run::verifier); control/tests/verify.rs continuous_verification_*",
    ),
    (
        "strait.verify.from",
        "the binary's run options; control/tests/verify.rs continuous_verification_* (history: the damage before the run is found)",
    ),
    (
        "strait.verify.interval.ms",
        "the binary's run options; control/tests/verify.rs continuous_verification_* (5 s: found in the first round)",
    ),
    (
        "strait.verify.sample.rate",
        "the binary's run options: below 1 the rounds compare in verify::partition's sample mode, the one `strait verify --sample` uses (control/tests/verify.rs)",
    ),
    (
        "strait.verify.max.records.per.round",
        "the binary's run options: verify::continuous's bound per round (unit test rounds_start_where_the_run_started_and_go_on_where_the_last_stopped)",
    ),
    (
        "config.providers",
        "validated and applied while the file is read (${env:..}, ${file:..}); config::providers tests",
    ),
];

/// Every key marked used, without scope, from every table a file's keys are checked against.
fn used_keys() -> BTreeSet<&'static str> {
    let tables: [&[KeyDef]; 9] = [
        keys::CONNECTION_KEYS,
        keys::CONSUMER_KEYS,
        keys::PRODUCER_KEYS,
        keys::ADMIN_KEYS,
        keys::WORKER_KEYS,
        keys::CONNECTOR_KEYS,
        keys::FLOW_ONLY_KEYS,
        keys::MM2_TOP_KEYS,
        keys::STRAIT_KEYS,
    ];
    tables
        .iter()
        .flat_map(|t| t.iter())
        .filter(|k| k.support == Support::Used)
        .map(|k| k.name)
        .collect()
}

#[test]
fn every_used_key_reaches_its_component() {
    let used = used_keys();
    let probed: BTreeSet<&str> = PROBES.iter().map(|p| p.0).collect();
    let elsewhere: BTreeSet<&str> = ELSEWHERE.iter().map(|e| e.0).collect();
    let unproven: Vec<&&str> = used
        .iter()
        .filter(|k| !probed.contains(*k) && !elsewhere.contains(*k))
        .collect();
    assert!(
        unproven.is_empty(),
        "keys marked used that no probe reaches and ELSEWHERE does not list: {unproven:?}"
    );
    let stale: Vec<&&str> = probed
        .union(&elsewhere)
        .filter(|k| !used.contains(*k))
        .collect();
    assert!(
        stale.is_empty(),
        "listed here but not marked used: {stale:?}"
    );

    let t0 = Instant::now();
    let mut failures = Vec::new();
    for (key, extra, line, v) in PROBES {
        let before = format!("{BASE}{extra}");
        let after = format!("{before}{line}");
        let (b, a) = match (load(&before), load(&after)) {
            (Ok(b), Ok(a)) => (b, a),
            (b, a) => {
                failures.push(format!(
                    "{key}: the probe files do not load: {:?} / {:?}",
                    b.err(),
                    a.err()
                ));
                continue;
            }
        };
        if !differs(*v, &b, &a, t0) {
            failures.push(format!("{key}: `{}` changes nothing in {v:?}", line.trim()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn descriptions_say_what_strait_does() {
    let find = |table: &[KeyDef], name: &str| {
        table
            .iter()
            .find(|k| k.name == name)
            .unwrap_or_else(|| panic!("{name}"))
            .support
    };
    let reason = |s: Support| match s {
        Support::Ignored(r) => r,
        other => panic!("{other:?}"),
    };
    // Connect restarts connectors on provider changes; strait reloads on request.
    let r = reason(find(keys::CONNECTOR_KEYS, "config.action.reload"));
    assert!(
        r.contains("strait ctl reload") && r.contains("SIGHUP"),
        "{r}"
    );
    let r = reason(find(keys::CONSUMER_KEYS, "client.dns.lookup"));
    assert!(r.contains("every address"), "{r}");
    assert_eq!(
        find(keys::PRODUCER_KEYS, "delivery.timeout.ms"),
        Support::Used
    );
    assert_eq!(find(keys::PRODUCER_KEYS, "max.request.size"), Support::Used);
    // auto.offset.reset=none is refused by the check, with the key and its line.
    let err = load(&format!("{BASE}A.consumer.auto.offset.reset = none\n")).unwrap_err();
    assert!(
        err.contains("line 6") && err.contains("auto.offset.reset"),
        "{err}"
    );
    // strait's own default for max.request.size.
    let p = plan(&load(BASE).unwrap());
    assert_eq!(p.produce.max_request_bytes, 16 << 20);
    let p = plan(&load(&format!("{BASE}B.producer.delivery.timeout.ms = 30000\n")).unwrap());
    assert_eq!(p.produce.delivery_timeout_ms, 30_000);
}

/// A reload names every used MirrorMaker key it is given: each probe's change is either applied
/// (a flow updated, restarted, added or removed, or heartbeats restarted, the key named) or
/// refused by name. None passes unnoticed.
#[test]
fn a_reload_names_every_used_key_it_changes() {
    use strait_control::config::diff::diff;
    let mut failures = Vec::new();
    for (key, extra, line, _) in PROBES {
        let before = format!("{BASE}{extra}");
        let after = format!("{before}{line}");
        let (Ok(b), Ok(a)) = (load(&before), load(&after)) else {
            continue; // every_used_key_reaches_its_component reports it
        };
        let plan = diff(&b, &a);
        let summary = plan.summary();
        // The policy's settings are named together.
        let named = summary.contains(key)
            || key.starts_with("replication.policy.") && summary.contains("replication.policy.*")
            || (*key == "enabled" || *key == "clusters")
                && !(plan.added.is_empty() && plan.removed.is_empty());
        if !named {
            failures.push(format!("{key}: `{}` -> {summary}", line.trim()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
