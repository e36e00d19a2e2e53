//! The config corpus: real-world `mm2.properties` files (Kafka's sample, the docs and
//! KIP-382 examples, the test bed, SASL_SSL, providers) and broken ones. Every error is
//! asserted with its exact key, line, kind and suggestion.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use strait_control::config::{
    self, ConfigError, ErrorKind, Mm2Config, OffsetSyncsLocation, Origin, Severity, StaticEnv,
    WarningKind,
};
use strait_dataplane::wire::{SaslMechanism, SecurityProtocol, TrustStore};

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/config_corpus")
        .join(name)
}

fn disk() -> StaticEnv {
    StaticEnv::new().with_disk()
}

fn load(name: &str, env: &StaticEnv) -> Mm2Config {
    match config::load_with(&corpus(name), env) {
        Ok(c) => c,
        Err(e) => panic!("{name} should load:\n{e}"),
    }
}

/// (key, line, kind, suggestion) of every error, in report order.
type Expected<'a> = (Option<&'a str>, Option<u32>, ErrorKind, Option<&'a str>);

fn errors(name: &str, env: &StaticEnv) -> Vec<ConfigError> {
    match config::load_with(&corpus(name), env) {
        Ok(_) => panic!("{name} should not load"),
        Err(e) => e.0,
    }
}

fn assert_errors(name: &str, env: &StaticEnv, want: &[Expected]) {
    let got = errors(name, env);
    let got_t: Vec<Expected> = got
        .iter()
        .map(|e| (e.key.as_deref(), e.line, e.kind, e.suggestion.as_deref()))
        .collect();
    assert_eq!(
        got_t,
        want,
        "{name}: errors were\n{}",
        got.iter().map(|e| format!("  {e}\n")).collect::<String>()
    );
}

fn line(o: &Origin) -> Option<u32> {
    match o {
        Origin::File { line, .. } => Some(*line),
        _ => None,
    }
}

fn warning_kinds(c: &Mm2Config, severity: Severity) -> Vec<(WarningKind, Option<u32>)> {
    c.warnings
        .iter()
        .filter(|w| w.severity == severity)
        .map(|w| (w.kind, w.line))
        .collect()
}

#[test]
fn kafka_sample_file() {
    let c = load("mm2-sample.properties", &disk());
    assert_eq!(c.flows.len(), 2);
    for f in &c.flows {
        assert!(f.enabled.value, "{}", f.name());
        assert_eq!(f.replication_factor.value, 1);
        assert_eq!(line(&f.replication_factor.origin), Some(39));
        assert_eq!(f.checkpoints_topic_replication_factor.value, 1);
        assert_eq!(f.topics.value, vec![".*".to_string()]);
    }
    let ab = c.flow("A", "B").expect("A->B");
    assert_eq!(line(&ab.topics.origin), Some(33));
    assert_eq!(ab.clients.source_consumer.client.bootstrap_servers.len(), 3);
    assert_eq!(
        ab.clients.source_consumer.client.bootstrap_servers[0].to_string(),
        "A_host1:9092"
    );
    // Default policy: B's topics coming back to B are cycles.
    let ba = c.flow("B", "A").expect("B->A");
    assert!(!ba.should_replicate_topic("A.orders"));
    assert!(ba.should_replicate_topic("orders"));
    // No trap warnings: the only notes are the ignored Connect storage settings and the
    // strait-default and offset.lag.max notes.
    assert!(
        warning_kinds(&c, Severity::Warning)
            .iter()
            .all(|(k, _)| *k == WarningKind::GroupOffsetSyncDisabled)
    );
    let ignored: Vec<Option<u32>> = c
        .warnings
        .iter()
        .filter(|w| w.kind == WarningKind::IgnoredKey)
        .map(|w| w.line)
        .collect();
    // offset.storage.replication.factor (line 52) sizes strait's progress topic, which stands
    // in for MM2's offsets topic: a single broker runs the sample.
    assert_eq!(ignored, vec![Some(53), Some(54)]);
    for f in &c.flows {
        let rf = &f.progress_topic_replication_factor;
        assert_eq!(rf.value, 1, "{}", f.name());
        assert!(
            matches!(
                rf.origin,
                Origin::FromKey {
                    key: "offset.storage.replication.factor",
                    line: 52,
                    ..
                }
            ),
            "{:?}",
            rf.origin
        );
    }
}

#[test]
fn testbed_one_way_file() {
    let c = load("testbed-one-way.properties", &disk());
    // A->B replicates; B->A heartbeats are off, so there is no B->A flow.
    let names: Vec<String> = c.flows.iter().map(|f| f.name()).collect();
    assert_eq!(names, vec!["A->B".to_string()]);
    let f = &c.flows[0];
    assert_eq!(f.topics.value, vec!["test-.*".to_string()]);
    assert!(f.should_replicate_topic("test-1"));
    assert!(!f.should_replicate_topic("prod-1"));
    assert_eq!(f.refresh_topics_interval_seconds.value, 5);
    assert_eq!(line(&f.refresh_topics_interval_seconds.origin), Some(14));
    assert!(f.sync_group_offsets_enabled.value);
    assert!(!f.sync_topic_acls_enabled.value);
    assert_eq!(
        f.clients.target_producer.client.bootstrap_servers[0].to_string(),
        "127.0.0.1:19092"
    );
    assert_eq!(f.heartbeats_topic_replication_factor.value, 1);
}

#[test]
fn ops_geo_replication_file() {
    let c = load("ops-geo-replication.properties", &disk());
    let f = c.flow("primary", "secondary").expect("flow");
    assert_eq!(
        f.topics.value,
        vec!["foobar-topic".to_string(), "quux-.*".to_string()]
    );
    assert!(f.should_replicate_topic("foobar-topic"));
    assert!(f.should_replicate_topic("quux-1"));
    assert!(!f.should_replicate_topic("foobar"));
    assert_eq!(f.remote_topic("quux-1"), "primary_quux-1");
    // `primary.admin.bootstrap.servers` replaces the cluster address for admin clients only.
    assert_eq!(
        f.clients.source_admin.client.bootstrap_servers[0].to_string(),
        "broker57-primary:9092"
    );
    assert_eq!(
        f.clients.source_consumer.client.bootstrap_servers[0].to_string(),
        "broker3-primary:9092"
    );
    assert_eq!(
        f.clients.target_admin.client.bootstrap_servers[0].to_string(),
        "broker8-secondary:9092"
    );
    assert_eq!(
        line(&f.clients.source_consumer.isolation_level.origin),
        Some(13)
    );
    // `primary.offset.storage.topic` concerns flows into primary.
    assert_eq!(f.mm2_offsets_topic.value, "mm2-offsets.primary.internal");
    let back = c.flow("secondary", "primary").expect("heartbeats");
    assert!(back.heartbeats_only);
    assert_eq!(back.mm2_offsets_topic.value, "my-mirrormaker-offsets");
    let warnings = warning_kinds(&c, Severity::Warning);
    assert!(
        warnings.contains(&(WarningKind::TasksMax, Some(11))),
        "{warnings:?}"
    );
    assert!(
        warnings.contains(&(WarningKind::ReplicationFactorDefault, None)),
        "{warnings:?}"
    );
    let notes = warning_kinds(&c, Severity::Note);
    assert!(
        notes.contains(&(WarningKind::IgnoredKey, Some(15))),
        "{notes:?}"
    );
    assert!(
        notes.contains(&(WarningKind::IgnoredKey, Some(16))),
        "{notes:?}"
    );
}

#[test]
fn active_active_file() {
    let c = load("active-active.properties", &disk());
    let ew = c.flow("east", "west").expect("east->west");
    let we = c.flow("west", "east").expect("west->east");
    assert!(ew.enabled.value && we.enabled.value);
    // The later replication.factor wins and the duplicate is reported with both lines.
    assert_eq!(ew.replication_factor.value, 3);
    assert_eq!(line(&ew.replication_factor.origin), Some(24));
    assert!(
        c.warnings
            .iter()
            .any(|w| w.kind == WarningKind::DuplicateKey
                && w.line == Some(24)
                && w.message.contains("line 12"))
    );
    assert_eq!(we.topics.value, vec!["orders.*".to_string()]);
    assert_eq!(
        ew.topics.value,
        vec!["orders.*".to_string(), "payments.*".to_string()]
    );
    // Cycle detection with the default policy.
    assert!(ew.should_replicate_topic("orders"));
    assert!(!ew.should_replicate_topic("west.orders"));
    assert!(!we.should_replicate_topic("east.orders"));
    assert_eq!(
        we.offset_syncs_topic_location.value,
        OffsetSyncsLocation::Target
    );
    assert_eq!(we.offset_syncs_topic(), "mm2-offset-syncs.west.internal");
    assert_eq!(we.clients.offset_syncs_admin.client.cluster, "east");
    assert_eq!(ew.offset_syncs_topic(), "mm2-offset-syncs.west.internal");
    assert_eq!(ew.clients.offset_syncs_admin.client.cluster, "east");
    assert_eq!(
        ew.clients.source_consumer.fetch_max_bytes.value,
        104_857_600
    );
    assert_eq!(ew.clients.target_producer.max_request_size.value, 4_194_304);
    assert_eq!(
        we.clients.offset_syncs_producer.max_request_size.value,
        1_048_576
    );
    assert!(ew.group_filter.should_replicate_group("app"));
    assert!(!ew.group_filter.should_replicate_group("test-1"));
    assert!(we.group_filter.should_replicate_group("test-1"));
    assert!(
        !c.warnings
            .iter()
            .any(|w| w.kind == WarningKind::GroupOffsetSyncDisabled)
    );
}

#[test]
fn sasl_ssl_file() {
    let c = load("sasl-ssl.properties", &disk());
    let f = c.flow("onprem", "cloud").expect("flow");
    let src = &f.clients.source_consumer.client.conn;
    assert_eq!(src.security_protocol, SecurityProtocol::SaslSsl);
    let sasl = src.sasl.as_ref().expect("sasl");
    assert_eq!(sasl.mechanism, SaslMechanism::ScramSha512);
    assert_eq!(
        sasl.user_password().map(|(u, p)| (u, p.expose())),
        Some(("mirror", "s3cr3t-\"quoted\""))
    );
    assert_eq!(
        src.tls.as_ref().map(|t| t.truststore.clone()),
        Some(TrustStore::PemFile("/etc/kafka/onprem-ca.pem".into()))
    );
    let dst = &f.clients.target_producer.client.conn;
    let sasl = dst.sasl.as_ref().expect("sasl");
    assert_eq!(sasl.mechanism, SaslMechanism::Plain);
    assert_eq!(
        sasl.user_password().map(|(u, p)| (u, p.expose())),
        Some(("API_KEY", "API_SECRET"))
    );
    match dst.tls.as_ref().map(|t| &t.truststore) {
        Some(TrustStore::PemInline(pem)) => {
            // Rebuilt line by line: the continuation joined it into one line.
            assert_eq!(
                pem,
                "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUExample\n-----END CERTIFICATE-----\n"
            );
        }
        other => panic!("inline PEM expected, got {other:?}"),
    }
    // No secret in the report or in debug output.
    let report = config::check_with(&corpus("sasl-ssl.properties"), &disk()).render();
    for secret in ["s3cr3t", "API_SECRET"] {
        assert!(!report.contains(secret), "{secret} leaked into the report");
        assert!(
            !format!("{c:?}").contains(secret),
            "{secret} leaked into Debug"
        );
    }
    assert!(
        report.contains("sasl=SCRAM-SHA-512 user=mirror"),
        "{report}"
    );
}

fn provider_env() -> StaticEnv {
    disk()
        .var("A_BOOTSTRAP", "a1:9092,a2:9092")
        .file(
            "/etc/strait/secrets/b.properties",
            "jaas = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"b\" password=\"from-file\";\n",
        )
        .file("/etc/strait/ca.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
}

#[test]
fn providers_file() {
    let c = load("providers.properties", &provider_env());
    let f = c.flow("A", "B").expect("flow");
    let addrs: Vec<String> = f
        .clients
        .source_consumer
        .client
        .bootstrap_servers
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert_eq!(addrs, vec!["a1:9092".to_string(), "a2:9092".to_string()]);
    let dst = &f.clients.target_producer.client.conn;
    assert_eq!(
        dst.sasl
            .as_ref()
            .and_then(|s| s.user_password())
            .map(|(_, p)| p.expose()),
        Some("from-file")
    );
    assert_eq!(
        dst.tls.as_ref().map(|t| t.truststore.clone()),
        Some(TrustStore::PemInline(
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into()
        ))
    );
    // `env` and `file` are not declared: MirrorMaker would not resolve them.
    let notes: Vec<(WarningKind, Option<u32>)> = warning_kinds(&c, Severity::Note)
        .into_iter()
        .filter(|(k, _)| *k == WarningKind::ProviderNotDeclared)
        .collect();
    assert_eq!(
        notes,
        vec![
            (WarningKind::ProviderNotDeclared, Some(6)),
            (WarningKind::ProviderNotDeclared, Some(12))
        ]
    );
    let report = config::check_with(&corpus("providers.properties"), &provider_env()).render();
    assert!(!report.contains("from-file"), "{report}");
}

#[test]
fn providers_broken_file() {
    assert_errors(
        "providers-broken.properties",
        &disk(),
        &[
            (
                Some("A.bootstrap.servers"),
                Some(2),
                ErrorKind::Provider,
                None,
            ),
            (
                Some("B.bootstrap.servers"),
                Some(3),
                ErrorKind::Provider,
                None,
            ),
            (
                Some("A.sasl.jaas.config"),
                Some(6),
                ErrorKind::Provider,
                None,
            ),
            (
                Some("B.ssl.truststore.location"),
                Some(10),
                ErrorKind::Provider,
                None,
            ),
            (
                Some("config.providers.vault.class"),
                Some(11),
                ErrorKind::Provider,
                None,
            ),
        ],
    );
    let errs = errors("providers-broken.properties", &disk());
    assert!(errs[0].message.contains("MISSING_VAR"), "{}", errs[0]);
    assert!(
        errs[2].message.contains("unknown config provider `vault`"),
        "{}",
        errs[2]
    );
    assert!(errs[3].message.contains("allowed.paths"), "{}", errs[3]);
}

#[test]
fn kip382_readme_file() {
    assert_errors(
        "kip382-readme.properties",
        &disk(),
        &[
            (
                Some("us-west->us-east.emit.heartbeats"),
                Some(14),
                ErrorKind::UnknownKey,
                Some("us-west->us-east.emit.heartbeats.enabled"),
            ),
            (
                Some("us-west->us-east.enabled"),
                Some(16),
                ErrorKind::InvalidValue,
                None,
            ),
        ],
    );
}

#[test]
fn ops_geo_traps_file() {
    assert_errors(
        "ops-geo-traps.properties",
        &disk(),
        &[
            (Some("clusters"), Some(2), ErrorKind::InvalidValue, None),
            (
                Some("us-west->us.east.topics"),
                Some(10),
                ErrorKind::UnknownCluster,
                Some("us-west->us-east.topics"),
            ),
            (
                Some("Us-east.bootstrap.servers"),
                Some(13),
                ErrorKind::UnknownCluster,
                Some("us-east.bootstrap.servers"),
            ),
            (
                Some("us-west->us-east.emit.heartbeats"),
                Some(15),
                ErrorKind::UnknownKey,
                Some("us-west->us-east.emit.heartbeats.enabled"),
            ),
        ],
    );
    let report = config::check_with(&corpus("ops-geo-traps.properties"), &disk());
    assert!(report.has_errors());
    assert!(report.config.is_none());
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::InlineComment && w.line == Some(6))
    );
    let text = report.render();
    assert!(
        text.contains("line 10: `us-west->us.east.topics`"),
        "{text}"
    );
    assert!(
        text.contains("did you mean `us-west->us-east.topics`?"),
        "{text}"
    );
    assert!(text.contains("FAILED: 4 error(s)"), "{text}");
}

#[test]
fn readme_traps_file() {
    assert_errors(
        "readme-traps.properties",
        &disk(),
        &[
            (
                Some("backup.security.protocol"),
                Some(5),
                ErrorKind::InvalidValue,
                None,
            ),
            (
                Some("backup->primary.enabled"),
                Some(8),
                ErrorKind::InvalidValue,
                None,
            ),
            (
                Some("primary->backup.topics.blacklist"),
                Some(9),
                ErrorKind::RemovedKey,
                Some("primary->backup.topics.exclude"),
            ),
            (
                Some("primary->backup.sync.group.offsets"),
                Some(11),
                ErrorKind::UnknownKey,
                Some("primary->backup.sync.group.offsets.enabled"),
            ),
        ],
    );
}

#[test]
fn misplaced_and_misspelled_keys() {
    use ErrorKind::*;
    assert_errors(
        "misplaced.properties",
        &disk(),
        &[
            (Some("A.topics"), Some(8), MisplacedKey, Some("A->B.topics")),
            (
                Some("A->B.bootstrap.servers"),
                Some(9),
                MisplacedKey,
                Some("A.bootstrap.servers"),
            ),
            (Some("topic"), Some(10), UnknownKey, Some("topics")),
            (
                Some("offset.flush.interval.ms"),
                Some(11),
                MisplacedKey,
                Some("B.offset.flush.interval.ms"),
            ),
            (
                Some("use.defaults.from"),
                Some(12),
                MisplacedKey,
                Some("A->B.use.defaults.from"),
            ),
            (
                Some("consumer.fetch.min.bytes"),
                Some(13),
                MisplacedKey,
                Some("A.consumer.fetch.min.bytes"),
            ),
            (Some("C.bootstrap.servers"), Some(14), UnknownCluster, None),
            (Some("A->C.topics"), Some(15), UnknownCluster, None),
            (
                Some("A->B.emit.heartbeat.enabled"),
                Some(16),
                UnknownKey,
                Some("A->B.emit.heartbeats.enabled"),
            ),
            (
                Some("A.consumer.fetch.max.byte"),
                Some(17),
                UnknownKey,
                Some("A.consumer.fetch.max.bytes"),
            ),
            (
                Some("A->B.strait.shards"),
                Some(18),
                MisplacedKey,
                Some("strait.shards"),
            ),
            (Some("B.clusters"), Some(19), MisplacedKey, Some("clusters")),
            (
                Some("A->B.offset.syncs.topic.location"),
                Some(20),
                UnknownKey,
                Some("A->B.offset-syncs.topic.location"),
            ),
            (
                Some("topics.blacklist"),
                Some(21),
                RemovedKey,
                Some("topics.exclude"),
            ),
            (
                Some("A->B.groups.blacklist"),
                Some(22),
                RemovedKey,
                Some("A->B.groups.exclude"),
            ),
            (
                Some("A->B.offset.flush.interval.ms"),
                Some(23),
                MisplacedKey,
                Some("B.offset.flush.interval.ms"),
            ),
            (
                Some("A.sasl.jaas.confg"),
                Some(24),
                UnknownKey,
                Some("A.sasl.jaas.config"),
            ),
            (
                Some("emit.heartbeat.interval.seconds"),
                Some(25),
                UnknownKey,
                Some("emit.heartbeats.interval.seconds"),
            ),
            (
                Some("A->B.source.cluster.fetch.min.bytes"),
                Some(26),
                MisplacedKey,
                None,
            ),
            (
                Some("A->B.security.protocol"),
                Some(27),
                MisplacedKey,
                Some("A.security.protocol"),
            ),
            (
                Some("refresh.topic.interval.seconds"),
                Some(28),
                UnknownKey,
                Some("refresh.topics.interval.seconds"),
            ),
            (
                Some("sync.group.offset.enabled"),
                Some(29),
                UnknownKey,
                Some("sync.group.offsets.enabled"),
            ),
        ],
    );
}

#[test]
fn invalid_values() {
    use ErrorKind::*;
    assert_errors(
        "values.properties",
        &disk(),
        &[
            (Some("B.bootstrap.servers"), Some(4), InvalidValue, None),
            (Some("replication.factor"), Some(6), InvalidValue, None),
            (
                Some("offset-syncs.topic.location"),
                Some(7),
                InvalidValue,
                None,
            ),
            (Some("A->B.topics"), Some(8), InvalidValue, None),
            (Some("A->B.offset.lag.max"), Some(9), InvalidValue, None),
            (
                Some("A->B.replication.factor"),
                Some(10),
                InvalidValue,
                None,
            ),
            (
                Some("A->B.emit.checkpoints.enabled"),
                Some(11),
                InvalidValue,
                None,
            ),
            (Some("A.sasl.mechanism"), Some(13), Unsupported, None),
            (Some("B.ssl.keystore.password"), Some(17), Tls, None),
            (
                Some("replication.policy.class"),
                Some(18),
                Unsupported,
                None,
            ),
            (Some("A->B.transforms"), Some(19), Unsupported, None),
            (Some("name"), Some(20), Reserved, None),
            (
                Some("B.exactly.once.source.support"),
                Some(21),
                InvalidValue,
                None,
            ),
            (Some("strait.io"), Some(23), InvalidValue, None),
            (Some("strait.memory.bytes"), Some(24), InvalidValue, None),
            (Some("A->B.groups"), Some(25), InvalidValue, None),
            (
                Some("A->B.refresh.groups.interval.seconds"),
                Some(26),
                InvalidValue,
                None,
            ),
            (None, Some(27), Syntax, None),
            (
                Some("C.bootstrap.servers"),
                None,
                Missing,
                Some("C.bootstrap.servers"),
            ),
        ],
    );
    let errs = errors("values.properties", &disk());
    let topics = errs.iter().find(|e| e.line == Some(8)).expect("line 8");
    assert!(topics.message.contains("payments["), "{topics}");
    let pw = errs.iter().find(|e| e.line == Some(17)).expect("line 17");
    assert!(!pw.to_string().contains("changeit"), "{pw}");
}

#[test]
fn check_report_renders_effective_configuration() {
    let report = config::check_with(&corpus("testbed-one-way.properties"), &disk());
    assert!(!report.has_errors());
    let text = report.render();
    for want in [
        "flow A->B (replicating)",
        "topics = test-.* (line 5)",
        "refresh.topics.interval.seconds = 5 (line 14)",
        "isolation.level = read_committed (strait default:",
        "replication.factor = 1 (line 7)",
        "offset.lag.max = 100 (MM2 default)",
        "replication-consumer @ A [127.0.0.1:9092]",
        "client.id = A->B|strait|replication-consumer",
        "strait.shards = 0 (strait default:",
        "OK",
    ] {
        assert!(text.contains(want), "missing `{want}` in\n{text}");
    }
}

#[test]
fn unreadable_file() {
    let report = config::check_with(&corpus("does-not-exist.properties"), &disk());
    assert!(report.has_errors());
    assert_eq!(report.errors[0].kind, ErrorKind::Io);
}

/// The rules between `strait.*` keys live in the config layer: `strait check` (through the
/// binary) refuses a file that breaks them, naming the keys and their lines, and `strait run`
/// refuses it before connecting anywhere, with the same errors.
#[test]
fn strait_check_and_run_refuse_contradicting_strait_keys() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("mm2.properties");
    std::fs::write(
        &path,
        "clusters = A, B, C\n\
         A.bootstrap.servers = 127.0.0.1:1\n\
         B.bootstrap.servers = 127.0.0.1:1\n\
         C.bootstrap.servers = 127.0.0.1:1\n\
         A->B.enabled = true\n\
         strait.group.session.timeout.ms = 6000\n\
         strait.group.heartbeat.interval.ms = 2500\n\
         strait.group.cluster = C\n\
         strait.api.ssl.key.password = hunter2\n",
    )
    .expect("write the file");
    let bin = env!("CARGO_BIN_EXE_strait");
    let check = std::process::Command::new(bin)
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .expect("strait check runs");
    let out = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{out}");
    for want in [
        "line 7: `strait.group.heartbeat.interval.ms`: strait.group.heartbeat.interval.ms = 2500 must be at most a third of strait.group.session.timeout.ms = 6000",
        "line 8: `strait.group.cluster`: `C` is not a cluster of any enabled flow",
        "line 9: `strait.api.ssl.key.password`: is set but strait.api.ssl.keystore.location is not",
        "FAILED: 3 error(s)",
    ] {
        assert!(out.contains(want), "missing `{want}` in\n{out}");
    }
    assert!(!out.contains("hunter2"), "{out}");
    let run = std::process::Command::new(bin)
        .args(["run", "--config"])
        .arg(&path)
        .output()
        .expect("strait run runs");
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert!(
        err.contains("3 configuration error(s)")
            && err.contains("strait.group.heartbeat.interval.ms")
            && err.contains("strait.group.cluster")
            && err.contains("strait.api.ssl.key.password"),
        "{err}"
    );
}
