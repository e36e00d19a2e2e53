//! `strait failover`, planned (the source answers): the cutover of a flow's topics to the target
//! as idempotent, resumable steps, each timed:
//!
//! 1. `validate`: the flow, its topics with stored progress (`--topics`), the groups to move
//!    (each must be empty on the target), and any stored failover state (a second run goes on
//!    from it);
//! 2. `quiet`: the source's ends must not move over a window (a producer still writing is
//!    named with its rate; refused unless `--force`): the lag can reach zero only then;
//! 3. `lag`: wait, bounded, until strait's stored progress reaches the source's end on every
//!    partition;
//! 4. `stop`: the stored failover state (`store::failover`) stops the topics in every running
//!    `strait run` and keeps them stopped across restarts; the lag is checked zero again;
//! 5. `groups`: each group's committed source offsets translated by the stored exact mapping
//!    and committed to the group on the target;
//! 6. `evidence`: per partition the last source offset and its target offset, per group its
//!    target positions, and what to point clients at.
//!
//! `--dry-run` runs the checks (lag and producers as they are now, without waiting) and
//! writes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::translate::select_flow;
use crate::cluster::{Cluster, ClusterError, CommittedOffset, IsolationLevel, TopicPartition};
use crate::config::{FlowConfig, Mm2Config};
use crate::duties::offsets::{OffsetsError, cluster_for};
use crate::offsets::CheckpointStore;
use crate::offsets::mapping::{PartitionMapping, Translation};
use crate::store::checkpoints::load_checkpoints;
use crate::store::failover::{self, FailoverRecord, Stage};
use crate::store::progress;

/// How long `strait failover` waits for the lag to reach zero, by default.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(300);
/// Over how long the source's ends must not move, by default.
pub const DEFAULT_QUIET: Duration = Duration::from_secs(10);

/// What to fail over.
#[derive(Debug, Clone)]
pub struct FailoverOptions {
    pub flow: Option<String>,
    /// Only source topics whose whole name matches (default: every topic of the flow with
    /// stored progress but the heartbeats topics).
    pub topics: Option<regex::Regex>,
    /// Groups whose offsets are moved to the target.
    pub groups: Vec<String>,
    pub dry_run: bool,
    /// Go on although producers still write to the source.
    pub force: bool,
    pub wait: Duration,
    pub quiet: Duration,
    /// Unplanned: the source does not answer. No producer check and no lag wait; groups move
    /// to strait's last checkpoints; the report gives the recovery point.
    pub source_unavailable: bool,
    /// A running strait's API (`host:port`), asked for the source ends it last saw (unplanned
    /// failover); `None`: not asked.
    pub api: Option<super::ctl::Client>,
}

/// Why the failover stopped.
#[derive(Debug, thiserror::Error)]
pub enum FailoverError {
    #[error(transparent)]
    Offsets(#[from] OffsetsError),
    #[error("flow {flow}: no topic with stored progress matches: nothing to fail over")]
    NothingToFailOver { flow: String },
}

/// One step as it ran.
#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    pub step: &'static str,
    /// `done`, `skipped` (done by an earlier run), `checked` (dry run) or `refused`.
    pub status: &'static str,
    pub duration_ms: u64,
    pub detail: String,
}

/// One partition's cutover point.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionEvidence {
    pub source: String,
    pub target: String,
    /// Every source record below it is on the target (strait's stored progress): the source's
    /// end in a planned failover, the recovery point in an unplanned one.
    pub source_end: i64,
    /// Where the target's copy of the source's end is (the remote partition's next offset).
    pub target_offset: Option<i64>,
    /// Unplanned failover: the source's end the running strait last saw, and the records and
    /// seconds between it and what was copied (possibly lost); `None` when not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_end_last_seen: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records_possibly_lost: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds_possibly_lost: Option<f64>,
}

/// One group partition moved to the target.
#[derive(Debug, Clone, Serialize)]
pub struct GroupRow {
    pub source: String,
    pub committed: i64,
    pub target: String,
    pub target_offset: Option<i64>,
    /// From the stored exact mapping (else MirrorMaker's rule: may re-read, never skips).
    pub exact: bool,
    /// `stored mapping`, or `last checkpoint` (unplanned: the source's offsets are not read).
    pub via: &'static str,
}

/// One group's move.
#[derive(Debug, Clone, Serialize)]
pub struct GroupEvidence {
    pub group: String,
    pub partitions: Vec<GroupRow>,
    /// Committed on the target (false in a dry run or when refused).
    pub committed: bool,
}

/// What `strait failover` prints.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverReport {
    pub flow: String,
    pub dry_run: bool,
    /// `false` with `--source-unavailable`.
    pub planned: bool,
    pub topics: Vec<String>,
    pub steps: Vec<StepReport>,
    pub partitions: Vec<PartitionEvidence>,
    pub groups: Vec<GroupEvidence>,
    /// What to point clients at.
    pub next: Vec<String>,
    /// Why it stopped short, when it did.
    pub refused: Option<String>,
}

impl FailoverReport {
    pub fn ok(&self) -> bool {
        self.refused.is_none()
    }
}

/// The flow's clients.
struct Clients {
    source_admin: std::rc::Rc<Cluster>,
    target_admin: std::rc::Rc<Cluster>,
    target: std::rc::Rc<Cluster>,
}

/// One run of the command: what every step needs.
struct Run<'a, P> {
    cfg: &'a Mm2Config,
    opts: &'a FailoverOptions,
    flow: &'a FlowConfig,
    cl: Clients,
    on_progress: P,
    report: FailoverReport,
    tps: Vec<TopicPartition>,
    topics: BTreeSet<String>,
    /// The stored state of an earlier run that covered these topics.
    earlier: Option<FailoverRecord>,
}

/// Runs the failover; `on_progress` gets a line about once a second while it waits.
pub async fn failover_command(
    cfg: &Mm2Config,
    opts: &FailoverOptions,
    on_progress: impl FnMut(&str),
) -> Result<FailoverReport, FailoverError> {
    let flow = select_flow(cfg, opts.flow.as_deref())?;
    let name = flow.name();
    let c = &flow.clients;
    let cl = Clients {
        source_admin: cluster_for(&name, "source admin", &c.source_admin.client)?,
        target_admin: cluster_for(&name, "target admin", &c.target_admin.client)?,
        target: cluster_for(&name, "target consumer", &c.target_consumer.client)?,
    };
    let mut run = Run {
        cfg,
        opts,
        flow,
        cl,
        on_progress,
        report: FailoverReport {
            flow: name,
            dry_run: opts.dry_run,
            planned: !opts.source_unavailable,
            topics: Vec::new(),
            steps: Vec::new(),
            partitions: Vec::new(),
            groups: Vec::new(),
            next: Vec::new(),
            refused: None,
        },
        tps: Vec::new(),
        topics: BTreeSet::new(),
        earlier: None,
    };
    if run.validate().await? && run.quiet().await? && run.lag().await? && run.stop().await? {
        run.groups_and_evidence().await?;
    }
    Ok(run.report)
}

impl<P: FnMut(&str)> Run<'_, P> {
    fn err(&self, what: &'static str) -> impl FnOnce(ClusterError) -> OffsetsError + use<P> {
        OffsetsError::cluster(&self.report.flow, what.into())
    }

    fn step(&mut self, step: &'static str, status: &'static str, t: Instant, detail: String) {
        self.report.steps.push(StepReport {
            step,
            status,
            duration_ms: t.elapsed().as_millis() as u64,
            detail,
        });
    }

    /// Records the refusal; returns false (the steps stop).
    fn refuse(&mut self, at: &'static str, t: Instant, why: String) -> bool {
        self.step(at, "refused", t, why.clone());
        self.report.refused = Some(why);
        false
    }

    /// `done`, or `checked` in a dry run.
    fn done(&self) -> &'static str {
        if self.opts.dry_run { "checked" } else { "done" }
    }

    async fn validate(&mut self) -> Result<bool, FailoverError> {
        let t = Instant::now();
        let stored = progress::read_stored(&self.cl.target, &self.flow.source).await;
        self.tps = stored
            .keys()
            .filter(|tp| selected(self.flow, self.opts, &tp.topic))
            .cloned()
            .collect();
        if self.tps.is_empty() {
            return Err(FailoverError::NothingToFailOver {
                flow: self.report.flow.clone(),
            });
        }
        self.topics = self.tps.iter().map(|tp| tp.topic.clone()).collect();
        self.report.topics = self.topics.iter().cloned().collect();
        let err = self.err("reading the stored failover state");
        self.earlier = failover::read_all(&self.cl.target_admin)
            .await
            .map_err(err)?
            .remove(&self.report.flow)
            .filter(|r| self.topics.is_subset(&r.topics));
        let err = self.err("describing the groups on the target");
        let active = active_groups(&self.cl.target_admin, &self.opts.groups)
            .await
            .map_err(err)?;
        if !active.is_empty() {
            return Ok(self.refuse(
                "validate",
                t,
                format!(
                    "groups with members on the target (stop their consumers there first): {}",
                    active.join(", ")
                ),
            ));
        }
        let detail = format!(
            "{} topics, {} partitions, {} groups{}",
            self.topics.len(),
            self.tps.len(),
            self.opts.groups.len(),
            self.earlier.as_ref().map_or(String::new(), |r| format!(
                "; an earlier run stopped them (stage {:?})",
                r.stage
            ))
        );
        self.step("validate", "done", t, detail);
        Ok(true)
    }

    /// Whether an earlier run completed the failover of these topics.
    fn done_before(&self) -> bool {
        self.earlier
            .as_ref()
            .is_some_and(|r| r.stage == Stage::Done)
    }

    async fn lag(&mut self) -> Result<bool, FailoverError> {
        let t = Instant::now();
        if self.opts.source_unavailable {
            self.step(
                "lag",
                "skipped",
                t,
                "--source-unavailable: what is not copied is reported below".into(),
            );
            return Ok(true);
        }
        if self.done_before() {
            let err = self.err("reading the source's ends and strait's progress");
            let (_, since) = wait_lag_zero(
                &self.cl,
                self.flow,
                &self.tps,
                Duration::ZERO,
                &mut self.on_progress,
            )
            .await
            .map_err(err)?;
            let detail = if since.is_empty() {
                "failed over earlier; nothing written to the source since".to_string()
            } else {
                format!(
                    "failed over earlier; written to the old source since, not copied: {}",
                    since.join(", ")
                )
            };
            self.step("lag", "skipped", t, detail);
            return Ok(true);
        }
        let wait = if self.opts.dry_run {
            Duration::ZERO
        } else {
            self.opts.wait
        };
        let err = self.err("reading the source's ends and strait's progress");
        let (_, lagging) =
            wait_lag_zero(&self.cl, self.flow, &self.tps, wait, &mut self.on_progress)
                .await
                .map_err(err)?;
        if lagging.is_empty() {
            self.step(
                "lag",
                self.done(),
                t,
                "0 records behind on every partition".into(),
            );
            return Ok(true);
        }
        let why = format!(
            "lag not zero{}: {} (is strait running this flow? `strait ctl status`)",
            if self.opts.dry_run {
                String::new()
            } else {
                format!(" within {} s", self.opts.wait.as_secs())
            },
            lagging.join(", ")
        );
        if self.opts.dry_run {
            self.step("lag", "checked", t, why);
            return Ok(true);
        }
        Ok(self.refuse("lag", t, why))
    }

    async fn quiet(&mut self) -> Result<bool, FailoverError> {
        let t = Instant::now();
        if self.opts.source_unavailable {
            self.step("quiet", "skipped", t, "--source-unavailable".into());
            return Ok(true);
        }
        if self.earlier.is_some() {
            self.step(
                "quiet",
                "skipped",
                t,
                "the topics were stopped by an earlier run".into(),
            );
            return Ok(true);
        }
        let err = self.err("reading the source's ends");
        let before = source_ends(&self.cl.source_admin, &self.tps, self.flow)
            .await
            .map_err(err)?;
        tokio::time::sleep(self.opts.quiet).await;
        let err = self.err("reading the source's ends");
        let later = source_ends(&self.cl.source_admin, &self.tps, self.flow)
            .await
            .map_err(err)?;
        let writing = writers(&before, &later, self.opts.quiet);
        if writing.is_empty() {
            let detail = format!("no source end moved in {} s", self.opts.quiet.as_secs());
            self.step("quiet", self.done(), t, detail);
            return Ok(true);
        }
        if self.opts.force || self.opts.dry_run {
            let detail = format!(
                "producers still write: {}{}",
                writing.join(", "),
                if self.opts.force { " (--force)" } else { "" }
            );
            self.step("quiet", self.done(), t, detail);
            return Ok(true);
        }
        Ok(self.refuse(
            "quiet",
            t,
            format!(
                "producers still write to the source: {} (stop them, or --force)",
                writing.join(", ")
            ),
        ))
    }

    /// The stored state, then the lag checked zero again.
    async fn stop(&mut self) -> Result<bool, FailoverError> {
        let t = Instant::now();
        if self.opts.dry_run {
            let detail = format!(
                "would store the failover of {} topics in {} on the target",
                self.topics.len(),
                failover::TOPIC
            );
            self.step("stop", "checked", t, detail);
            return Ok(true);
        }
        let already = self.earlier.is_some();
        if self.done_before() {
            self.step("stop", "skipped", t, "stopped by an earlier run".into());
            return Ok(true);
        }
        if !already {
            self.store(Stage::Stopped).await?;
            // Running instances read it every 2 s and flush their progress.
            tokio::time::sleep(crate::run::FAILOVER_WATCH_INTERVAL * 2).await;
        }
        if self.opts.source_unavailable {
            let detail = format!(
                "{} stores the failover (unplanned); every strait run of the flow stops these topics",
                failover::TOPIC
            );
            self.step("stop", if already { "skipped" } else { "done" }, t, detail);
            return Ok(true);
        }
        let err = self.err("reading the source's ends and strait's progress");
        let (_, lagging) = wait_lag_zero(
            &self.cl,
            self.flow,
            &self.tps,
            self.opts.wait,
            &mut self.on_progress,
        )
        .await
        .map_err(err)?;
        if !lagging.is_empty() {
            return Ok(self.refuse(
                "stop",
                t,
                format!(
                    "stopped, but records that arrived before the stop are not all copied: {}",
                    lagging.join(", ")
                ),
            ));
        }
        let detail = format!(
            "{} stores the failover; every strait run of the flow stops these topics",
            failover::TOPIC
        );
        self.step("stop", if already { "skipped" } else { "done" }, t, detail);
        Ok(true)
    }

    /// Writes the stored state at `stage` (the topics and groups added to an earlier one's).
    async fn store(&mut self, stage: Stage) -> Result<(), FailoverError> {
        let now_ms = crate::time::wall_ms();
        let mut record = self.earlier.clone().unwrap_or(FailoverRecord {
            stage,
            topics: BTreeSet::new(),
            groups: BTreeSet::new(),
            planned: !self.opts.source_unavailable,
            started_ms: now_ms,
            updated_ms: now_ms,
        });
        record.stage = stage;
        record.topics.extend(self.topics.iter().cloned());
        record.groups.extend(self.opts.groups.iter().cloned());
        record.updated_ms = now_ms;
        let err = self.err("storing the failover state");
        failover::write(
            &self.cl.target_admin,
            &self.report.flow,
            &record,
            self.flow.progress_topic_replication_factor.value,
        )
        .await
        .map_err(err)?;
        self.earlier = Some(record);
        Ok(())
    }

    async fn groups_and_evidence(&mut self) -> Result<(), FailoverError> {
        let t = Instant::now();
        let (stored, mappings) = progress::read_stored_with_mappings(
            &self.cl.target,
            &self.flow.source,
            self.cfg.strait.mapping_max_runs_per_partition.value,
        )
        .await;
        let no_commit = self.opts.dry_run || self.done_before();
        // Unplanned: the groups' source offsets cannot be read; strait's last checkpoints
        // (on the target) are where they were.
        let mut checkpoints = None;
        if self.opts.source_unavailable && !self.opts.groups.is_empty() {
            let mut store = CheckpointStore::default();
            let (_, read) = load_checkpoints(self.flow, &self.cl.target, &mut store).await;
            store.finish_load(read);
            checkpoints = Some(store);
        }
        let returning = self.returning_partitions().await?;
        for g in &self.opts.groups {
            let ev = match &checkpoints {
                Some(store) => {
                    let err = self.err("committing a group's checkpoints on the target");
                    move_group_to_checkpoints(&self.cl, self.flow, g, &self.tps, store, no_commit)
                        .await
                        .map_err(err)?
                }
                None => {
                    let err = self.err("moving a group's offsets");
                    let maps = (&mappings, &returning);
                    move_group(&self.cl, self.flow, g, &self.tps, maps, no_commit)
                        .await
                        .map_err(err)?
                }
            };
            self.report.groups.push(ev);
        }
        let detail = format!("{} groups", self.opts.groups.len());
        let status = if self.done_before() {
            "skipped"
        } else {
            self.done()
        };
        self.step("groups", status, t, detail);
        let last_seen = if self.opts.source_unavailable {
            self.last_seen()
        } else {
            BTreeMap::new()
        };
        self.report.partitions = self
            .tps
            .iter()
            .map(|tp| {
                let end = stored.get(tp).map_or(-1, |e| e.next_offset);
                let seen = last_seen.get(tp);
                PartitionEvidence {
                    source: tp.to_string(),
                    target: TopicPartition::new(self.flow.remote_topic(&tp.topic), tp.partition)
                        .to_string(),
                    source_end: end,
                    target_offset: mappings.get(tp).and_then(|m| m.translate(end).exact()),
                    source_end_last_seen: seen.map(|s| s.end),
                    records_possibly_lost: seen.map(|s| (s.end - end).max(0)),
                    seconds_possibly_lost: seen.map(|s| s.lag_seconds),
                }
            })
            .collect();
        self.report.next = next_steps(
            self.cfg,
            self.flow,
            &self.topics,
            &self.opts.groups,
            &returning,
        );
        if !self.opts.dry_run && !self.done_before() {
            self.store(Stage::Done).await?;
        }
        Ok(())
    }
}

impl<P: FnMut(&str)> Run<'_, P> {
    /// In a planned failover with groups: the partitions of the source that came from the
    /// target (a failover back, see [`returning`]).
    async fn returning_partitions(
        &self,
    ) -> Result<BTreeMap<TopicPartition, Returning>, FailoverError> {
        if self.opts.source_unavailable || self.opts.groups.is_empty() {
            return Ok(BTreeMap::new());
        }
        let err = self.err("reading the stored failover and mapping of the opposite flow");
        Ok(returning(self.cfg, self.flow, &self.cl.source_admin)
            .await
            .map_err(err)?)
    }

    /// What the running strait last saw of the source (its API), when asked.
    fn last_seen(&mut self) -> BTreeMap<TopicPartition, LastSeen> {
        let Some(api) = &self.opts.api else {
            (self.on_progress)("the source ends last seen are unknown: no --api given");
            return BTreeMap::new();
        };
        let path = format!(
            "/flows/{}/partitions",
            super::ctl::encode(&self.report.flow)
        );
        match api.call("GET", &path, None) {
            Ok(v) => v["partitions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    let tp = TopicPartition::new(
                        p["topic"].as_str()?,
                        i32::try_from(p["partition"].as_i64()?).ok()?,
                    );
                    let end = p["source_end_offset"].as_i64().filter(|e| *e >= 0)?;
                    let lag_seconds = p["lag_seconds"].as_f64().unwrap_or(0.0);
                    Some((tp, LastSeen { end, lag_seconds }))
                })
                .collect(),
            Err(e) => {
                (self.on_progress)(&format!(
                    "the source ends last seen are unknown: strait's API at {} did not answer: {e}",
                    api.addr
                ));
                BTreeMap::new()
            }
        }
    }
}

/// A source partition's end as a running strait last saw it, and its lag in time then.
#[derive(Debug, Clone, Copy)]
struct LastSeen {
    end: i64,
    lag_seconds: f64,
}

/// Commits group `g`'s last checkpoints of `tps` (strait's translations, on the target) to
/// `g` on the target (not with `no_commit`).
async fn move_group_to_checkpoints(
    cl: &Clients,
    flow: &FlowConfig,
    g: &str,
    tps: &[TopicPartition],
    store: &CheckpointStore,
    no_commit: bool,
) -> Result<GroupEvidence, ClusterError> {
    let mut rows = Vec::new();
    let mut commit = BTreeMap::new();
    let last = store.get(g);
    for tp in tps {
        let target = TopicPartition::new(flow.remote_topic(&tp.topic), tp.partition);
        let Some(c) = last.and_then(|m| m.get(&target)) else {
            continue;
        };
        commit.insert(
            target.clone(),
            CommittedOffset {
                offset: c.downstream_offset,
                metadata: c.metadata.clone(),
            },
        );
        rows.push(GroupRow {
            source: tp.to_string(),
            committed: c.upstream_offset,
            target: target.to_string(),
            target_offset: Some(c.downstream_offset),
            exact: false,
            via: "last checkpoint",
        });
    }
    let committed = !no_commit && !commit.is_empty();
    if committed {
        commit_all(&cl.target_admin, g, &commit).await?;
    }
    Ok(GroupEvidence {
        group: g.to_string(),
        partitions: rows,
        committed,
    })
}

/// Whether the failover covers `topic`: a topic of the flow matching `--topics`; without it,
/// every topic but MirrorMaker's heartbeats (they keep telling that the flow runs).
fn selected(flow: &FlowConfig, opts: &FailoverOptions, topic: &str) -> bool {
    flow.should_replicate_topic(topic)
        && (opts.topics.is_some() || !flow.replication_policy.is_heartbeats_topic(topic))
        && opts.topics.as_ref().is_none_or(|re| {
            re.find(topic)
                .is_some_and(|m| m.start() == 0 && m.end() == topic.len())
        })
}

/// The groups of `groups` with members on the target.
async fn active_groups(target: &Cluster, groups: &[String]) -> Result<Vec<String>, ClusterError> {
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for g in groups {
        // Kafka 4 answers GroupIdNotFound for a group it does not know: empty, then.
        let described = match target.describe_groups(std::slice::from_ref(g)).await {
            Ok(d) => d,
            Err(e) if e.is(kafka_protocol::ResponseError::GroupIdNotFound) => continue,
            Err(e) => return Err(e),
        };
        out.extend(
            described
                .into_iter()
                .filter(|d| d.members > 0 || !matches!(d.state.as_str(), "Empty" | "Dead" | ""))
                .map(|d| format!("{} ({}, {} members)", d.group_id, d.state, d.members)),
        );
    }
    Ok(out)
}

/// The source's ends (under the flow's isolation level).
async fn source_ends(
    source: &Cluster,
    tps: &[TopicPartition],
    flow: &FlowConfig,
) -> Result<BTreeMap<TopicPartition, i64>, ClusterError> {
    let isolation: IsolationLevel = flow.clients.source_consumer.isolation_level.value.into();
    super::end_offsets(source, tps, isolation).await
}

/// Waits (at most `wait`) until strait's stored progress reaches the source's end on every
/// partition; returns the ends last read and the partitions still behind (`topic-p: N`).
async fn wait_lag_zero(
    cl: &Clients,
    flow: &FlowConfig,
    tps: &[TopicPartition],
    wait: Duration,
    on_progress: &mut impl FnMut(&str),
) -> Result<(BTreeMap<TopicPartition, i64>, Vec<String>), ClusterError> {
    let deadline = Instant::now() + wait;
    loop {
        let ends = source_ends(&cl.source_admin, tps, flow).await?;
        let stored = progress::read_stored(&cl.target, &flow.source).await;
        let lagging: Vec<String> = tps
            .iter()
            .filter_map(|tp| {
                let end = ends.get(tp).copied().unwrap_or(0);
                let at = stored.get(tp).map_or(0, |e| e.next_offset);
                (at < end).then(|| format!("{tp}: {} records", end - at))
            })
            .collect();
        if lagging.is_empty() || Instant::now() >= deadline {
            return Ok((ends, lagging));
        }
        on_progress(&format!(
            "waiting for lag 0: {} partitions behind ({})",
            lagging.len(),
            lagging
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The partitions whose end moved between `before` and `after`, by topic with the rate.
fn writers(
    before: &BTreeMap<TopicPartition, i64>,
    after: &BTreeMap<TopicPartition, i64>,
    window: Duration,
) -> Vec<String> {
    let mut by_topic: BTreeMap<&str, i64> = BTreeMap::new();
    for (tp, end) in after {
        let grown = end - before.get(tp).copied().unwrap_or(*end);
        if grown > 0 {
            *by_topic.entry(&tp.topic).or_default() += grown;
        }
    }
    let secs = window.as_secs_f64().max(0.001);
    by_topic
        .into_iter()
        .map(|(t, n)| {
            format!(
                "{t} ({n} records in {:.0} s, {:.1} records/s)",
                window.as_secs_f64(),
                n as f64 / secs
            )
        })
        .collect()
}

/// Commits `offsets` to group `g` on `target`; the first partition refused fails the call.
async fn commit_all(
    target: &Cluster,
    g: &str,
    offsets: &BTreeMap<TopicPartition, CommittedOffset>,
) -> Result<(), ClusterError> {
    for (tp, r) in target.offset_commit(g, offsets).await? {
        r.map_err(|e| {
            tracing::warn!(group = g, partition = %tp, error = %e, "commit failed");
            e
        })?;
    }
    Ok(())
}

/// A partition of this flow's source that the opposite flow (target->source) filled before it
/// was failed over: in a failback, a group's position there goes back to the partition it came
/// from, through that flow's stored mapping.
struct Returning {
    /// The partition on this flow's target it was copied from.
    original: TopicPartition,
    mapping: PartitionMapping,
}

/// The partitions of this flow's source that came from its target by the opposite flow, when
/// that flow's topics were failed over (the failover back of a failback); none otherwise.
async fn returning(
    cfg: &Mm2Config,
    flow: &FlowConfig,
    source: &Cluster,
) -> Result<BTreeMap<TopicPartition, Returning>, ClusterError> {
    let Some(opposite) = cfg.flow(&flow.target, &flow.source) else {
        return Ok(BTreeMap::new());
    };
    let Some(record) = failover::read_all(source).await?.remove(&opposite.name()) else {
        return Ok(BTreeMap::new());
    };
    let (_, mappings) = progress::read_stored_with_mappings(
        source,
        &opposite.source,
        cfg.strait.mapping_max_runs_per_partition.value,
    )
    .await;
    Ok(mappings
        .into_iter()
        .filter(|(tp, _)| record.topics.contains(&tp.topic))
        .map(|(tp, mapping)| {
            let here = TopicPartition::new(opposite.remote_topic(&tp.topic), tp.partition);
            (
                here,
                Returning {
                    original: tp,
                    mapping,
                },
            )
        })
        .collect())
}

/// Translates group `g`'s committed source offsets of `tps` by the stored mappings (and of the
/// `returning` partitions back to where they came from, unless this flow's own mapping
/// answers exactly) and commits them to `g` on the target (not in a dry run).
async fn move_group(
    cl: &Clients,
    flow: &FlowConfig,
    g: &str,
    tps: &[TopicPartition],
    maps: (
        &BTreeMap<TopicPartition, PartitionMapping>,
        &BTreeMap<TopicPartition, Returning>,
    ),
    dry_run: bool,
) -> Result<GroupEvidence, ClusterError> {
    let (mappings, returning) = maps;
    let committed = cl.source_admin.offset_fetch(g).await?;
    let mut rows = Vec::new();
    let mut commit = BTreeMap::new();
    let own: BTreeSet<&TopicPartition> = tps.iter().collect();
    let back = returning.keys().filter(|tp| !own.contains(tp));
    for tp in tps.iter().chain(back) {
        let Some(c) = committed.get(tp).filter(|c| c.offset >= 0) else {
            continue;
        };
        let (target, row) = translate_row(flow, tp, c.offset, mappings.get(tp), returning.get(tp));
        if let Some(d) = row.target_offset {
            commit.insert(
                target,
                CommittedOffset {
                    offset: d,
                    metadata: c.metadata.clone(),
                },
            );
        }
        rows.push(row);
    }
    let done = !dry_run && !commit.is_empty();
    if done {
        commit_all(&cl.target_admin, g, &commit).await?;
    }
    Ok(GroupEvidence {
        group: g.to_string(),
        partitions: rows,
        committed: done,
    })
}

/// One group position moved: by this flow's mapping, or back by the opposite flow's where this
/// flow's does not answer exactly (records below where the reverse flow started came from the
/// target).
fn translate_row(
    flow: &FlowConfig,
    tp: &TopicPartition,
    committed: i64,
    mapping: Option<&PartitionMapping>,
    returning: Option<&Returning>,
) -> (TopicPartition, GroupRow) {
    let forward = mapping
        .map(|m| m.translate(committed))
        .filter(|t| matches!(t, Translation::Exact(_)) || returning.is_none());
    let (target, translated, via) = match (forward, returning) {
        (None, Some(r)) => (
            r.original.clone(),
            Some(r.mapping.translate_back(committed)),
            "mapping back",
        ),
        (t, _) => (
            TopicPartition::new(flow.remote_topic(&tp.topic), tp.partition),
            t,
            "stored mapping",
        ),
    };
    let (target_offset, exact) = match translated {
        Some(Translation::Exact(d)) => (Some(d), true),
        Some(Translation::Approximate(d)) => (Some(d), false),
        _ => (None, false),
    };
    let row = GroupRow {
        source: tp.to_string(),
        committed,
        target: target.to_string(),
        target_offset,
        exact,
        via,
    };
    (target, row)
}

/// What to point clients at.
fn next_steps(
    cfg: &Mm2Config,
    flow: &FlowConfig,
    topics: &BTreeSet<String>,
    groups: &[String],
    returning: &BTreeMap<TopicPartition, Returning>,
) -> Vec<String> {
    let bootstrap = cfg
        .clusters
        .get(&flow.target)
        .and_then(|c| c.bootstrap_servers.as_ref())
        .map(|b| {
            b.value
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    // A failover back: the consumers of the topics that came from here go back to them.
    let back: BTreeSet<&str> = returning
        .values()
        .map(|r| r.original.topic.as_str())
        .collect();
    for t in back {
        out.push(format!(
            "consumers of {t}: bootstrap.servers={bootstrap}, topic {t} again, the groups at their positions above"
        ));
    }
    for t in topics {
        let remote = flow.remote_topic(t);
        out.push(format!(
            "consumers of {t}: bootstrap.servers={bootstrap}, topic {remote}{}",
            if remote == *t { String::new() } else { format!(" (or the pattern '({}\\.)?{t}' to also read what producers write to {t} there)", flow.source) }
        ));
        out.push(format!(
            "producers of {t}: bootstrap.servers={bootstrap}, topic {t}"
        ));
    }
    for g in groups {
        out.push(format!("group {g}: kafka-consumer-groups.sh --bootstrap-server {bootstrap} --describe --group {g}"));
    }
    out
}

impl FailoverReport {
    /// The partition table (with the recovery point columns when unplanned).
    fn write_partitions(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.partitions.is_empty() {
            writeln!(
                f,
                "{:<32} {:>12} {:<32} {:>12}{}",
                "SOURCE",
                "COPIED TO",
                "TARGET",
                "TARGET AT",
                if self.planned {
                    ""
                } else {
                    "   LAST SEEN  POSSIBLY LOST"
                }
            )?;
            for p in &self.partitions {
                let opt = |o: Option<i64>| o.map_or("-".to_string(), |v| v.to_string());
                let lost = if self.planned {
                    String::new()
                } else {
                    format!(
                        " {:>11}  {}",
                        opt(p.source_end_last_seen),
                        match (p.records_possibly_lost, p.seconds_possibly_lost) {
                            (Some(n), Some(s)) => format!("{n} records, {s:.1} s"),
                            _ => "unknown".to_string(),
                        }
                    )
                };
                writeln!(
                    f,
                    "{:<32} {:>12} {:<32} {:>12}{lost}",
                    p.source,
                    p.source_end,
                    p.target,
                    opt(p.target_offset)
                )?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for FailoverReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "failover of flow {}{}: {}",
            self.flow,
            if self.dry_run { " (dry run)" } else { "" },
            self.topics.join(", ")
        )?;
        for s in &self.steps {
            writeln!(
                f,
                "  {:<9} {:<8} {:>7} ms  {}",
                s.step, s.status, s.duration_ms, s.detail
            )?;
        }
        self.write_partitions(f)?;
        for g in &self.groups {
            writeln!(
                f,
                "group {} ({})",
                g.group,
                if g.committed {
                    "committed on the target"
                } else {
                    "not committed"
                }
            )?;
            for r in &g.partitions {
                writeln!(
                    f,
                    "  {:<30} {:>10} -> {:<30} {:>10}{}",
                    r.source,
                    r.committed,
                    r.target,
                    r.target_offset.map_or("-".into(), |o| o.to_string()),
                    match (r.exact, r.via) {
                        (true, "mapping back") => " (mapping back)".to_string(),
                        (true, _) => String::new(),
                        (false, "last checkpoint") => " (last checkpoint)".to_string(),
                        (false, via) => format!(" (approximate, {via})"),
                    }
                )?;
            }
        }
        for n in &self.next {
            writeln!(f, "next: {n}")?;
        }
        match &self.refused {
            None if self.dry_run => writeln!(f, "DRY RUN: nothing written"),
            None if self.planned => {
                writeln!(f, "OK: failed over; strait no longer copies these topics")
            }
            None => writeln!(
                f,
                "OK: failed over (unplanned); strait no longer copies these topics; recovery point per partition above"
            ),
            Some(why) => writeln!(f, "REFUSED: {why}"),
        }
    }
}
