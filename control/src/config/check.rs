//! `strait check`: every error, every warning, and the effective configuration of each flow
//! with the origin of each value. The caller decides the exit code with
//! [`CheckReport::has_errors`].

use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

use strait_dataplane::wire::{KeyStore, OAuthLogin, SaslCredentials, TrustStore};

use super::error::{ConfigError, ConfigWarning, Severity};
use super::model::*;
use super::{ConfigEnv, SystemEnv, analyse};
use crate::mm2::filter::UseDefaultsFrom;

/// The result of checking one file.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The file checked.
    pub path: PathBuf,
    /// Every error, in line order.
    pub errors: Vec<ConfigError>,
    /// Warnings and notes, warnings first.
    pub warnings: Vec<ConfigWarning>,
    /// The resolved configuration; `None` when there are errors.
    pub config: Option<Mm2Config>,
}

impl CheckReport {
    /// Whether the file must not be run.
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// The report as text (secrets redacted).
    pub fn render(&self) -> String {
        self.to_string()
    }
}

/// Checks `path` with the process environment.
pub fn check(path: &Path) -> CheckReport {
    check_with(path, &SystemEnv)
}

/// Checks `path` with the given environment.
pub fn check_with(path: &Path, env: &dyn ConfigEnv) -> CheckReport {
    let outcome = analyse(path, env);
    let config = if outcome.errors.is_empty() {
        outcome.config
    } else {
        None
    };
    CheckReport {
        path: path.to_path_buf(),
        errors: outcome.errors,
        warnings: outcome.warnings,
        config,
    }
}

fn origin(o: &Origin) -> String {
    match o {
        Origin::File { line, .. } => format!("line {line}"),
        Origin::FromKey { key, line, .. } => format!("{key}, line {line}"),
        other => other.to_string(),
    }
}

fn line<T: fmt::Display>(out: &mut String, indent: &str, key: &str, s: &Setting<T>) {
    let _ = writeln!(out, "{indent}{key} = {} ({})", s.value, origin(&s.origin));
}

fn list(s: &Setting<Vec<String>>) -> Setting<String> {
    Setting::new(s.value.join(", "), s.origin.clone())
}

/// A setting's value as text, for tables of settings of several types.
fn text<T: fmt::Display>(s: &Setting<T>) -> Setting<String> {
    map(s, T::to_string)
}

fn map<T, U>(s: &Setting<T>, f: impl Fn(&T) -> U) -> Setting<U> {
    Setting::new(f(&s.value), s.origin.clone())
}

fn conn_summary(c: &ClientConfig) -> String {
    let mut parts = vec![format!(
        "security.protocol={}",
        c.conn.security_protocol.name()
    )];
    if let Some(tls) = &c.conn.tls {
        let ts = match &tls.truststore {
            TrustStore::PublicRoots => "public roots".to_string(),
            TrustStore::PemFile(p) => format!("PEM {}", p.display()),
            TrustStore::PemInline(_) => "inline PEM".to_string(),
            TrustStore::Pkcs12 { path, .. } => format!("PKCS12 {}", path.display()),
            TrustStore::Jks { path, .. } => format!("JKS {}", path.display()),
        };
        parts.push(format!("truststore={ts}"));
        if let Some(ks) = &tls.keystore {
            let encrypted = |kp: &Option<_>| if kp.is_some() { " (encrypted key)" } else { "" };
            let ks = match ks {
                KeyStore::PemFile { path, key_password } => {
                    format!("PEM {}{}", path.display(), encrypted(key_password))
                }
                KeyStore::PemInline { key_password, .. } => {
                    format!("inline PEM{}", encrypted(key_password))
                }
                KeyStore::Pkcs12 { path, .. } => format!("PKCS12 {}", path.display()),
                KeyStore::Jks { path, .. } => format!("JKS {}", path.display()),
            };
            parts.push(format!("keystore={ks}"));
        }
        parts.push(format!("verify_hostname={}", tls.verify_hostname));
    }
    if let Some(sasl) = &c.conn.sasl {
        let who = match &sasl.credentials {
            SaslCredentials::Password { username, .. } => format!("user={username}"),
            SaslCredentials::OAuthBearer(OAuthLogin::Unsecured(u)) => {
                format!("unsecured token for {}", u.principal())
            }
            SaslCredentials::OAuthBearer(OAuthLogin::ClientCredentials(cc)) => format!(
                "client_id={} token endpoint {}",
                cc.client_id, cc.token_endpoint_url
            ),
        };
        parts.push(format!("sasl={} {who}", sasl.mechanism.name()));
    }
    parts.join(", ")
}

fn client(out: &mut String, c: &ClientConfig, typed: &[(&str, Setting<String>)]) {
    let servers: Vec<String> = c.bootstrap_servers.iter().map(|a| a.to_string()).collect();
    let _ = writeln!(
        out,
        "      {} @ {} [{}]",
        c.role.name(),
        c.cluster,
        servers.join(",")
    );
    let _ = writeln!(
        out,
        "        client.id = {} ({})",
        c.client_id.value,
        origin(&c.client_id.origin)
    );
    let _ = writeln!(out, "        connection: {}", conn_summary(c));
    for (k, s) in typed {
        line(out, "        ", k, s);
    }
    for (k, p) in &c.properties.0 {
        let _ = writeln!(
            out,
            "        | {k} = {} ({})",
            super::redact(k, &p.value),
            origin(&p.origin)
        );
    }
}

fn flow(out: &mut String, f: &FlowConfig) {
    let state = if f.enabled.value {
        "replicating"
    } else {
        "heartbeats only"
    };
    let _ = writeln!(out, "  flow {} ({state})", f.name());
    let i = "    ";
    for (key, value) in [
        ("enabled", text(&f.enabled)),
        ("emit.heartbeats.enabled", text(&f.emit_heartbeats_enabled)),
        (
            "emit.heartbeats.interval.seconds",
            text(&f.emit_heartbeats_interval_seconds),
        ),
        (
            "heartbeats.topic.replication.factor",
            text(&f.heartbeats_topic_replication_factor),
        ),
    ] {
        line(out, i, key, &value);
    }
    if f.enabled.value {
        flow_replication(out, f);
    }
    flow_clients(out, f);
}

/// The settings of the flow's clients, each with its connection summary.
#[allow(clippy::too_many_lines)] // a table of settings per client kind, one row each
fn flow_clients(out: &mut String, f: &FlowConfig) {
    let _ = writeln!(out, "    clients:");
    let c = &f.clients;
    let consumer = |s: &ConsumerSettings| -> Vec<(&'static str, Setting<String>)> {
        vec![
            ("fetch.max.bytes", map(&s.fetch_max_bytes, u32::to_string)),
            (
                "max.partition.fetch.bytes",
                map(&s.max_partition_fetch_bytes, u32::to_string),
            ),
            (
                "fetch.max.wait.ms",
                map(&s.fetch_max_wait_ms, u32::to_string),
            ),
            ("fetch.min.bytes", map(&s.fetch_min_bytes, u32::to_string)),
            (
                "isolation.level",
                map(&s.isolation_level, |l| l.name().to_string()),
            ),
            ("auto.offset.reset", map(&s.auto_offset_reset, |r| r.name())),
            (
                "request.timeout.ms",
                map(&s.client.request_timeout_ms, u64::to_string),
            ),
        ]
    };
    let producer = |s: &ProducerSettings| -> Vec<(&'static str, Setting<String>)> {
        vec![
            ("acks", map(&s.acks, |a| a.name().to_string())),
            (
                "max.in.flight.requests.per.connection",
                map(&s.max_in_flight_requests_per_connection, u32::to_string),
            ),
            ("max.request.size", map(&s.max_request_size, u32::to_string)),
            ("batch.size", map(&s.batch_size, u32::to_string)),
            (
                "transaction.timeout.ms",
                map(&s.transaction_timeout_ms, u32::to_string),
            ),
            (
                "request.timeout.ms",
                map(&s.client.request_timeout_ms, u64::to_string),
            ),
        ]
    };
    let admin = |s: &AdminSettings| -> Vec<(&'static str, Setting<String>)> {
        vec![
            (
                "default.api.timeout.ms",
                map(&s.default_api_timeout_ms, u64::to_string),
            ),
            (
                "request.timeout.ms",
                map(&s.client.request_timeout_ms, u64::to_string),
            ),
        ]
    };
    client(
        out,
        &c.target_producer.client,
        &producer(&c.target_producer),
    );
    client(out, &c.target_admin.client, &admin(&c.target_admin));
    if f.enabled.value {
        client(
            out,
            &c.source_consumer.client,
            &consumer(&c.source_consumer),
        );
        client(out, &c.source_admin.client, &admin(&c.source_admin));
        client(
            out,
            &c.target_consumer.client,
            &consumer(&c.target_consumer),
        );
        client(
            out,
            &c.offset_syncs_producer.client,
            &producer(&c.offset_syncs_producer),
        );
        client(
            out,
            &c.offset_syncs_consumer.client,
            &consumer(&c.offset_syncs_consumer),
        );
        client(
            out,
            &c.offset_syncs_admin.client,
            &admin(&c.offset_syncs_admin),
        );
    }
}

/// The replication settings of an enabled flow (topics, groups, syncs, offsets, checkpoints).
#[allow(clippy::too_many_lines)] // a table of settings, one row each: nothing to name in a split
fn flow_replication(out: &mut String, f: &FlowConfig) {
    let i = "    ";
    for (key, value) in [
        ("topics", text(&list(&f.topics))),
        ("topics.exclude", text(&list(&f.topics_exclude))),
        ("groups", text(&list(&f.groups))),
        ("groups.exclude", text(&list(&f.groups_exclude))),
        (
            "replication.policy.class",
            text(&f.replication_policy_class),
        ),
        (
            "replication.policy.separator",
            text(&f.replication_policy_separator),
        ),
        ("replication.factor", text(&f.replication_factor)),
        (
            "config.properties.exclude",
            text(&list(&f.config_properties_exclude)),
        ),
        (
            "use.defaults.from",
            text(&map(&f.use_defaults_from, |u| match u {
                UseDefaultsFrom::Source => "source",
                UseDefaultsFrom::Target => "target",
            })),
        ),
        ("refresh.topics.enabled", text(&f.refresh_topics_enabled)),
        (
            "refresh.topics.interval.seconds",
            text(&f.refresh_topics_interval_seconds),
        ),
        (
            "sync.topic.configs.enabled",
            text(&f.sync_topic_configs_enabled),
        ),
        (
            "sync.topic.configs.interval.seconds",
            text(&f.sync_topic_configs_interval_seconds),
        ),
        ("sync.topic.acls.enabled", text(&f.sync_topic_acls_enabled)),
        (
            "sync.topic.acls.interval.seconds",
            text(&f.sync_topic_acls_interval_seconds),
        ),
        ("refresh.groups.enabled", text(&f.refresh_groups_enabled)),
        (
            "refresh.groups.interval.seconds",
            text(&f.refresh_groups_interval_seconds),
        ),
        ("offset.lag.max", text(&f.offset_lag_max)),
        (
            "offset-syncs.topic.location",
            text(&map(&f.offset_syncs_topic_location, |l| match l {
                OffsetSyncsLocation::Source => "source",
                OffsetSyncsLocation::Target => "target",
            })),
        ),
        (
            "emit.offset-syncs.enabled",
            text(&f.emit_offset_syncs_enabled),
        ),
        (
            "offset-syncs.topic.replication.factor",
            text(&f.offset_syncs_topic_replication_factor),
        ),
        (
            "emit.checkpoints.enabled",
            text(&f.emit_checkpoints_enabled),
        ),
        (
            "emit.checkpoints.interval.seconds",
            text(&f.emit_checkpoints_interval_seconds),
        ),
        (
            "checkpoints.topic.replication.factor",
            text(&f.checkpoints_topic_replication_factor),
        ),
        (
            "sync.group.offsets.enabled",
            text(&f.sync_group_offsets_enabled),
        ),
        (
            "sync.group.offsets.interval.seconds",
            text(&f.sync_group_offsets_interval_seconds),
        ),
        (
            "heartbeats.replication.enabled",
            text(&f.heartbeats_replication_enabled),
        ),
        ("admin.timeout.ms", text(&f.admin_timeout_ms)),
        (
            "offset.flush.interval.ms",
            text(&f.offset_flush_interval_ms),
        ),
        ("exactly.once.source.support", text(&f.exactly_once)),
        (
            "transaction.boundary.interval.ms",
            text(&f.transaction_boundary_interval_ms),
        ),
        (
            "offset.storage.topic (MM2 progress)",
            text(&f.mm2_offsets_topic),
        ),
        (
            "strait.progress.topic.replication.factor",
            text(&f.progress_topic_replication_factor),
        ),
    ] {
        line(out, i, key, &value);
    }
    let _ = writeln!(
        out,
        "    topics on the target: remote `{}`, checkpoints `{}`, offset syncs `{}` (on {})",
        f.remote_topic("<topic>"),
        f.checkpoints_topic(),
        f.offset_syncs_topic(),
        f.clients.offset_syncs_producer.client.cluster
    );
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let _ = writeln!(out, "strait check {}", self.path.display());
        self.diagnostics(&mut out);
        if let Some(c) = &self.config {
            let _ = writeln!(out, "\neffective configuration:");
            for cl in c.clusters.values() {
                let servers = cl
                    .bootstrap_servers
                    .as_ref()
                    .map(|s| {
                        format!(
                            "{} ({})",
                            s.value
                                .iter()
                                .map(|a| a.to_string())
                                .collect::<Vec<_>>()
                                .join(","),
                            origin(&s.origin)
                        )
                    })
                    .unwrap_or_else(|| "none".to_string());
                let _ = writeln!(
                    out,
                    "  cluster {}: bootstrap.servers = {servers}, security.protocol = {} ({})",
                    cl.alias,
                    cl.security_protocol.value.name(),
                    origin(&cl.security_protocol.origin)
                );
            }
            for fl in &c.flows {
                flow(&mut out, fl);
            }
            strait_settings(&mut out, &c.strait);
        }
        let _ = writeln!(
            out,
            "\n{}",
            if self.has_errors() {
                format!("FAILED: {} error(s)", self.errors.len())
            } else {
                "OK".to_string()
            }
        );
        f.write_str(&out)
    }
}

/// The offset mapping's bound in runs and what it costs per partition and for 10 000.
fn mapping_bound(runs: usize) -> String {
    let memory = crate::model::mapping_cost::worst_case_memory_bytes(runs);
    let stored = crate::model::mapping_cost::worst_case_stored_bytes(runs);
    format!(
        "{runs} runs per partition: at most {} KiB in memory and {} KiB stored per partition, {} MiB and {} MiB for 10 000 partitions; past it the oldest history is thinned (approximate, labelled)",
        memory / 1024,
        stored / 1024,
        memory * 10_000 / (1 << 20),
        stored * 10_000 / (1 << 20)
    )
}

/// strait's own settings (`strait.*`).
#[allow(clippy::too_many_lines)] // a table of settings, one row each: nothing to name in a split
fn strait_settings(out: &mut String, s: &StraitSettings) {
    let _ = writeln!(out, "  strait:");
    for (key, value) in [
        ("strait.shards", text(&s.shards)),
        (
            "strait.io",
            text(&map(&s.io, |i| format!("{i:?}").to_ascii_lowercase())),
        ),
        (
            "strait.api.listen",
            text(&map(&s.api_listen, |a| {
                a.map_or("disabled".to_string(), |a| a.to_string())
            })),
        ),
        (
            "strait.api.token",
            text(&map(&s.api_token, |t| {
                if t.is_some() { "[redacted]" } else { "none" }.to_string()
            })),
        ),
        ("strait.api.command.queue", text(&s.api_command_queue)),
        (
            "strait.api.ssl.keystore.location",
            text(&map(&s.api_keystore_location, |p| {
                p.as_ref()
                    .map_or("none (plain HTTP)".to_string(), |p| p.display().to_string())
            })),
        ),
    ] {
        line(out, "    ", key, &value);
    }
    for (key, secret) in [
        ("strait.api.ssl.keystore.password", &s.api_keystore_password),
        ("strait.api.ssl.key.password", &s.api_key_password),
    ] {
        line(
            out,
            "    ",
            key,
            &map(secret, |t| {
                if t.is_some() { "[redacted]" } else { "none" }.to_string()
            }),
        );
    }
    for (key, value) in [
        ("strait.memory.bytes", text(&s.memory_bytes)),
        (
            "strait.progress.topic.replication.factor",
            text(&s.progress_topic_replication_factor),
        ),
        (
            "strait.mapping.max.runs.per.partition",
            text(&map(&s.mapping_max_runs_per_partition, |&n| {
                mapping_bound(n)
            })),
        ),
        (
            "strait.on.lost.position",
            text(&map(&s.on_lost_position, |o| {
                format!("{o:?}").to_ascii_lowercase()
            })),
        ),
        ("strait.metrics.enabled", text(&s.metrics_enabled)),
        (
            "strait.metrics.per.partition",
            text(&s.metrics_per_partition),
        ),
        (
            "strait.health.stall.timeout.ms",
            text(&s.health_stall_timeout_ms),
        ),
        (
            "strait.cpus",
            text(&map(&s.cpus, |c| {
                if c.is_empty() {
                    "(the inherited affinity mask)".to_string()
                } else {
                    c.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                }
            })),
        ),
        ("strait.cpus.pin", text(&s.cpus_pin)),
        ("strait.verify.enabled", text(&s.verify_enabled)),
        (
            "strait.verify.from",
            text(&map(&s.verify_from_history, |h| {
                if *h { "history" } else { "run" }
            })),
        ),
        ("strait.verify.interval.ms", text(&s.verify_interval_ms)),
        ("strait.verify.sample.rate", text(&s.verify_sample_rate)),
        (
            "strait.verify.max.records.per.round",
            text(&s.verify_max_records_per_round),
        ),
    ] {
        line(out, "    ", key, &value);
    }
    let or_default = |v: &Option<String>, d: &str| v.clone().unwrap_or_else(|| d.into());
    for (key, value) in [
        (
            "strait.group.id",
            text(&map(&s.group_id, |v| or_default(v, "strait-<digest>"))),
        ),
        (
            "strait.group.cluster",
            text(&map(&s.group_cluster, |v| {
                or_default(v, "the first flow's target")
            })),
        ),
        (
            "strait.group.instance.id",
            text(&map(&s.group_instance_id, |v| {
                or_default(v, "none (dynamic membership)")
            })),
        ),
    ] {
        line(out, "    ", key, &value);
    }
    for (key, v) in [
        (
            "strait.group.session.timeout.ms",
            &s.group_session_timeout_ms,
        ),
        (
            "strait.group.heartbeat.interval.ms",
            &s.group_heartbeat_interval_ms,
        ),
        (
            "strait.group.rebalance.timeout.ms",
            &s.group_rebalance_timeout_ms,
        ),
    ] {
        line(out, "    ", key, v);
    }
}

impl CheckReport {
    /// The errors, warnings and notes, each under its heading.
    fn diagnostics(&self, out: &mut String) {
        if !self.errors.is_empty() {
            let _ = writeln!(out, "\nerrors ({}):", self.errors.len());
            for e in &self.errors {
                let _ = writeln!(out, "  error: {e}");
            }
        }
        let warnings: Vec<&ConfigWarning> = self
            .warnings
            .iter()
            .filter(|w| w.severity == Severity::Warning)
            .collect();
        let notes: Vec<&ConfigWarning> = self
            .warnings
            .iter()
            .filter(|w| w.severity == Severity::Note)
            .collect();
        if !warnings.is_empty() {
            let _ = writeln!(out, "\nwarnings ({}):", warnings.len());
            for w in warnings {
                let _ = writeln!(out, "  warning: {w}");
            }
        }
        if !notes.is_empty() {
            let _ = writeln!(out, "\nnotes ({}):", notes.len());
            for w in notes {
                let _ = writeln!(out, "  note: {w}");
            }
        }
    }
}
