//! Heartbeats: MM2's `MirrorHeartbeatConnector` (reference §8).
//!
//! For every herder pair MirrorMaker would run (an enabled flow, or a heartbeats-only pair:
//! `emit.heartbeats.enabled` defaults to true for every ordered pair of clusters), strait emits
//! a `Heartbeat(source, target, now)` record to partition 0 of `heartbeats` on the target every
//! `emit.heartbeats.interval.seconds` (MM2 default 1 s), after creating that topic as MM2 does
//! (one partition, `cleanup.policy=compact`, `heartbeats.topic.replication.factor`). The key
//! and value bytes are MM2's ([`crate::offsets::Heartbeat`]); the record timestamp is the
//! heartbeat's timestamp.
//!
//! Replicating the source's heartbeats topics (`heartbeats`, `X.heartbeats`...) is not done
//! here: the flows' filter rule (`heartbeats.replication.enabled`) makes them ordinary
//! replicated topics, as in MM2.
#![forbid(unsafe_code)]

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strait_dataplane::batch::Record;
use strait_dataplane::io::{ConnSetup, IoBackend};
use strait_dataplane::wire::{ConnConfig, WireError};

use crate::cluster::{
    Cluster, ClusterError, IsolationLevel, OffsetSpec, RetryConfig, TopicPartition,
};
use crate::config::Mm2Config;
use crate::model::counters::HeartbeatCounters;
use crate::offsets::{FormatError, Heartbeat};
use crate::store::records;
use crate::store::topics::ensure_compacted_topic;
use crate::time::Every;

/// Errors of the heartbeat emitter.
#[derive(Debug, thiserror::Error)]
pub enum HeartbeatError {
    /// The target's connection settings are unusable (TLS material...).
    #[error("heartbeats {source_alias}->{target_alias}: {error}")]
    Setup {
        source_alias: String,
        target_alias: String,
        /// In the message, so not a `#[source]` (the CLI prints error chains).
        error: WireError,
    },
    /// An alias too long for MM2's format.
    #[error("heartbeats {source_alias}->{target_alias}: {error}")]
    Format {
        source_alias: String,
        target_alias: String,
        error: FormatError,
    },
    /// Creating the topic or producing failed.
    #[error("heartbeats {source_alias}->{target_alias} on topic {topic}: {error}")]
    Cluster {
        source_alias: String,
        target_alias: String,
        topic: String,
        error: Box<ClusterError>,
    },
}

/// One herder pair's heartbeats.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatPlan {
    pub source: String,
    pub target: String,
    /// `heartbeats` (the policy's heartbeats topic), on the target.
    pub topic: String,
    /// `emit.heartbeats.interval.seconds`, in milliseconds.
    pub interval_ms: u64,
    /// `heartbeats.topic.replication.factor` (-1 = the broker default).
    pub replication_factor: i16,
    pub target_bootstrap: Vec<String>,
    /// The target admin client's connection settings.
    pub target_conn: ConnConfig,
}

/// The heartbeat pairs of a config: every flow MirrorMaker would run with
/// `emit.heartbeats.enabled`. A pair whose target has no `bootstrap.servers` cannot emit; it
/// is left out and named in the returned warnings.
pub fn plans(cfg: &Mm2Config) -> (Vec<HeartbeatPlan>, Vec<String>) {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for f in cfg.flows.iter().filter(|f| f.emit_heartbeats_enabled.value) {
        let admin = &f.clients.target_admin.client;
        let bootstrap: Vec<String> = admin
            .bootstrap_servers
            .iter()
            .map(|a| a.to_string())
            .collect();
        if bootstrap.is_empty() {
            warnings.push(format!(
                "flow {} would emit heartbeats into {}, but {}.bootstrap.servers is not set: no heartbeats for it (set {}.emit.heartbeats.enabled = false to silence this)",
                f.name(),
                f.target,
                f.target,
                f.name()
            ));
            continue;
        }
        out.push(HeartbeatPlan {
            source: f.source.clone(),
            target: f.target.clone(),
            topic: f.heartbeats_topic().to_string(),
            interval_ms: f
                .emit_heartbeats_interval_seconds
                .value
                .saturating_mul(1_000),
            replication_factor: f.heartbeats_topic_replication_factor.value,
            target_bootstrap: bootstrap,
            target_conn: admin.conn.clone(),
        });
    }
    (out, warnings)
}

/// The record MM2's heartbeat task writes at `now_ms`.
pub fn record(source: &str, target: &str, now_ms: i64) -> Result<Record, FormatError> {
    let hb = Heartbeat {
        source_alias: source.to_string(),
        target_alias: target.to_string(),
        timestamp_ms: now_ms,
    };
    Ok(Record::new(
        now_ms,
        Some(Bytes::from(hb.encode_key()?)),
        Some(Bytes::copy_from_slice(&hb.encode_value())),
    ))
}

struct Emitter {
    plan: HeartbeatPlan,
    cluster: Rc<Cluster>,
    every: Every,
    topic_ready: bool,
    /// Consecutive failures; the first is logged as a warning, recovery as info.
    failures: u32,
    emitted: u64,
    /// Heartbeats that could not be written.
    errors: u64,
    /// Timestamp of the newest record read back from the topic, -1 before the first read.
    newest_read_back_ms: i64,
    /// When the topic is read back next ([`READ_BACK_INTERVAL`]).
    next_read_back: Instant,
}

/// How often the newest heartbeat is read back from the target, for
/// `strait_heartbeat_read_back_age_seconds`.
pub const READ_BACK_INTERVAL: Duration = Duration::from_secs(10);

/// Emits the heartbeats of every pair. Call [`Heartbeats::tick`] from the control loop.
pub struct Heartbeats {
    emitters: Vec<Emitter>,
}

impl std::fmt::Debug for Heartbeats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.emitters
                    .iter()
                    .map(|e| format!("{}->{}", e.plan.source, e.plan.target)),
            )
            .finish()
    }
}

impl Heartbeats {
    /// Emitters for `plans`, the first heartbeat due at `now`.
    pub fn new(plans: &[HeartbeatPlan], now: Instant) -> Result<Heartbeats, HeartbeatError> {
        let mut emitters = Vec::new();
        for plan in plans {
            // Catch an alias MM2's format cannot hold now rather than at every tick.
            record(&plan.source, &plan.target, 0).map_err(|error| HeartbeatError::Format {
                source_alias: plan.source.clone(),
                target_alias: plan.target.clone(),
                error,
            })?;
            let setup =
                ConnSetup::new(plan.target_conn.clone(), IoBackend::Epoll).map_err(|e| {
                    HeartbeatError::Setup {
                        source_alias: plan.source.clone(),
                        target_alias: plan.target.clone(),
                        error: e,
                    }
                })?;
            let cluster = Rc::new(Cluster::new(
                &plan.target,
                plan.target_bootstrap.clone(),
                setup,
                RetryConfig::default(),
            ));
            emitters.push(Emitter {
                plan: plan.clone(),
                cluster,
                every: Every::from_millis(true, plan.interval_ms, now),
                topic_ready: false,
                failures: 0,
                emitted: 0,
                errors: 0,
                newest_read_back_ms: -1,
                next_read_back: now,
            });
        }
        Ok(Heartbeats { emitters })
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.emitters.len()
    }

    /// Whether there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.emitters.is_empty()
    }

    /// Creates every heartbeats topic that does not exist yet (MM2 does this when its
    /// heartbeat connector starts). Failures are logged and retried before the next emission.
    pub async fn start(&mut self) {
        for e in &mut self.emitters {
            if let Err(err) = ensure_topic(e).await {
                tracing::warn!("{err}; retrying");
            }
        }
    }

    /// The pairs whose heartbeat is due at `now` (indices into the plans), each then scheduled
    /// for its next interval.
    pub fn due(&mut self, now: Instant) -> Vec<usize> {
        let mut due = Vec::new();
        for (i, e) in self.emitters.iter_mut().enumerate() {
            if e.every.due(now) {
                e.every.done(now);
                due.push(i);
            }
        }
        due
    }

    /// Emits the heartbeats that are due. Returns how many were written.
    pub async fn tick(&mut self, now: Instant, now_ms: i64) -> usize {
        let mut n = 0;
        for i in self.due(now) {
            let e = &mut self.emitters[i];
            match emit(e, now_ms).await {
                Ok(()) => {
                    n += 1;
                    e.emitted += 1;
                    if e.failures > 0 {
                        tracing::info!(
                            pair = %format!("{}->{}", e.plan.source, e.plan.target),
                            "heartbeats are written again"
                        );
                    }
                    e.failures = 0;
                    if now >= e.next_read_back {
                        e.next_read_back = now + READ_BACK_INTERVAL;
                        read_back(e).await;
                    }
                }
                Err(err) => {
                    e.errors += 1;
                    if e.failures == 0 {
                        tracing::warn!("cannot write a heartbeat: {err}; retrying every interval");
                    }
                    e.failures = e.failures.saturating_add(1);
                }
            }
        }
        n
    }

    /// What each pair's emitter did, for `/metrics`.
    pub fn counters(&self) -> Vec<HeartbeatCounters> {
        self.emitters
            .iter()
            .map(|e| HeartbeatCounters {
                source: e.plan.source.clone(),
                target: e.plan.target.clone(),
                written: e.emitted,
                errors: e.errors,
                newest_read_back_ms: e.newest_read_back_ms,
            })
            .collect()
    }

    /// Heartbeats written so far per pair, `(source, target, count)`.
    pub fn emitted(&self) -> Vec<(String, String, u64)> {
        self.emitters
            .iter()
            .map(|e| (e.plan.source.clone(), e.plan.target.clone(), e.emitted))
            .collect()
    }
}

fn cluster_err(e: &Emitter) -> impl FnOnce(ClusterError) -> HeartbeatError + '_ {
    move |error| HeartbeatError::Cluster {
        source_alias: e.plan.source.clone(),
        target_alias: e.plan.target.clone(),
        topic: e.plan.topic.clone(),
        error: Box::new(error),
    }
}

async fn ensure_topic(e: &mut Emitter) -> Result<(), HeartbeatError> {
    if e.topic_ready {
        return Ok(());
    }
    ensure_compacted_topic(&e.cluster, &e.plan.topic, e.plan.replication_factor)
        .await
        .map_err(cluster_err(e))?;
    e.topic_ready = true;
    Ok(())
}

/// Reads the newest record of the heartbeats topic on the target back and keeps its
/// timestamp. Failures are only logged at debug level: the next read retries, and the age
/// keeps growing meanwhile.
async fn read_back(e: &mut Emitter) {
    let tp = TopicPartition::new(&e.plan.topic, 0);
    let ends = e
        .cluster
        .list_offsets(
            std::slice::from_ref(&tp),
            OffsetSpec::Latest,
            IsolationLevel::ReadUncommitted,
        )
        .await;
    let end = match ends.into_values().next() {
        Some(Ok(end)) if end > 0 => end,
        Some(Err(err)) => {
            tracing::debug!(topic = %e.plan.topic, error = %err, "cannot read the heartbeats back");
            return;
        }
        _ => return,
    };
    let mut newest = -1;
    let read = records::read_range(
        &e.cluster,
        &tp,
        end - 1,
        end,
        IsolationLevel::ReadUncommitted,
        |r| {
            newest = r.timestamp;
            false
        },
    )
    .await;
    match read {
        Ok(_) if newest >= 0 => e.newest_read_back_ms = e.newest_read_back_ms.max(newest),
        Ok(_) => {}
        Err(err) => {
            tracing::debug!(topic = %e.plan.topic, error = %err, "cannot read the heartbeats back")
        }
    }
}

async fn emit(e: &mut Emitter, now_ms: i64) -> Result<(), HeartbeatError> {
    ensure_topic(e).await?;
    let r =
        record(&e.plan.source, &e.plan.target, now_ms).map_err(|error| HeartbeatError::Format {
            source_alias: e.plan.source.clone(),
            target_alias: e.plan.target.clone(),
            error,
        })?;
    records::produce(&e.cluster, &e.plan.topic, 0, std::slice::from_ref(&r))
        .await
        .map_err(cluster_err(e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn record_bytes_are_mm2s() {
        let r = record("A", "B", 0x0102_0304_0506_0708).unwrap();
        assert_eq!(r.timestamp, 0x0102_0304_0506_0708);
        assert_eq!(r.key.as_deref(), Some(&[0, 1, b'A', 0, 1, b'B'][..]));
        assert_eq!(
            r.value.as_deref(),
            Some(&[0, 0, 1, 2, 3, 4, 5, 6, 7, 8][..])
        );
    }

    #[test]
    fn plans_follow_mm2_herders() {
        let text = "clusters = A, B, C\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n\
                    C.bootstrap.servers = c:9092\nA->B.enabled = true\n\
                    A->B.emit.heartbeats.interval.seconds = 3\n\
                    B->A.emit.heartbeats.enabled = false\nheartbeats.topic.replication.factor = 1\n";
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        let cfg = crate::config::load(f.path()).expect("valid config");
        let (plans, warnings) = plans(&cfg);
        let pairs: Vec<(&str, &str, u64, &str)> = plans
            .iter()
            .map(|p| {
                (
                    p.source.as_str(),
                    p.target.as_str(),
                    p.interval_ms,
                    p.target_bootstrap[0].as_str(),
                )
            })
            .collect();
        // Every ordered pair (heartbeats-only ones included) except the disabled B->A.
        assert_eq!(
            pairs,
            vec![
                ("A", "B", 3_000, "b:9092"),
                ("A", "C", 1_000, "c:9092"),
                ("B", "C", 1_000, "c:9092"),
                ("C", "A", 1_000, "a:9092"),
                ("C", "B", 1_000, "b:9092"),
            ]
        );
        assert!(
            plans
                .iter()
                .all(|p| p.topic == "heartbeats" && p.replication_factor == 1)
        );
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    proptest! {
        #[test]
        fn records_decode_back(src in "[A-Za-z0-9_-]{1,20}", tgt in "[A-Za-z0-9_-]{1,20}", ts in any::<i64>()) {
            let r = record(&src, &tgt, ts).unwrap();
            let hb = Heartbeat::decode(r.key.as_deref().unwrap(), r.value.as_deref().unwrap()).unwrap();
            prop_assert_eq!(hb, Heartbeat { source_alias: src, target_alias: tgt, timestamp_ms: ts });
            prop_assert_eq!(r.timestamp, ts);
        }
    }
}
