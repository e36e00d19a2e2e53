//! The catalogue of every key an `mm2.properties` may hold: name, type, MirrorMaker/Kafka
//! default, and what strait does with it.
//!
//! Written from the Kafka sources (`CommonClientConfigs`, `SslConfigs`, `SaslConfigs`,
//! `ConsumerConfig`, `ProducerConfig`, `AdminClientConfig`, Connect `ConnectorConfig`,
//! `WorkerConfig`, `DistributedConfig`, `RestServerConfig`, MM2 `Mirror*Config`,
//! `MirrorMakerConfig`) of the 4.0 line, plus the client keys added in 4.0/4.1
//! (`metadata.recovery.rebootstrap.trigger.ms`, KIP-1102; the OAuth keys of KIP-1139).
//!
//! Scopes (see `validate`): top level, cluster (`<alias>.<key>`), flow (`<src>-><tgt>.<key>`).
//! Each table below lists the keys of one Kafka `ConfigDef`; `validate` decides which tables
//! apply in which scope, following what MirrorMaker actually reads.

/// The value type and its validator, as in Kafka's `ConfigDef`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ty {
    /// `true`/`false`, case-insensitive, trimmed.
    Bool,
    /// 32-bit integer within an inclusive range.
    Int(i64, i64),
    /// 64-bit integer within an inclusive range.
    Long(i64, i64),
    /// 16-bit integer within an inclusive range.
    Short(i64, i64),
    /// Double within an inclusive range.
    Double(f64, f64),
    /// Any string.
    Str,
    /// A string that is a secret.
    Password,
    /// Comma-separated list.
    List,
    /// A Java class name.
    Class,
    /// One of these strings, exactly (after trimming).
    Enum(&'static [&'static str]),
    /// One of these strings, ignoring ASCII case.
    EnumCi(&'static [&'static str]),
    /// `host:port` list (`bootstrap.servers`).
    HostPorts,
    /// A replication factor: `-1` (the broker's default) or 1..=32767.
    ReplicationFactor,
    /// A list of Java regular expressions (MM2 filters).
    Patterns,
    /// A JAAS login module line (secret).
    Jaas,
    /// `ip:port`, or empty to disable.
    ListenAddr,
    /// `earliest`, `latest`, `none` or `by_duration:<ISO-8601 duration>`.
    OffsetReset,
    /// CPU numbers and ranges (`2-5,8`), as `taskset -c` takes them; empty for none.
    CpuList,
}

impl Ty {
    /// Whether values of this type are secrets.
    pub fn is_secret(self) -> bool {
        matches!(self, Ty::Password | Ty::Jaas)
    }

    /// A short name for messages.
    pub fn describe(self) -> String {
        match self {
            Ty::Bool => "a boolean (true or false)".into(),
            Ty::Int(lo, hi) => {
                describe_range("a 32-bit integer", lo, hi, i32::MIN.into(), i32::MAX.into())
            }
            Ty::Long(lo, hi) => describe_range("a 64-bit integer", lo, hi, i64::MIN, i64::MAX),
            Ty::Short(lo, hi) => {
                describe_range("a 16-bit integer", lo, hi, i16::MIN.into(), i16::MAX.into())
            }
            Ty::Double(lo, hi) => format!("a number in [{lo}, {hi}]"),
            Ty::Str | Ty::Password => "a string".into(),
            Ty::List => "a comma-separated list".into(),
            Ty::Class => "a Java class name".into(),
            Ty::Enum(v) | Ty::EnumCi(v) => format!("one of {}", v.join(", ")),
            Ty::HostPorts => "a list of host:port".into(),
            Ty::ReplicationFactor => "-1 (broker default) or 1..=32767".into(),
            Ty::Patterns => "a comma-separated list of regular expressions".into(),
            Ty::Jaas => "a JAAS login module configuration".into(),
            Ty::ListenAddr => "ip:port, or empty to disable".into(),
            Ty::OffsetReset => "earliest, latest, none or by_duration:<duration>".into(),
            Ty::CpuList => "CPU numbers and ranges (2-5,8), or empty".into(),
        }
    }
}

fn describe_range(base: &str, lo: i64, hi: i64, min: i64, max: i64) -> String {
    match (lo == min, hi == max) {
        (true, true) => base.to_string(),
        (false, true) => format!("{base} >= {lo}"),
        (true, false) => format!("{base} <= {hi}"),
        (false, false) => format!("{base} in {lo}..={hi}"),
    }
}

/// What strait does with a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// strait reads it.
    Used,
    /// Valid for MirrorMaker, no effect in strait (the reason says why); reported as a note.
    Ignored(&'static str),
    /// Only these values (or an empty value) are accepted; anything else needs a feature
    /// strait does not have (the reason says which).
    OnlyValues(&'static [&'static str], &'static str),
    /// Any value is an error: strait cannot honour it.
    Unsupported(&'static str),
    /// MirrorMaker sets it itself; a user value breaks MirrorMaker.
    Reserved(&'static str),
}

/// One key of one `ConfigDef`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeyDef {
    /// The key, without scope prefix.
    pub name: &'static str,
    /// Its type and validator.
    pub ty: Ty,
    /// The Kafka/MirrorMaker default as written in a properties file; `None` means no
    /// default (null).
    pub default: Option<&'static str>,
    /// What strait does with it.
    pub support: Support,
    /// What a reload (`POST /config/reload`, SIGHUP) does when its value changes.
    pub reload: Reload,
}

/// What a configuration reload does with a changed key ([`super::diff`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// Applied without a restart: the reload compares the flows, their clients and heartbeat
    /// pairs this key feeds, and restarts or updates what changed (a MirrorMaker key).
    Applied,
    /// Read once at start: a reload that changes it is refused, naming the key and this reason,
    /// and nothing is applied.
    Refused(&'static str),
}

/// A MirrorMaker key: a reload takes it through the flows, clients and heartbeats it feeds.
const fn k(name: &'static str, ty: Ty, default: Option<&'static str>, support: Support) -> KeyDef {
    KeyDef {
        name,
        ty,
        default,
        support,
        reload: Reload::Applied,
    }
}

/// A `strait.*` key: each says what a reload does with it, since strait reads most of them at
/// start only.
const fn s(name: &'static str, ty: Ty, default: Option<&'static str>, reload: Reload) -> KeyDef {
    KeyDef {
        name,
        ty,
        default,
        support: Support::Used,
        reload,
    }
}

/// Why a `strait.*` key cannot change while strait runs.
const AT_START: Reload = Reload::Refused("read at start; restart to apply");
const API_AT_START: Reload = Reload::Refused("the API is started once, at start; restart to apply");
const GROUP_AT_START: Reload = Reload::Refused(
    "the group membership is set up at start; restart every member with the new file",
);

const I32: Ty = Ty::Int(i32::MIN as i64, i32::MAX as i64);
const I32_GE0: Ty = Ty::Int(0, i32::MAX as i64);
const I32_GE1: Ty = Ty::Int(1, i32::MAX as i64);
const I64: Ty = Ty::Long(i64::MIN, i64::MAX);
const I64_GE0: Ty = Ty::Long(0, i64::MAX);
const SOCKET_BUF: Ty = Ty::Int(-1, i32::MAX as i64);

const U: Support = Support::Used;
const KERBEROS: Support = Support::Ignored("Kerberos (GSSAPI) is not supported by strait");
/// Broker-side OAuth settings (token validation): a client does not use them.
const OAUTH_BROKER: Support = Support::Ignored(
    "validates tokens on the broker (OAuthBearerValidatorCallbackHandler); a client does not use it",
);
const OAUTH_ASSERTION: Support = Support::Ignored(
    "only for client assertions (KIP-1139's jwt-bearer grant), which strait does not support; strait sends clientId and clientSecret",
);
/// `sasl.login.callback.handler.class` values strait honours.
const LOGIN_HANDLERS: Support = Support::OnlyValues(
    super::jaas::OAUTHBEARER_LOGIN_HANDLERS,
    "strait cannot load Java classes; it knows Kafka's OAuthBearerLoginCallbackHandler (OIDC client credentials), and without a class uses Kafka's unsecured OAUTHBEARER login",
);
const JVM_TLS: Support = Support::Ignored("a JVM TLS setting; strait uses rustls");
const METRICS: Support =
    Support::Ignored("Java client metrics; strait exports its own Prometheus metrics");
const BACKOFF: Support = Support::Ignored("strait's connections use their own bounded backoff");
const BUFFERS: Support = Support::Ignored("socket buffer sizes are left to the kernel");
const METADATA: Support = Support::Ignored("strait refreshes cluster metadata on its own schedule");
const DNS: Support = Support::Ignored(
    "strait always tries every address a host name resolves to, in order, until one connects (as use_all_dns_ips does); it makes no canonical-name lookups",
);
const SERDE: Support = Support::Ignored("records are copied as bytes, never deserialized");
const GROUP: Support =
    Support::Ignored("the replication consumer joins no group (MM2 assigns partitions)");
const NO_CLASS: Support = Support::OnlyValues(&[""], "strait cannot load Java classes");
const BYTE_ARRAY: &[&str] = &["org.apache.kafka.connect.converters.ByteArrayConverter"];
const CONVERTER: Support = Support::OnlyValues(
    BYTE_ARRAY,
    "strait copies bytes; only ByteArrayConverter keeps MM2's behaviour",
);

/// `bootstrap.servers`, `security.protocol` and the client SSL and SASL keys
/// (`MirrorClientConfig.CLIENT_CONFIG_DEF`): the connection keys MM2 copies into every
/// client of a cluster.
pub static CONNECTION_KEYS: &[KeyDef] = &[
    k("bootstrap.servers", Ty::HostPorts, None, U),
    k(
        "security.protocol",
        Ty::EnumCi(&["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]),
        Some("PLAINTEXT"),
        U,
    ),
    // SslConfigs.addClientSslSupport
    k(
        "ssl.protocol",
        Ty::Str,
        Some("TLSv1.3"),
        Support::Ignored("strait negotiates TLS 1.2 or 1.3; ssl.enabled.protocols decides which"),
    ),
    k("ssl.provider", Ty::Str, None, JVM_TLS),
    k(
        "ssl.cipher.suites",
        Ty::List,
        None,
        Support::Ignored("rustls offers its own set of safe cipher suites"),
    ),
    k(
        "ssl.enabled.protocols",
        Ty::List,
        Some("TLSv1.2,TLSv1.3"),
        U,
    ),
    k("ssl.keystore.type", Ty::Str, Some("JKS"), U),
    k("ssl.keystore.location", Ty::Str, None, U),
    k("ssl.keystore.password", Ty::Password, None, U),
    k("ssl.key.password", Ty::Password, None, U),
    k("ssl.keystore.key", Ty::Password, None, U),
    k("ssl.keystore.certificate.chain", Ty::Password, None, U),
    k("ssl.truststore.certificates", Ty::Password, None, U),
    k("ssl.truststore.type", Ty::Str, Some("JKS"), U),
    k("ssl.truststore.location", Ty::Str, None, U),
    k("ssl.truststore.password", Ty::Password, None, U),
    k(
        "ssl.keymanager.algorithm",
        Ty::Str,
        Some("SunX509"),
        JVM_TLS,
    ),
    k("ssl.trustmanager.algorithm", Ty::Str, Some("PKIX"), JVM_TLS),
    k(
        "ssl.endpoint.identification.algorithm",
        Ty::Str,
        Some("https"),
        U,
    ),
    k("ssl.secure.random.implementation", Ty::Str, None, JVM_TLS),
    k("ssl.engine.factory.class", Ty::Class, None, NO_CLASS),
    // SaslConfigs.addClientSaslSupport
    k("sasl.kerberos.service.name", Ty::Str, None, KERBEROS),
    k(
        "sasl.kerberos.kinit.cmd",
        Ty::Str,
        Some("/usr/bin/kinit"),
        KERBEROS,
    ),
    k(
        "sasl.kerberos.ticket.renew.window.factor",
        Ty::Double(f64::MIN, f64::MAX),
        Some("0.8"),
        KERBEROS,
    ),
    k(
        "sasl.kerberos.ticket.renew.jitter",
        Ty::Double(f64::MIN, f64::MAX),
        Some("0.05"),
        KERBEROS,
    ),
    k(
        "sasl.kerberos.min.time.before.relogin",
        I64,
        Some("60000"),
        KERBEROS,
    ),
    // The sasl.login.* keys drive OAUTHBEARER's OIDC login (token fetch, retries, refresh).
    k(
        "sasl.login.refresh.window.factor",
        Ty::Double(0.5, 1.0),
        Some("0.8"),
        U,
    ),
    k(
        "sasl.login.refresh.window.jitter",
        Ty::Double(0.0, 0.25),
        Some("0.05"),
        U,
    ),
    k(
        "sasl.login.refresh.min.period.seconds",
        Ty::Short(0, 900),
        Some("60"),
        U,
    ),
    k(
        "sasl.login.refresh.buffer.seconds",
        Ty::Short(0, 3600),
        Some("300"),
        U,
    ),
    k("sasl.mechanism", Ty::Str, Some("GSSAPI"), U),
    k("sasl.jaas.config", Ty::Jaas, None, U),
    k(
        "sasl.client.callback.handler.class",
        Ty::Class,
        None,
        NO_CLASS,
    ),
    k(
        "sasl.login.callback.handler.class",
        Ty::Class,
        None,
        LOGIN_HANDLERS,
    ),
    k("sasl.login.class", Ty::Class, None, NO_CLASS),
    // Kafka's default is no timeout (wait forever); strait's is 10 000 ms (resolve.rs).
    k("sasl.login.connect.timeout.ms", I32_GE1, None, U),
    k("sasl.login.read.timeout.ms", I32_GE1, None, U),
    k("sasl.login.retry.backoff.max.ms", I64_GE0, Some("10000"), U),
    k("sasl.login.retry.backoff.ms", I64_GE0, Some("100"), U),
    k(
        "sasl.oauthbearer.scope.claim.name",
        Ty::Str,
        Some("scope"),
        Support::Ignored("strait does not read a token's scope; the broker checks it"),
    ),
    k("sasl.oauthbearer.sub.claim.name", Ty::Str, Some("sub"), U),
    k("sasl.oauthbearer.token.endpoint.url", Ty::Str, None, U),
    k(
        "sasl.oauthbearer.jwks.endpoint.url",
        Ty::Str,
        None,
        OAUTH_BROKER,
    ),
    k(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        I64,
        Some("3600000"),
        OAUTH_BROKER,
    ),
    k(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        I64,
        Some("10000"),
        OAUTH_BROKER,
    ),
    k(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        I64,
        Some("100"),
        OAUTH_BROKER,
    ),
    k(
        "sasl.oauthbearer.clock.skew.seconds",
        I32,
        Some("30"),
        OAUTH_BROKER,
    ),
    k(
        "sasl.oauthbearer.expected.audience",
        Ty::List,
        None,
        OAUTH_BROKER,
    ),
    k(
        "sasl.oauthbearer.expected.issuer",
        Ty::Str,
        None,
        OAUTH_BROKER,
    ),
    k(
        "sasl.oauthbearer.header.urlencode",
        Ty::Bool,
        Some("false"),
        U,
    ),
    // KIP-1139 (Kafka 4.1): JWT retrievers and assertions.
    k(
        "sasl.oauthbearer.jwt.retriever.class",
        Ty::Class,
        None,
        Support::OnlyValues(
            &[
                "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever",
                "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever",
                "org.apache.kafka.common.security.oauthbearer.FileJwtRetriever",
            ],
            "strait gets tokens with the client-credentials grant or from a file: URL, as Kafka's DefaultJwtRetriever does",
        ),
    ),
    k(
        "sasl.oauthbearer.jwt.validator.class",
        Ty::Class,
        None,
        Support::Ignored(
            "strait checks the tokens it obtains as Kafka's ClientJwtValidator does (a JWT with exp and the subject claim)",
        ),
    ),
    k("sasl.oauthbearer.scope", Ty::Str, None, U),
    k(
        "sasl.oauthbearer.client.credentials.client.id",
        Ty::Str,
        None,
        U,
    ),
    k(
        "sasl.oauthbearer.client.credentials.client.secret",
        Ty::Password,
        None,
        U,
    ),
    k(
        "sasl.oauthbearer.assertion.algorithm",
        Ty::Str,
        Some("RS256"),
        OAUTH_ASSERTION,
    ),
    k(
        "sasl.oauthbearer.assertion.claim.aud",
        Ty::Str,
        None,
        OAUTH_ASSERTION,
    ),
    k(
        "sasl.oauthbearer.assertion.claim.exp.seconds",
        I32,
        Some("300"),
        OAUTH_ASSERTION,
    ),
    k(
        "sasl.oauthbearer.assertion.claim.iss",
        Ty::Str,
        None,
        OAUTH_ASSERTION,
    ),
    k(
        "sasl.oauthbearer.assertion.claim.jti.include",
        Ty::Bool,
        Some("false"),
        OAUTH_ASSERTION,
    ),
    k(
        "sasl.oauthbearer.assertion.claim.nbf.seconds",
        I32,
        Some("60"),
        OAUTH_ASSERTION,
    ),
    k(
        "sasl.oauthbearer.assertion.claim.sub",
        Ty::Str,
        None,
        OAUTH_ASSERTION,
    ),
    k(
        "sasl.oauthbearer.assertion.file",
        Ty::Str,
        None,
        OAUTH_ASSERTION,
    ),
    k(
        "sasl.oauthbearer.assertion.private.key.file",
        Ty::Str,
        None,
        OAUTH_ASSERTION,
    ),
    k(
        "sasl.oauthbearer.assertion.private.key.passphrase",
        Ty::Password,
        None,
        OAUTH_ASSERTION,
    ),
    k(
        "sasl.oauthbearer.assertion.template.file",
        Ty::Str,
        None,
        OAUTH_ASSERTION,
    ),
];

const DNS_LOOKUP: Ty = Ty::Enum(&[
    "use_all_dns_ips",
    "resolve_canonical_bootstrap_servers_only",
]);
const RECORDING_LEVEL: Ty = Ty::Enum(&["INFO", "DEBUG", "TRACE"]);
const RECOVERY: Ty = Ty::EnumCi(&["none", "rebootstrap"]);

/// `ConsumerConfig`, without the connection keys.
pub static CONSUMER_KEYS: &[KeyDef] = &[
    k(
        "client.dns.lookup",
        DNS_LOOKUP,
        Some("use_all_dns_ips"),
        DNS,
    ),
    k("group.id", Ty::Str, None, GROUP),
    k("group.instance.id", Ty::Str, None, GROUP),
    k("session.timeout.ms", I32, Some("45000"), GROUP),
    k("heartbeat.interval.ms", I32, Some("3000"), GROUP),
    k(
        "partition.assignment.strategy",
        Ty::List,
        Some(
            "org.apache.kafka.clients.consumer.RangeAssignor,org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
        ),
        GROUP,
    ),
    k("metadata.max.age.ms", I64_GE0, Some("300000"), METADATA),
    k(
        "enable.auto.commit",
        Ty::Bool,
        Some("true"),
        Support::Ignored("MM2 forces it to false; strait never commits source offsets"),
    ),
    k("auto.commit.interval.ms", I32_GE0, Some("5000"), GROUP),
    k("client.id", Ty::Str, Some(""), U),
    k(
        "client.rack",
        Ty::Str,
        Some(""),
        Support::Ignored("strait fetches from partition leaders"),
    ),
    k("max.partition.fetch.bytes", I32_GE0, Some("1048576"), U),
    k("send.buffer.bytes", SOCKET_BUF, Some("131072"), BUFFERS),
    k("receive.buffer.bytes", SOCKET_BUF, Some("65536"), BUFFERS),
    k("fetch.min.bytes", I32_GE0, Some("1"), U),
    k("fetch.max.bytes", I32_GE0, Some("52428800"), U),
    k("fetch.max.wait.ms", I32_GE0, Some("500"), U),
    // The shards' fetch (consumer) and produce (producer) connections back off by these.
    k("reconnect.backoff.ms", I64_GE0, Some("50"), U),
    k("reconnect.backoff.max.ms", I64_GE0, Some("1000"), U),
    k("retry.backoff.ms", I64_GE0, Some("100"), U),
    k("retry.backoff.max.ms", I64_GE0, Some("1000"), U),
    k("enable.metrics.push", Ty::Bool, Some("true"), METRICS),
    k("auto.offset.reset", Ty::OffsetReset, Some("latest"), U),
    k(
        "check.crcs",
        Ty::Bool,
        Some("true"),
        Support::Ignored(
            "the fast path never reads record payloads; brokers verify the CRC on produce",
        ),
    ),
    k("metrics.sample.window.ms", I64_GE0, Some("30000"), METRICS),
    k("metrics.num.samples", I32_GE1, Some("2"), METRICS),
    k(
        "metrics.recording.level",
        RECORDING_LEVEL,
        Some("INFO"),
        METRICS,
    ),
    k(
        "metric.reporters",
        Ty::List,
        Some("org.apache.kafka.common.metrics.JmxReporter"),
        METRICS,
    ),
    k("key.deserializer", Ty::Class, None, SERDE),
    k("value.deserializer", Ty::Class, None, SERDE),
    k("request.timeout.ms", I32_GE0, Some("30000"), U),
    k(
        "default.api.timeout.ms",
        I32_GE0,
        Some("60000"),
        Support::Ignored("strait bounds each request with request.timeout.ms"),
    ),
    k("socket.connection.setup.timeout.ms", I64, Some("10000"), U),
    k(
        "socket.connection.setup.timeout.max.ms",
        I64,
        Some("30000"),
        BACKOFF,
    ),
    k(
        "connections.max.idle.ms",
        I64,
        Some("540000"),
        Support::Ignored("strait keeps its fetch connections busy"),
    ),
    k("interceptor.classes", Ty::List, Some(""), NO_CLASS),
    k(
        "max.poll.records",
        I32_GE1,
        Some("500"),
        Support::Ignored("strait has no poll loop; memory is bounded by strait.memory.bytes"),
    ),
    k("max.poll.interval.ms", I32_GE1, Some("300000"), GROUP),
    k("exclude.internal.topics", Ty::Bool, Some("true"), GROUP),
    k(
        "internal.leave.group.on.close",
        Ty::Bool,
        Some("true"),
        GROUP,
    ),
    k(
        "internal.throw.on.fetch.stable.offset.unsupported",
        Ty::Bool,
        Some("false"),
        GROUP,
    ),
    k(
        "isolation.level",
        Ty::Enum(&["read_committed", "read_uncommitted"]),
        Some("read_uncommitted"),
        U,
    ),
    k(
        "allow.auto.create.topics",
        Ty::Bool,
        Some("true"),
        Support::Ignored("strait never asks brokers to create topics on fetch"),
    ),
    k(
        "group.protocol",
        Ty::EnumCi(&["classic", "consumer"]),
        Some("classic"),
        GROUP,
    ),
    k("group.remote.assignor", Ty::Str, None, GROUP),
    k("security.providers", Ty::Str, None, JVM_TLS),
    k(
        "metadata.recovery.strategy",
        RECOVERY,
        Some("rebootstrap"),
        METADATA,
    ),
    k(
        "metadata.recovery.rebootstrap.trigger.ms",
        I64_GE0,
        Some("300000"),
        METADATA,
    ),
];

/// `ProducerConfig`, without the connection keys.
pub static PRODUCER_KEYS: &[KeyDef] = &[
    k(
        "client.dns.lookup",
        DNS_LOOKUP,
        Some("use_all_dns_ips"),
        DNS,
    ),
    k(
        "buffer.memory",
        I64_GE0,
        Some("33554432"),
        Support::Ignored("memory is bounded by strait.memory.bytes"),
    ),
    k(
        "retries",
        I32_GE0,
        Some("2147483647"),
        Support::Ignored("strait retries in order until the request times out"),
    ),
    k("acks", Ty::Enum(&["all", "-1", "0", "1"]), Some("all"), U),
    k(
        "compression.type",
        Ty::Enum(&["none", "gzip", "snappy", "lz4", "zstd"]),
        Some("none"),
        Support::Ignored(
            "batches keep their source codec; set the target topic's compression.type to recompress",
        ),
    ),
    k(
        "compression.gzip.level",
        Ty::Int(-1, 9),
        Some("-1"),
        Support::Ignored("batches keep their source codec"),
    ),
    k(
        "compression.lz4.level",
        Ty::Int(1, 17),
        Some("9"),
        Support::Ignored("batches keep their source codec"),
    ),
    k(
        "compression.zstd.level",
        Ty::Int(-131072, 22),
        Some("3"),
        Support::Ignored("batches keep their source codec"),
    ),
    k("batch.size", I32_GE0, Some("16384"), U),
    k(
        "partitioner.adaptive.partitioning.enable",
        Ty::Bool,
        Some("true"),
        Support::Ignored("records keep their source partition"),
    ),
    k(
        "partitioner.availability.timeout.ms",
        I64_GE0,
        Some("0"),
        Support::Ignored("records keep their source partition"),
    ),
    k(
        "partitioner.ignore.keys",
        Ty::Bool,
        Some("false"),
        Support::Ignored("records keep their source partition"),
    ),
    k(
        "linger.ms",
        I64_GE0,
        Some("0"),
        Support::Ignored("source batches are forwarded as soon as they are fetched"),
    ),
    k("delivery.timeout.ms", I32_GE0, Some("120000"), U),
    k("client.id", Ty::Str, Some(""), U),
    k("send.buffer.bytes", SOCKET_BUF, Some("131072"), BUFFERS),
    k("receive.buffer.bytes", SOCKET_BUF, Some("32768"), BUFFERS),
    k("max.request.size", I32_GE0, Some("1048576"), U),
    // The shards' fetch (consumer) and produce (producer) connections back off by these.
    k("reconnect.backoff.ms", I64_GE0, Some("50"), U),
    k("reconnect.backoff.max.ms", I64_GE0, Some("1000"), U),
    k("retry.backoff.ms", I64_GE0, Some("100"), U),
    k("retry.backoff.max.ms", I64_GE0, Some("1000"), U),
    k("enable.metrics.push", Ty::Bool, Some("true"), METRICS),
    k(
        "max.block.ms",
        I64_GE0,
        Some("60000"),
        Support::Ignored("strait never blocks a shard on the producer"),
    ),
    k("request.timeout.ms", I32_GE0, Some("30000"), U),
    k("metadata.max.age.ms", I64_GE0, Some("300000"), METADATA),
    k(
        "metadata.max.idle.ms",
        Ty::Long(5000, i64::MAX),
        Some("300000"),
        METADATA,
    ),
    k("metrics.sample.window.ms", I64_GE0, Some("30000"), METRICS),
    k("metrics.num.samples", I32_GE1, Some("2"), METRICS),
    k(
        "metrics.recording.level",
        RECORDING_LEVEL,
        Some("INFO"),
        METRICS,
    ),
    k(
        "metric.reporters",
        Ty::List,
        Some("org.apache.kafka.common.metrics.JmxReporter"),
        METRICS,
    ),
    k(
        "max.in.flight.requests.per.connection",
        I32_GE1,
        Some("5"),
        U,
    ),
    k("key.serializer", Ty::Class, None, SERDE),
    k("value.serializer", Ty::Class, None, SERDE),
    k("socket.connection.setup.timeout.ms", I64, Some("10000"), U),
    k(
        "socket.connection.setup.timeout.max.ms",
        I64,
        Some("30000"),
        BACKOFF,
    ),
    k(
        "connections.max.idle.ms",
        I64,
        Some("540000"),
        Support::Ignored("strait keeps its produce connections busy"),
    ),
    k(
        "partitioner.class",
        Ty::Class,
        None,
        Support::Ignored("records keep their source partition"),
    ),
    k("interceptor.classes", Ty::List, Some(""), NO_CLASS),
    k("security.providers", Ty::Str, None, JVM_TLS),
    k(
        "enable.idempotence",
        Ty::Bool,
        Some("true"),
        Support::Ignored("strait's producer is always idempotent"),
    ),
    k("transaction.timeout.ms", I32_GE0, Some("60000"), U),
    k(
        "transactional.id",
        Ty::Str,
        None,
        Support::Ignored(
            "with <target>.exactly.once.source.support=enabled each source partition has its own transactional id, strait-eos:<source>-><target>:<topic>:<partition>",
        ),
    ),
    k(
        "metadata.recovery.strategy",
        RECOVERY,
        Some("rebootstrap"),
        METADATA,
    ),
    k(
        "metadata.recovery.rebootstrap.trigger.ms",
        I64_GE0,
        Some("300000"),
        METADATA,
    ),
];

/// `AdminClientConfig`, without the connection keys.
pub static ADMIN_KEYS: &[KeyDef] = &[
    k(
        "bootstrap.controllers",
        Ty::List,
        Some(""),
        Support::Unsupported("strait talks to brokers, not to the KRaft controllers"),
    ),
    k("client.id", Ty::Str, Some(""), U),
    k("metadata.max.age.ms", I64_GE0, Some("300000"), METADATA),
    k("send.buffer.bytes", SOCKET_BUF, Some("131072"), BUFFERS),
    k("receive.buffer.bytes", SOCKET_BUF, Some("65536"), BUFFERS),
    k("reconnect.backoff.ms", I64_GE0, Some("50"), BACKOFF),
    k("reconnect.backoff.max.ms", I64_GE0, Some("1000"), BACKOFF),
    k("retry.backoff.ms", I64_GE0, Some("100"), BACKOFF),
    k("retry.backoff.max.ms", I64_GE0, Some("1000"), BACKOFF),
    k("enable.metrics.push", Ty::Bool, Some("false"), METRICS),
    k("request.timeout.ms", I32_GE0, Some("30000"), U),
    k("socket.connection.setup.timeout.ms", I64, Some("10000"), U),
    k(
        "socket.connection.setup.timeout.max.ms",
        I64,
        Some("30000"),
        BACKOFF,
    ),
    k(
        "connections.max.idle.ms",
        I64,
        Some("300000"),
        Support::Ignored("admin connections are opened per task"),
    ),
    k("retries", I32_GE0, Some("2147483647"), BACKOFF),
    k(
        "default.api.timeout.ms",
        I32_GE0,
        Some("60000"),
        Support::Ignored(
            "strait bounds each admin request with request.timeout.ms and each duty's round with admin.timeout.ms",
        ),
    ),
    k("metrics.sample.window.ms", I64_GE0, Some("30000"), METRICS),
    k("metrics.num.samples", I32_GE1, Some("2"), METRICS),
    k(
        "metric.reporters",
        Ty::List,
        Some("org.apache.kafka.common.metrics.JmxReporter"),
        METRICS,
    ),
    k(
        "metrics.recording.level",
        RECORDING_LEVEL,
        Some("INFO"),
        METRICS,
    ),
    k(
        "client.dns.lookup",
        DNS_LOOKUP,
        Some("use_all_dns_ips"),
        DNS,
    ),
    k("security.providers", Ty::Str, None, JVM_TLS),
    k(
        "metadata.recovery.strategy",
        RECOVERY,
        Some("rebootstrap"),
        METADATA,
    ),
    k(
        "metadata.recovery.rebootstrap.trigger.ms",
        I64_GE0,
        Some("300000"),
        METADATA,
    ),
];

const CONNECT: Support =
    Support::Ignored("a Kafka Connect worker setting; strait runs no Connect worker");
const CONNECT_TOPICS: Support =
    Support::Ignored("strait keeps its progress in its own topic, not in MM2's Connect topics");

/// Connect `DistributedConfig` (with `WorkerConfig`), without the connection keys: the worker
/// MM2 runs per flow reads them from the target cluster's keys (`<target>.<key>`).
pub static WORKER_KEYS: &[KeyDef] = &[
    k(
        "client.dns.lookup",
        DNS_LOOKUP,
        Some("use_all_dns_ips"),
        DNS,
    ),
    k("key.converter", Ty::Class, None, CONVERTER),
    k("value.converter", Ty::Class, None, CONVERTER),
    k(
        "header.converter",
        Ty::Class,
        Some("org.apache.kafka.connect.storage.SimpleHeaderConverter"),
        CONVERTER,
    ),
    k(
        "task.shutdown.graceful.timeout.ms",
        I64,
        Some("5000"),
        CONNECT,
    ),
    k("offset.flush.interval.ms", I64_GE0, Some("60000"), U),
    k("offset.flush.timeout.ms", I64, Some("5000"), CONNECT),
    k("plugin.path", Ty::List, None, CONNECT),
    k(
        "plugin.discovery",
        Ty::EnumCi(&["only_scan", "hybrid_warn", "hybrid_fail", "service_load"]),
        Some("hybrid_warn"),
        CONNECT,
    ),
    k("metrics.sample.window.ms", I64_GE0, Some("30000"), METRICS),
    k("metrics.num.samples", I32_GE1, Some("2"), METRICS),
    k(
        "metrics.recording.level",
        Ty::Enum(&["INFO", "DEBUG"]),
        Some("INFO"),
        METRICS,
    ),
    k(
        "metric.reporters",
        Ty::List,
        Some("org.apache.kafka.common.metrics.JmxReporter"),
        METRICS,
    ),
    k(
        "connector.client.config.override.policy",
        Ty::Str,
        Some("All"),
        CONNECT,
    ),
    k("topic.creation.enable", Ty::Bool, Some("true"), CONNECT),
    k("topic.tracking.enable", Ty::Bool, Some("true"), CONNECT),
    k(
        "topic.tracking.allow.reset",
        Ty::Bool,
        Some("true"),
        CONNECT,
    ),
    k("admin.listeners", Ty::List, None, CONNECT),
    k("rest.extension.classes", Ty::List, Some(""), CONNECT),
    // DistributedConfig
    k("group.id", Ty::Str, None, CONNECT),
    k("session.timeout.ms", I32, Some("10000"), CONNECT),
    k("rebalance.timeout.ms", I32, Some("60000"), CONNECT),
    k("heartbeat.interval.ms", I32, Some("3000"), CONNECT),
    k(
        "exactly.once.source.support",
        Ty::Enum(&["disabled", "enabled", "preparing"]),
        Some("disabled"),
        U,
    ),
    k("metadata.max.age.ms", I64_GE0, Some("300000"), CONNECT),
    k("client.id", Ty::Str, Some(""), CONNECT),
    k("send.buffer.bytes", SOCKET_BUF, Some("131072"), CONNECT),
    k("receive.buffer.bytes", SOCKET_BUF, Some("32768"), CONNECT),
    k("reconnect.backoff.ms", I64_GE0, Some("50"), CONNECT),
    k("reconnect.backoff.max.ms", I64_GE0, Some("1000"), CONNECT),
    k(
        "socket.connection.setup.timeout.ms",
        I64_GE0,
        Some("10000"),
        CONNECT,
    ),
    k(
        "socket.connection.setup.timeout.max.ms",
        I64_GE0,
        Some("30000"),
        CONNECT,
    ),
    k("retry.backoff.ms", I64_GE0, Some("100"), CONNECT),
    k("retry.backoff.max.ms", I64_GE0, Some("1000"), CONNECT),
    k("request.timeout.ms", I32_GE0, Some("40000"), CONNECT),
    k("connections.max.idle.ms", I64, Some("540000"), CONNECT),
    k("worker.sync.timeout.ms", I32, Some("3000"), CONNECT),
    k("worker.unsync.backoff.ms", I32, Some("300000"), CONNECT),
    k("offset.storage.topic", Ty::Str, None, U),
    k(
        "offset.storage.partitions",
        Ty::Int(-1, i32::MAX as i64),
        Some("25"),
        CONNECT_TOPICS,
    ),
    // strait's progress topic is MM2's offsets topic: this is the default of
    // strait.progress.topic.replication.factor (resolve::progress_replication_factor).
    k(
        "offset.storage.replication.factor",
        Ty::ReplicationFactor,
        Some("3"),
        U,
    ),
    k("config.storage.topic", Ty::Str, None, CONNECT_TOPICS),
    k(
        "config.storage.replication.factor",
        Ty::ReplicationFactor,
        Some("3"),
        CONNECT_TOPICS,
    ),
    k("status.storage.topic", Ty::Str, None, CONNECT_TOPICS),
    k(
        "status.storage.partitions",
        Ty::Int(-1, i32::MAX as i64),
        Some("5"),
        CONNECT_TOPICS,
    ),
    k(
        "status.storage.replication.factor",
        Ty::ReplicationFactor,
        Some("3"),
        CONNECT_TOPICS,
    ),
    k(
        "connect.protocol",
        Ty::Enum(&["eager", "compatible", "sessioned"]),
        Some("sessioned"),
        CONNECT,
    ),
    k(
        "scheduled.rebalance.max.delay.ms",
        I32_GE0,
        Some("300000"),
        CONNECT,
    ),
    k("inter.worker.key.ttl.ms", I32_GE0, Some("3600000"), CONNECT),
    k(
        "inter.worker.key.generation.algorithm",
        Ty::Str,
        Some("HmacSHA256"),
        CONNECT,
    ),
    k("inter.worker.key.size", I32, None, CONNECT),
    k(
        "inter.worker.signature.algorithm",
        Ty::Str,
        Some("HmacSHA256"),
        CONNECT,
    ),
    k(
        "inter.worker.verification.algorithms",
        Ty::List,
        Some("HmacSHA256"),
        CONNECT,
    ),
    k(
        "metadata.recovery.strategy",
        RECOVERY,
        Some("rebootstrap"),
        CONNECT,
    ),
    k(
        "metadata.recovery.rebootstrap.trigger.ms",
        I64_GE0,
        Some("300000"),
        CONNECT,
    ),
];

/// The top-level key prefixes `MirrorMakerConfig.workerConfig` copies into every worker.
pub static WORKER_TOP_LEVEL_PREFIXES: &[&str] = &[
    "offset.storage",
    "config.storage",
    "status.storage",
    "key.converter",
    "value.converter",
    "header.converter",
    "task",
    "worker",
    "replication.policy",
    "config.providers",
];

const RESERVED_BY_MM2: Support =
    Support::Reserved("MirrorMaker sets it for each connector; a user value breaks the connectors");
const FILTER_CLASS: &str = "strait implements MM2's default filters only";

/// Connect `ConnectorConfig` and the three MM2 connector `ConfigDef`s
/// (`MirrorConnectorConfig`, `MirrorSourceConfig`, `MirrorCheckpointConfig`,
/// `MirrorHeartbeatConfig`), without the connection keys. Valid at top level (defaults for
/// every flow) and per flow.
pub static CONNECTOR_KEYS: &[KeyDef] = &[
    // Connect ConnectorConfig
    k("name", Ty::Str, None, RESERVED_BY_MM2),
    k("connector.class", Ty::Str, None, RESERVED_BY_MM2),
    k(
        "tasks.max",
        I32_GE1,
        Some("1"),
        Support::Ignored("one strait process runs every flow on all its shards"),
    ),
    k(
        "tasks.max.enforce",
        Ty::Bool,
        Some("true"),
        Support::Ignored("strait has no tasks"),
    ),
    k("key.converter", Ty::Class, None, CONVERTER),
    k("value.converter", Ty::Class, None, CONVERTER),
    k("header.converter", Ty::Class, None, CONVERTER),
    k(
        "transforms",
        Ty::List,
        Some(""),
        Support::OnlyValues(
            &[""],
            "single message transforms would need record decoding; strait copies batches",
        ),
    ),
    k(
        "predicates",
        Ty::List,
        Some(""),
        Support::OnlyValues(
            &[""],
            "predicates only serve transforms, which strait does not run",
        ),
    ),
    k(
        "config.action.reload",
        Ty::Enum(&["none", "restart"]),
        Some("restart"),
        Support::Ignored(
            "Connect restarts a connector when a config provider's value changes; strait does not watch providers: it re-reads the file and its ${env:..}/${file:..} values on `strait ctl reload`, POST /config/reload or SIGHUP",
        ),
    ),
    k(
        "errors.retry.timeout",
        I64,
        Some("0"),
        Support::Ignored("byte copying cannot fail conversion"),
    ),
    k(
        "errors.retry.delay.max.ms",
        I64,
        Some("60000"),
        Support::Ignored("byte copying cannot fail conversion"),
    ),
    k(
        "errors.tolerance",
        Ty::Enum(&["none", "all"]),
        Some("none"),
        Support::Ignored("byte copying cannot fail conversion"),
    ),
    k(
        "errors.log.enable",
        Ty::Bool,
        Some("false"),
        Support::Ignored("byte copying cannot fail conversion"),
    ),
    k(
        "errors.log.include.messages",
        Ty::Bool,
        Some("false"),
        Support::Ignored("byte copying cannot fail conversion"),
    ),
    // MirrorConnectorConfig
    k("enabled", Ty::Bool, Some("true"), U),
    k("source.cluster.alias", Ty::Str, None, RESERVED_BY_MM2),
    k(
        "target.cluster.alias",
        Ty::Str,
        Some("target"),
        RESERVED_BY_MM2,
    ),
    k("admin.timeout.ms", I64_GE0, Some("60000"), U),
    k(
        "replication.policy.class",
        Ty::Class,
        Some(crate::mm2::policy::DEFAULT_POLICY_CLASS),
        Support::OnlyValues(
            &[
                crate::mm2::policy::DEFAULT_POLICY_CLASS,
                crate::mm2::policy::IDENTITY_POLICY_CLASS,
            ],
            "strait implements MM2's Default and Identity replication policies only",
        ),
    ),
    k("replication.policy.separator", Ty::Str, Some("."), U),
    k(
        "replication.policy.internal.topic.separator.enabled",
        Ty::Bool,
        Some("true"),
        U,
    ),
    k(
        "forwarding.admin.class",
        Ty::Class,
        Some("org.apache.kafka.clients.admin.ForwardingAdmin"),
        Support::OnlyValues(
            &["org.apache.kafka.clients.admin.ForwardingAdmin"],
            "strait cannot load a custom admin class",
        ),
    ),
    k(
        "metric.reporters",
        Ty::List,
        Some("org.apache.kafka.common.metrics.JmxReporter"),
        METRICS,
    ),
    // MirrorSourceConfig
    k(
        "topics",
        Ty::Patterns,
        Some(crate::mm2::filter::TOPICS_DEFAULT),
        U,
    ),
    k(
        "topics.exclude",
        Ty::Patterns,
        Some(crate::mm2::filter::TOPICS_EXCLUDE_DEFAULT),
        U,
    ),
    k(
        "config.properties.exclude",
        Ty::Patterns,
        Some(crate::mm2::filter::CONFIG_PROPERTIES_EXCLUDE_DEFAULT),
        U,
    ),
    k(
        "topic.filter.class",
        Ty::Class,
        Some("org.apache.kafka.connect.mirror.DefaultTopicFilter"),
        Support::OnlyValues(
            &["org.apache.kafka.connect.mirror.DefaultTopicFilter"],
            FILTER_CLASS,
        ),
    ),
    k(
        "config.property.filter.class",
        Ty::Class,
        Some("org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter"),
        Support::OnlyValues(
            &["org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter"],
            FILTER_CLASS,
        ),
    ),
    k(
        "consumer.poll.timeout.ms",
        I64,
        Some("1000"),
        Support::Ignored("strait has no poll loop; fetch.max.wait.ms bounds each fetch"),
    ),
    k("refresh.topics.enabled", Ty::Bool, Some("true"), U),
    k("refresh.topics.interval.seconds", I64, Some("600"), U),
    k("sync.topic.configs.enabled", Ty::Bool, Some("true"), U),
    k("sync.topic.configs.interval.seconds", I64, Some("600"), U),
    k("sync.topic.acls.enabled", Ty::Bool, Some("true"), U),
    k("sync.topic.acls.interval.seconds", I64, Some("600"), U),
    k("replication.factor", Ty::ReplicationFactor, Some("2"), U),
    k(
        "offset-syncs.topic.replication.factor",
        Ty::ReplicationFactor,
        Some("3"),
        U,
    ),
    k("offset.lag.max", I64_GE0, Some("100"), U),
    k(
        "offset-syncs.topic.location",
        Ty::Enum(&["source", "target"]),
        Some("source"),
        U,
    ),
    k("emit.offset-syncs.enabled", Ty::Bool, Some("true"), U),
    k("heartbeats.replication.enabled", Ty::Bool, Some("true"), U),
    // MirrorCheckpointConfig
    k(
        "groups",
        Ty::Patterns,
        Some(crate::mm2::filter::GROUPS_DEFAULT),
        U,
    ),
    k(
        "groups.exclude",
        Ty::Patterns,
        Some(crate::mm2::filter::GROUPS_EXCLUDE_DEFAULT),
        U,
    ),
    k(
        "group.filter.class",
        Ty::Class,
        Some("org.apache.kafka.connect.mirror.DefaultGroupFilter"),
        Support::OnlyValues(
            &["org.apache.kafka.connect.mirror.DefaultGroupFilter"],
            FILTER_CLASS,
        ),
    ),
    k("refresh.groups.enabled", Ty::Bool, Some("true"), U),
    k("refresh.groups.interval.seconds", I64, Some("600"), U),
    k("emit.checkpoints.enabled", Ty::Bool, Some("true"), U),
    k("emit.checkpoints.interval.seconds", I64, Some("60"), U),
    k("sync.group.offsets.enabled", Ty::Bool, Some("false"), U),
    k("sync.group.offsets.interval.seconds", I64, Some("60"), U),
    k(
        "checkpoints.topic.replication.factor",
        Ty::ReplicationFactor,
        Some("3"),
        U,
    ),
    // MirrorHeartbeatConfig
    k("emit.heartbeats.enabled", Ty::Bool, Some("true"), U),
    k("emit.heartbeats.interval.seconds", I64, Some("1"), U),
    k(
        "heartbeats.topic.replication.factor",
        Ty::ReplicationFactor,
        Some("3"),
        U,
    ),
];

/// Keys MM2 passes to a connector only from the flow scope: they are not in the connector
/// `ConfigDef`s, so the top-level copy drops them, but the connectors (or the Connect
/// framework) read them from the connector config.
pub static FLOW_ONLY_KEYS: &[KeyDef] = &[
    k(
        "use.defaults.from",
        Ty::Enum(&["source", "target"]),
        Some(crate::mm2::filter::USE_DEFAULTS_FROM_DEFAULT),
        U,
    ),
    k(
        "exactly.once.support",
        Ty::EnumCi(&["requested", "required"]),
        Some("requested"),
        Support::OnlyValues(
            &["requested"],
            "strait has no per-connector requirement: exactly-once is on for every flow into a target with <target>.exactly.once.source.support=enabled",
        ),
    ),
    k(
        "transaction.boundary",
        Ty::EnumCi(&["poll", "interval", "connector"]),
        Some("poll"),
        Support::Ignored(
            "with exactly-once, strait commits each source partition's transaction every transaction.boundary.interval.ms (MirrorMaker's `interval` boundary), whatever this says",
        ),
    ),
    k("transaction.boundary.interval.ms", I64_GE0, None, U),
    k(
        "offsets.storage.topic",
        Ty::Str,
        None,
        Support::Ignored("strait imports MM2 progress from the worker's offset.storage.topic"),
    ),
    k(
        "topic.creation.groups",
        Ty::List,
        Some(""),
        Support::OnlyValues(
            &[""],
            "strait creates remote topics itself, as MM2's source connector does",
        ),
    ),
];

/// `MirrorMakerConfig`'s own keys (top level only), besides the connection keys.
pub static MM2_TOP_KEYS: &[KeyDef] = &[
    k("clusters", Ty::List, None, U),
    k(
        "dedicated.mode.enable.internal.rest",
        Ty::Bool,
        Some("false"),
        Support::Ignored("one strait process serves every flow; strait.api.listen sets its API"),
    ),
    k("config.providers", Ty::List, Some(""), U),
    // RestServerConfig.addInternalConfig
    k(
        "listeners",
        Ty::List,
        Some("http://:8083"),
        Support::Ignored("strait's API listens on strait.api.listen"),
    ),
    k(
        "rest.advertised.host.name",
        Ty::Str,
        None,
        Support::Ignored("strait's API listens on strait.api.listen"),
    ),
    k(
        "rest.advertised.port",
        I32,
        None,
        Support::Ignored("strait's API listens on strait.api.listen"),
    ),
    k(
        "rest.advertised.listener",
        Ty::Str,
        None,
        Support::Ignored("strait's API listens on strait.api.listen"),
    ),
    k(
        "access.control.allow.origin",
        Ty::Str,
        Some(""),
        Support::Ignored("strait's API sets no CORS headers"),
    ),
    k(
        "access.control.allow.methods",
        Ty::Str,
        Some(""),
        Support::Ignored("strait's API sets no CORS headers"),
    ),
    k(
        "response.http.headers.config",
        Ty::Str,
        Some(""),
        Support::Ignored("strait's API sets its own headers"),
    ),
    k(
        "ssl.client.auth",
        Ty::Enum(&["required", "requested", "none"]),
        Some("none"),
        Support::Ignored("strait's API has no TLS listener"),
    ),
];

/// strait's own settings (top level only).
pub static STRAIT_KEYS: &[KeyDef] = &[
    s(
        "strait.shards",
        Ty::Int(0, 1024),
        Some("0"),
        Reload::Refused("the shard threads are started once; restart to apply"),
    ),
    // Which CPUs the shards run on (`run::start`); empty: the inherited affinity mask.
    s(
        "strait.cpus",
        Ty::CpuList,
        None,
        Reload::Refused("the shard threads are placed once, at start; restart to apply"),
    ),
    // Whether the shard and control threads are pinned at all (`run::start`).
    s(
        "strait.cpus.pin",
        Ty::Bool,
        Some("true"),
        Reload::Refused("the shard threads are placed once, at start; restart to apply"),
    ),
    s(
        "strait.io",
        Ty::Enum(&["auto", "uring", "epoll"]),
        Some("auto"),
        Reload::Refused("the shards' IO backend is chosen at start; restart to apply"),
    ),
    s(
        "strait.api.listen",
        Ty::ListenAddr,
        Some("127.0.0.1:8787"),
        API_AT_START,
    ),
    s("strait.api.token", Ty::Password, None, API_AT_START),
    s(
        "strait.api.command.queue",
        Ty::Int(1, 65536),
        Some("64"),
        API_AT_START,
    ),
    s(
        "strait.api.ssl.keystore.location",
        Ty::Str,
        None,
        API_AT_START,
    ),
    s(
        "strait.api.ssl.keystore.password",
        Ty::Password,
        None,
        API_AT_START,
    ),
    s(
        "strait.api.ssl.key.password",
        Ty::Password,
        None,
        API_AT_START,
    ),
    s(
        "strait.memory.bytes",
        Ty::Long(1 << 20, 1 << 40),
        Some("100663296"),
        Reload::Refused("the shards' memory budget is set at start; restart to apply"),
    ),
    s(
        "strait.progress.topic.replication.factor",
        Ty::ReplicationFactor,
        Some("3"),
        AT_START,
    ),
    s(
        "strait.on.lost.position",
        Ty::Enum(&["fail", "earliest"]),
        Some("fail"),
        AT_START,
    ),
    // Bounds are MIN_MAX_SEGMENTS and MAX_MAX_SEGMENTS of model::mapping_cost.
    s(
        "strait.mapping.max.runs.per.partition",
        Ty::Int(256, 16_384),
        Some("1024"),
        Reload::Refused("sizes the offset mapping restored at start; restart to apply"),
    ),
    s(
        "strait.metrics.enabled",
        Ty::Bool,
        Some("true"),
        Reload::Refused("the metrics registry is built at start; restart to apply"),
    ),
    s(
        "strait.metrics.per.partition",
        Ty::Bool,
        Some("true"),
        Reload::Refused("the metrics registry is built at start; restart to apply"),
    ),
    s(
        "strait.health.stall.timeout.ms",
        Ty::Long(1_000, 86_400_000),
        Some("60000"),
        AT_START,
    ),
    // Continuous verification (`run::verifier`): off by default.
    s("strait.verify.enabled", Ty::Bool, Some("false"), AT_START),
    s(
        "strait.verify.from",
        Ty::Enum(&["run", "history"]),
        Some("run"),
        AT_START,
    ),
    s(
        "strait.verify.interval.ms",
        Ty::Long(1_000, 86_400_000),
        Some("60000"),
        AT_START,
    ),
    s(
        "strait.verify.sample.rate",
        Ty::Double(0.000_001, 1.0),
        Some("1.0"),
        AT_START,
    ),
    s(
        "strait.verify.max.records.per.round",
        Ty::Long(1_000, 1_000_000_000),
        Some("1000000"),
        AT_START,
    ),
    // Groups of instances (`run::group`). The id defaults to `strait-<digest of the file>`, so
    // that instances started with the same file form one group; the cluster to the target of
    // the first enabled flow.
    s("strait.group.id", Ty::Str, None, GROUP_AT_START),
    s("strait.group.cluster", Ty::Str, None, GROUP_AT_START),
    s("strait.group.instance.id", Ty::Str, None, GROUP_AT_START),
    s(
        "strait.group.session.timeout.ms",
        Ty::Int(1000, 1_800_000),
        Some("10000"),
        GROUP_AT_START,
    ),
    s(
        "strait.group.heartbeat.interval.ms",
        Ty::Int(100, 600_000),
        Some("3000"),
        GROUP_AT_START,
    ),
    s(
        "strait.group.rebalance.timeout.ms",
        Ty::Int(1000, 1_800_000),
        Some("30000"),
        GROUP_AT_START,
    ),
];

/// Keys that older releases accepted and 4.0 removed, with their replacement.
pub static REMOVED_KEYS: &[(&str, &str, &str)] = &[
    (
        "topics.blacklist",
        "topics.exclude",
        "removed in Kafka 4.0 (KAFKA-17529)",
    ),
    (
        "topics.whitelist",
        "topics",
        "removed in Kafka 4.0 (KAFKA-17529)",
    ),
    (
        "groups.blacklist",
        "groups.exclude",
        "removed in Kafka 4.0 (KAFKA-17529)",
    ),
    (
        "groups.whitelist",
        "groups",
        "removed in Kafka 4.0 (KAFKA-17529)",
    ),
    (
        "config.properties.blacklist",
        "config.properties.exclude",
        "removed in Kafka 4.0 (KAFKA-17529)",
    ),
    (
        "auto.include.jmx.reporter",
        "metric.reporters",
        "removed in Kafka 4.0 (KIP-830)",
    ),
];

/// Client key prefixes Kafka clients accept with any suffix.
pub static CLIENT_DYNAMIC_PREFIXES: &[&str] = &["metrics.context."];

/// Finds `name` in `table`.
pub fn find(table: &'static [KeyDef], name: &str) -> Option<&'static KeyDef> {
    table.iter().find(|d| d.name == name)
}

/// The client kinds whose keys can follow `consumer.`, `producer.` or `admin.`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// `consumer.`
    Consumer,
    /// `producer.`
    Producer,
    /// `admin.`
    Admin,
}

impl ClientKind {
    /// All three.
    pub const ALL: [ClientKind; 3] = [
        ClientKind::Consumer,
        ClientKind::Producer,
        ClientKind::Admin,
    ];

    /// `consumer`, `producer` or `admin`.
    pub fn prefix(self) -> &'static str {
        match self {
            ClientKind::Consumer => "consumer",
            ClientKind::Producer => "producer",
            ClientKind::Admin => "admin",
        }
    }

    /// This client's own keys (the connection keys apply to every kind).
    pub fn table(self) -> &'static [KeyDef] {
        match self {
            ClientKind::Consumer => CONSUMER_KEYS,
            ClientKind::Producer => PRODUCER_KEYS,
            ClientKind::Admin => ADMIN_KEYS,
        }
    }

    /// The definition of a key of this client.
    pub fn find(self, name: &str) -> Option<&'static KeyDef> {
        find(CONNECTION_KEYS, name).or_else(|| find(self.table(), name))
    }
}

/// Whether a key carries a secret and must never be printed.
pub fn is_secret_key(key: &str) -> bool {
    let last = key.rsplit("->").next().unwrap_or(key);
    let lower = last.to_ascii_lowercase();
    lower.contains("password")
        || lower.contains("secret")
        || lower.contains("passphrase")
        || lower.ends_with("sasl.jaas.config")
        || lower.ends_with("ssl.keystore.key")
        || lower.ends_with("ssl.keystore.certificate.chain")
        || lower.ends_with("ssl.truststore.certificates")
        || lower.ends_with("api.token")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn all_tables() -> Vec<(&'static str, &'static [KeyDef])> {
        vec![
            ("connection", CONNECTION_KEYS),
            ("consumer", CONSUMER_KEYS),
            ("producer", PRODUCER_KEYS),
            ("admin", ADMIN_KEYS),
            ("worker", WORKER_KEYS),
            ("connector", CONNECTOR_KEYS),
            ("flow-only", FLOW_ONLY_KEYS),
            ("mm2", MM2_TOP_KEYS),
            ("strait", STRAIT_KEYS),
        ]
    }

    #[test]
    fn no_duplicate_names_within_a_table() {
        for (name, table) in all_tables() {
            let mut seen = BTreeSet::new();
            for d in table {
                assert!(seen.insert(d.name), "{name}: {} twice", d.name);
            }
        }
    }

    #[test]
    fn client_tables_do_not_repeat_connection_keys() {
        for table in [
            CONSUMER_KEYS,
            PRODUCER_KEYS,
            ADMIN_KEYS,
            WORKER_KEYS,
            CONNECTOR_KEYS,
        ] {
            for d in table {
                assert!(
                    find(CONNECTION_KEYS, d.name).is_none(),
                    "{} is a connection key",
                    d.name
                );
            }
        }
    }

    #[test]
    fn defaults_are_valid_for_their_types() {
        for (name, table) in all_tables() {
            for d in table {
                if let Some(v) = d.default {
                    let r = crate::config::values::check_type(d.ty, v);
                    assert!(r.is_ok(), "{name}: default of {} = {v:?}: {r:?}", d.name);
                }
            }
        }
    }

    #[test]
    fn mm2_defaults_match_the_reference() {
        let get = |n: &str| find(CONNECTOR_KEYS, n).and_then(|d| d.default);
        assert_eq!(get("replication.factor"), Some("2"));
        assert_eq!(get("offset.lag.max"), Some("100"));
        assert_eq!(get("refresh.topics.interval.seconds"), Some("600"));
        assert_eq!(get("refresh.groups.interval.seconds"), Some("600"));
        assert_eq!(get("emit.checkpoints.interval.seconds"), Some("60"));
        assert_eq!(get("sync.group.offsets.enabled"), Some("false"));
        assert_eq!(get("emit.heartbeats.interval.seconds"), Some("1"));
        assert_eq!(get("offset-syncs.topic.location"), Some("source"));
        assert_eq!(
            find(WORKER_KEYS, "offset.flush.interval.ms").and_then(|d| d.default),
            Some("60000")
        );
        assert_eq!(
            find(CONSUMER_KEYS, "isolation.level").and_then(|d| d.default),
            Some("read_uncommitted")
        );
    }

    #[test]
    fn secrets() {
        for key in [
            "sasl.jaas.config",
            "A.sasl.jaas.config",
            "A.consumer.ssl.truststore.password",
            "A->B.source.cluster.ssl.keystore.key",
            "ssl.key.password",
            "A.sasl.oauthbearer.client.credentials.client.secret",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in ["bootstrap.servers", "A.ssl.truststore.location", "topics"] {
            assert!(!is_secret_key(key), "{key}");
        }
        for d in CONNECTION_KEYS {
            if d.ty.is_secret() {
                assert!(is_secret_key(d.name), "{} is typed secret", d.name);
            }
        }
    }
}
