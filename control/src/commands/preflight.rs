//! `strait check --connect`: connects to every cluster of each enabled flow as the configured
//! principal and lists every permission strait needs there and whether the principal has it,
//! before anything is replicated. Nothing is changed on the clusters but one registration: the
//! answers come from Kafka's authorized-operations fields (KIP-430) and validate-only topic
//! creation; for a flow forwarding exactly-once, InitProducerId of the transactional id
//! `strait-eos:<source>-><target>:strait-check` on the target (which opens no transaction; the
//! coordinator forgets the id after `transactional.id.expiration.ms`) shows WRITE on the
//! flow's transactional ids, which no authorized-operations field reports.
//!
//! What is needed ([`needs`]) is pure: it follows the flow's settings (checkpoints, group sync,
//! heartbeats, config and ACL sync, where the offset syncs live).

use std::fmt;

use strait_dataplane::io::{ConnSetup, IoBackend};
use strait_dataplane::wire::WireError;

use crate::cluster::authz::{self, Resource};
use crate::cluster::probe::TopicAccess;
use crate::cluster::{Cluster, ClusterError, RetryConfig, acl};
use crate::config::Mm2Config;
use crate::config::model::{FlowConfig, OffsetSyncsLocation};
pub use crate::duties::offsets::probe_group;
use crate::plan::PlanError;

/// Errors that stop the pre-flight of a flow (a refused permission is a result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("flow {flow}: {source}")]
    Plan {
        flow: String,
        #[source]
        source: PlanError,
    },
    #[error("flow {flow}: cluster {cluster}: {source}")]
    Client {
        flow: String,
        cluster: String,
        #[source]
        source: WireError,
    },
}

/// Which cluster of the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Source,
    Target,
}

const READ: (i8, &str) = (acl::OPERATION_READ, "READ");
const WRITE: (i8, &str) = (acl::OPERATION_WRITE, "WRITE");
const CREATE: (i8, &str) = (acl::OPERATION_CREATE, "CREATE");
const ALTER: (i8, &str) = (7, "ALTER");
const DESCRIBE: (i8, &str) = (acl::OPERATION_DESCRIBE, "DESCRIBE");
const DESCRIBE_CONFIGS: (i8, &str) = (10, "DESCRIBE_CONFIGS");
const ALTER_CONFIGS: (i8, &str) = (11, "ALTER_CONFIGS");

/// Permissions strait needs on one resource of one cluster, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub side: Side,
    pub resource: Resource,
    pub operations: Vec<(i8, &'static str)>,
    pub why: &'static str,
}

fn need(
    side: Side,
    resource: Resource,
    operations: &[(i8, &'static str)],
    why: &'static str,
) -> Need {
    Need {
        side,
        resource,
        operations: operations.to_vec(),
        why,
    }
}

fn topic(t: &str) -> Resource {
    Resource::Topic(t.to_string())
}

/// The group of instances (`strait.group.*`) on the coordination cluster, when that is one of
/// this flow's clusters: JoinGroup and SyncGroup need READ on it. Its default id is
/// `strait-<digest of the file>`, as `strait run` computes it.
fn group_need(cfg: &Mm2Config, flow: &FlowConfig) -> Option<Need> {
    let first_target = cfg.enabled_flows().next().map(|f| f.target.clone());
    let cluster = cfg.strait.group_cluster.value.clone().or(first_target)?;
    let side = if cluster == flow.target {
        Side::Target
    } else if cluster == flow.source {
        Side::Source
    } else {
        return None;
    };
    let group = match &cfg.strait.group_id.value {
        Some(id) => id.clone(),
        None => {
            let bytes = std::fs::read(&cfg.path).ok()?;
            let props = crate::config::properties::parse_bytes(&bytes);
            format!(
                "strait-{:016x}",
                crate::group::digest::of_properties(&props).0
            )
        }
    };
    Some(need(
        side,
        Resource::Group(group),
        &[READ, DESCRIBE],
        "the group of instances every strait run joins (strait.group.*)",
    ))
}

/// Every permission the flow needs, given the source topics it replicates.
pub fn needs(flow: &FlowConfig, source_topics: &[String], probe_group: &str) -> Vec<Need> {
    let mut out = topic_needs(flow, source_topics);
    out.extend(duty_needs(flow, probe_group));
    out.extend(exactly_once_need(flow));
    out
}

/// Exactly-once's transactional producers: WRITE on the flow's transactional ids.
fn exactly_once_need(flow: &FlowConfig) -> Option<Need> {
    flow.exactly_once.value.then(|| {
        need(
            Side::Target,
            Resource::TransactionalIdPrefix(crate::duties::exactly_once::transactional_id_prefix(
                &flow.source,
                &flow.target,
            )),
            &[WRITE, DESCRIBE],
            "exactly-once (a transactional producer per source partition)",
        )
    })
}

/// The source topics and their remote topics.
fn topic_needs(flow: &FlowConfig, source_topics: &[String]) -> Vec<Need> {
    let configs = flow.sync_topic_configs_enabled.value;
    let mut out = Vec::new();
    for t in source_topics {
        let mut ops = vec![READ, DESCRIBE];
        if configs {
            ops.push(DESCRIBE_CONFIGS);
        }
        out.push(need(
            Side::Source,
            topic(t),
            &ops,
            "replication (fetch, offsets)",
        ));
    }
    for t in source_topics {
        let mut ops = vec![CREATE, WRITE, DESCRIBE, READ];
        if configs {
            ops.push(ALTER_CONFIGS);
        }
        let remote = flow.remote_topic(t);
        out.push(need(
            Side::Target,
            topic(&remote),
            &ops,
            "remote topic (created, written, groups committed)",
        ));
    }
    out
}

/// The internal topics, groups and cluster permissions of the flow's duties.
fn duty_needs(flow: &FlowConfig, probe_group: &str) -> Vec<Need> {
    let mut out = Vec::new();
    if flow.emit_offset_syncs_enabled.value {
        let side = match flow.offset_syncs_topic_location.value {
            OffsetSyncsLocation::Source => Side::Source,
            OffsetSyncsLocation::Target => Side::Target,
        };
        let ops = [CREATE, WRITE, READ, DESCRIBE];
        out.push(need(
            side,
            topic(&flow.offset_syncs_topic()),
            &ops,
            "offset syncs",
        ));
    }
    if flow.emit_checkpoints_enabled.value {
        let group = Resource::Group(probe_group.to_string());
        out.push(need(
            Side::Source,
            group,
            &[DESCRIBE],
            "checkpoints (list groups, read their offsets)",
        ));
        let ops = [CREATE, WRITE, READ, DESCRIBE];
        out.push(need(
            Side::Target,
            topic(&flow.checkpoints_topic()),
            &ops,
            "checkpoints",
        ));
    }
    if flow.sync_group_offsets_enabled.value {
        let group = Resource::Group(probe_group.to_string());
        out.push(need(
            Side::Target,
            group,
            &[READ, DESCRIBE],
            "group offset sync",
        ));
    }
    if flow.emit_heartbeats_enabled.value {
        let ops = [CREATE, WRITE, DESCRIBE];
        out.push(need(
            Side::Target,
            topic(flow.heartbeats_topic()),
            &ops,
            "heartbeats",
        ));
    }
    let progress = crate::store::progress::topic_name(&flow.source);
    out.push(need(
        Side::Target,
        topic(&progress),
        &[CREATE, WRITE, READ, DESCRIBE],
        "strait's progress",
    ));
    out.push(need(
        Side::Target,
        Resource::Group(crate::store::liveness::mm2_worker_group(&flow.source)),
        &[DESCRIBE],
        "the check that MirrorMaker 2 does not replicate the flow too (strait run warns without it)",
    ));
    if flow.sync_topic_acls_enabled.value {
        out.push(need(
            Side::Source,
            Resource::Cluster,
            &[DESCRIBE],
            "ACL sync (describe the source's ACLs)",
        ));
        out.push(need(
            Side::Target,
            Resource::Cluster,
            &[ALTER],
            "ACL sync (create ACLs)",
        ));
    }
    out
}

/// Whether the principal has one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Granted,
    Missing(String),
    /// Cannot be known yet (e.g. ACLs of a topic that does not exist).
    Unchecked(String),
}

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Line {
    pub cluster: String,
    pub operation: &'static str,
    pub resource: Resource,
    pub why: &'static str,
    pub verdict: Verdict,
}

/// The pre-flight of one flow.
#[derive(Debug, Clone)]
pub struct Report {
    pub flow: String,
    /// Per cluster: alias, principal (when the settings say), connection error.
    pub clusters: Vec<(String, Option<String>, Option<String>)>,
    pub lines: Vec<Line>,
}

impl Report {
    /// Permissions missing or clusters unreachable.
    pub fn problems(&self) -> usize {
        let missing = self
            .lines
            .iter()
            .filter(|l| matches!(l.verdict, Verdict::Missing(_)))
            .count();
        missing + self.clusters.iter().filter(|c| c.2.is_some()).count()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "flow {}: permissions", self.flow)?;
        for (alias, principal, error) in &self.clusters {
            let who = principal.as_deref().unwrap_or("the configured principal");
            match error {
                Some(e) => writeln!(f, "  cluster {alias} (as {who}): CANNOT CONNECT: {e}")?,
                None => writeln!(f, "  cluster {alias} (as {who}):")?,
            }
            for (tag, ops, l, note) in grouped(self.lines.iter().filter(|l| &l.cluster == alias)) {
                writeln!(
                    f,
                    "    {tag} {} on {} ({}){note}",
                    ops.join(", "),
                    l.resource,
                    l.why
                )?;
            }
        }
        writeln!(f, "  {} problem(s)", self.problems())
    }
}

/// Lines of one resource with the same verdict, as one: (tag, operations, first line, note).
fn grouped<'a>(
    lines: impl Iterator<Item = &'a Line>,
) -> Vec<(&'static str, Vec<&'static str>, &'a Line, String)> {
    let mut out: Vec<(&'static str, Vec<&'static str>, &'a Line, String)> = Vec::new();
    for l in lines {
        let (tag, note) = match &l.verdict {
            Verdict::Granted => ("ok     ", String::new()),
            Verdict::Missing(why) => ("MISSING", format!(": {why}")),
            Verdict::Unchecked(why) => ("unknown", format!(": {why}")),
        };
        match out.last_mut() {
            Some(last) if last.0 == tag && last.2.resource == l.resource && last.3 == note => {
                last.1.push(l.operation);
            }
            _ => out.push((tag, vec![l.operation], l, note)),
        }
    }
    out
}

fn admin(
    flow: &str,
    alias: &str,
    bootstrap: &[String],
    conn: &strait_dataplane::wire::ConnConfig,
) -> Result<Cluster, PreflightError> {
    let setup = ConnSetup::new(conn.clone(), IoBackend::Epoll).map_err(|source| {
        PreflightError::Client {
            flow: flow.to_string(),
            cluster: alias.to_string(),
            source,
        }
    })?;
    Ok(Cluster::new(
        alias,
        bootstrap.to_vec(),
        setup,
        RetryConfig::default(),
    ))
}

fn has(bits: i32, op: i8) -> bool {
    bits != i32::MIN && bits > 0 && (bits >> op) & 1 == 1
}

/// The verdicts for `ops` on topic `t`, given what Metadata said of it.
async fn topic_verdicts(
    c: &Cluster,
    t: &str,
    ops: &[(i8, &'static str)],
    access: Result<Option<TopicAccess>, &ClusterError>,
) -> Vec<Verdict> {
    match access {
        Err(e) => ops
            .iter()
            .map(|_| Verdict::Unchecked(e.to_string()))
            .collect(),
        Ok(Some(TopicAccess::Exists { operations })) => ops
            .iter()
            .map(|(op, _)| {
                if *op == acl::OPERATION_CREATE || has(operations, *op) {
                    Verdict::Granted
                } else {
                    Verdict::Missing("not allowed on the existing topic".into())
                }
            })
            .collect(),
        Ok(Some(TopicAccess::Hidden)) => ops
            .iter()
            .map(|_| Verdict::Missing("the principal may not even DESCRIBE the topic".into()))
            .collect(),
        Ok(_) => {
            let create = match c.may_create(t).await {
                Ok(Ok(())) => Verdict::Granted,
                Ok(Err(e)) | Err(e) => Verdict::Missing(e.to_string()),
            };
            ops.iter()
                .map(|(op, _)| {
                    if *op == acl::OPERATION_CREATE {
                        create.clone()
                    } else {
                        Verdict::Unchecked("the topic does not exist yet".into())
                    }
                })
                .collect()
        }
    }
}

/// The verdicts for `ops` (WRITE, DESCRIBE) on the transactional ids under `prefix`:
/// InitProducerId of a probe id under it needs WRITE; finding its coordinator needs DESCRIBE. Any
/// other refusal (e.g. a cluster whose transaction state topic cannot be created) is named.
async fn transactional_verdicts(
    c: &Cluster,
    ops: &[(i8, &'static str)],
    prefix: &str,
) -> Vec<Verdict> {
    let probe_id = &crate::duties::exactly_once::preflight_transactional_id(prefix);
    let refused =
        |e: &ClusterError| e.is(kafka_protocol::ResponseError::TransactionalIdAuthorizationFailed);
    let (write, describe) = match c.txn_coordinator(probe_id).await {
        Err(e) if refused(&e) => {
            let why = format!("not allowed (FindCoordinator of {probe_id}: {e})");
            (Verdict::Missing(why.clone()), Verdict::Missing(why))
        }
        Err(e) => {
            let why = format!("the cluster cannot coordinate transactions: {e}");
            (Verdict::Missing(why.clone()), Verdict::Missing(why))
        }
        Ok(_) => match c
            .init_txn_producer(probe_id, crate::cluster::txn::TRANSACTION_TIMEOUT_MS)
            .await
        {
            Ok(_) => (Verdict::Granted, Verdict::Granted),
            Err(e) if refused(&e) => (
                Verdict::Missing(format!("not allowed (InitProducerId of {probe_id}: {e})")),
                Verdict::Granted,
            ),
            Err(e) => (
                Verdict::Missing(format!("InitProducerId of {probe_id} failed: {e}")),
                Verdict::Granted,
            ),
        },
    };
    ops.iter()
        .map(|(op, _)| {
            if *op == acl::OPERATION_WRITE {
                write.clone()
            } else {
                describe.clone()
            }
        })
        .collect()
}

/// Evaluates the needs of one cluster.
async fn check_side(
    c: &Cluster,
    needs: &[&Need],
    cluster_bits: Result<i32, ClusterError>,
) -> Vec<Line> {
    let topics: Vec<String> = needs
        .iter()
        .filter_map(|n| match &n.resource {
            Resource::Topic(t) => Some(t.clone()),
            _ => None,
        })
        .collect();
    let access = c.topic_access(&topics).await;
    let mut out = Vec::new();
    for n in needs {
        let verdicts: Vec<Verdict> = match &n.resource {
            Resource::Topic(t) => {
                let access = access.as_ref().map(|a| a.get(t).copied());
                topic_verdicts(c, t, &n.operations, access).await
            }
            Resource::Group(g) => match c.group_operations(g).await {
                Err(e) => n
                    .operations
                    .iter()
                    .map(|_| Verdict::Missing(e.to_string()))
                    .collect(),
                Ok(bits) => n
                    .operations
                    .iter()
                    .map(|(op, _)| match (bits, *op == acl::OPERATION_DESCRIBE) {
                        (_, true) => Verdict::Granted,
                        (b, false) if has(b, *op) => Verdict::Granted,
                        (b, false) if b == i32::MIN || b <= 0 => {
                            Verdict::Unchecked("the broker does not report group operations".into())
                        }
                        _ => Verdict::Missing("not allowed on the group".into()),
                    })
                    .collect(),
            },
            Resource::TransactionalIdPrefix(prefix) => {
                transactional_verdicts(c, &n.operations, prefix).await
            }
            Resource::Cluster | Resource::TransactionalId(_) => n
                .operations
                .iter()
                .map(|(op, _)| match &cluster_bits {
                    Ok(b) if has(*b, *op) => Verdict::Granted,
                    Ok(_) => Verdict::Missing("not allowed on the cluster".into()),
                    Err(e) => Verdict::Missing(e.to_string()),
                })
                .collect(),
        };
        for ((_, name), verdict) in n.operations.iter().zip(verdicts) {
            out.push(Line {
                cluster: c.alias().to_string(),
                operation: name,
                resource: n.resource.clone(),
                why: n.why,
                verdict,
            });
        }
    }
    out
}

/// Connects to both clusters of `flow` and checks every permission it needs.
pub async fn preflight(cfg: &Mm2Config, flow: &FlowConfig) -> Result<Report, PreflightError> {
    let name = flow.name();
    let plan = crate::plan::flow_plan(cfg, flow).map_err(|source| PreflightError::Plan {
        flow: name.clone(),
        source,
    })?;
    let source = admin(
        &name,
        &plan.source,
        &plan.source_bootstrap,
        &plan.source_admin,
    )?;
    let target = admin(
        &name,
        &plan.target,
        &plan.target_bootstrap,
        &plan.target_admin,
    )?;
    let mut report = Report {
        flow: name,
        clusters: Vec::new(),
        lines: Vec::new(),
    };
    let topics = match source.refresh_metadata(None).await {
        Ok(md) => md
            .topics
            .values()
            .filter(|t| !t.is_internal && flow.should_replicate_topic(&t.name))
            .map(|t| t.name.clone())
            .collect::<Vec<_>>(),
        Err(e) => {
            report.clusters.push((
                plan.source.clone(),
                authz::principal(&plan.source_admin),
                Some(e.to_string()),
            ));
            Vec::new()
        }
    };
    let mut all = needs(flow, &topics, &probe_group(flow));
    all.extend(group_need(cfg, flow));
    for (side, c, conn) in [
        (Side::Source, &source, &plan.source_admin),
        (Side::Target, &target, &plan.target_admin),
    ] {
        if report.clusters.iter().any(|(a, _, _)| a == c.alias()) {
            continue;
        }
        let bits = c.cluster_operations().await;
        if let Err(e) = &bits
            && !e.is(kafka_protocol::ResponseError::ClusterAuthorizationFailed)
            && e.kafka_error().is_none()
        {
            report.clusters.push((
                c.alias().to_string(),
                authz::principal(conn),
                Some(e.to_string()),
            ));
            continue;
        }
        report
            .clusters
            .push((c.alias().to_string(), authz::principal(conn), None));
        let mine: Vec<&Need> = all.iter().filter(|n| n.side == side).collect();
        report.lines.extend(check_side(c, &mine, bits).await);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(extra: &str) -> FlowConfig {
        let text = format!(
            "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n\
             A->B.enabled = true\n{extra}"
        );
        let path = std::env::temp_dir().join(format!(
            "strait-preflight-{}-{}.properties",
            std::process::id(),
            text.len()
        ));
        std::fs::write(&path, text).unwrap();
        let cfg = crate::config::load(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        cfg.flow("A", "B").unwrap().clone()
    }

    fn ops(needs: &[Need], side: Side, res: &Resource) -> Vec<&'static str> {
        needs
            .iter()
            .filter(|n| n.side == side && &n.resource == res)
            .flat_map(|n| n.operations.iter().map(|(_, name)| *name))
            .collect()
    }

    #[test]
    fn the_needs_follow_the_flow_settings() {
        let f = flow("A->B.groups = app-.*\nsync.group.offsets.enabled = true\n");
        assert_eq!(probe_group(&f), "app-");
        let n = needs(&f, &["orders".to_string()], &probe_group(&f));
        let t = |n: &str| Resource::Topic(n.to_string());
        let g = Resource::Group("app-".into());
        assert_eq!(
            ops(&n, Side::Source, &t("orders")),
            ["READ", "DESCRIBE", "DESCRIBE_CONFIGS"]
        );
        assert_eq!(
            ops(&n, Side::Target, &t("A.orders")),
            ["CREATE", "WRITE", "DESCRIBE", "READ", "ALTER_CONFIGS"]
        );
        assert_eq!(
            ops(&n, Side::Source, &t("mm2-offset-syncs.B.internal")),
            ["CREATE", "WRITE", "READ", "DESCRIBE"]
        );
        assert_eq!(ops(&n, Side::Source, &g), ["DESCRIBE"]);
        assert_eq!(ops(&n, Side::Target, &g), ["READ", "DESCRIBE"]);
        assert_eq!(
            ops(&n, Side::Target, &t("heartbeats")),
            ["CREATE", "WRITE", "DESCRIBE"]
        );
        assert_eq!(ops(&n, Side::Source, &Resource::Cluster), ["DESCRIBE"]);
        assert_eq!(ops(&n, Side::Target, &Resource::Cluster), ["ALTER"]);

        // Duties turned off need nothing; offset syncs on the target live there.
        let off = flow(
            "sync.topic.configs.enabled = false\nsync.topic.acls.enabled = false\n\
             emit.checkpoints.enabled = false\nemit.heartbeats.enabled = false\n\
             offset-syncs.topic.location = target\n",
        );
        let n = needs(&off, &["orders".to_string()], "x");
        assert_eq!(ops(&n, Side::Source, &t("orders")), ["READ", "DESCRIBE"]);
        assert!(ops(&n, Side::Source, &Resource::Cluster).is_empty());
        let ids = Resource::TransactionalIdPrefix("strait-eos:A->B:".into());
        assert!(ops(&n, Side::Target, &ids).is_empty());
        assert!(ops(&n, Side::Target, &t("heartbeats")).is_empty());
        assert!(ops(&n, Side::Source, &Resource::Group("x".into())).is_empty());
        assert_eq!(
            ops(&n, Side::Target, &t("mm2-offset-syncs.A.internal")),
            ["CREATE", "WRITE", "READ", "DESCRIBE"]
        );
        assert_eq!(
            probe_group(&flow("A->B.groups = .*\n")),
            "strait-preflight-probe"
        );
        let eos = flow("B.exactly.once.source.support = enabled\n");
        let n = needs(&eos, &["orders".to_string()], "x");
        assert_eq!(ops(&n, Side::Target, &ids), ["WRITE", "DESCRIBE"]);
    }

    #[test]
    fn the_report_groups_operations_per_resource_and_verdict() {
        let line = |op, verdict| Line {
            cluster: "B".into(),
            operation: op,
            resource: Resource::Topic("A.t".into()),
            why: "remote topic",
            verdict,
        };
        let report = Report {
            flow: "A->B".into(),
            clusters: vec![("B".into(), Some("User:mirror".into()), None)],
            lines: vec![
                line("DESCRIBE", Verdict::Granted),
                line("READ", Verdict::Granted),
                line("WRITE", Verdict::Missing("not allowed".into())),
            ],
        };
        let text = report.to_string();
        assert!(text.contains("cluster B (as User:mirror):"), "{text}");
        assert!(
            text.contains("ok      DESCRIBE, READ on topic A.t (remote topic)\n"),
            "{text}"
        );
        assert!(
            text.contains("MISSING WRITE on topic A.t (remote topic): not allowed\n"),
            "{text}"
        );
        assert!(text.contains("1 problem(s)"), "{text}");
    }
}
