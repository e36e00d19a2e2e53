//! Configuration reload (`POST /config/reload`, `strait ctl reload`, SIGHUP): the file is read
//! again with `strait check`'s validation, compared with the running configuration
//! ([`crate::config::diff`]), and the difference applied without a restart.
//!
//! Two steps, so that a gate (a group of instances agreeing on the new configuration) can go
//! between them: [`validate`] (nothing changes; a bad file or a setting fixed until restart is
//! refused here, and the running configuration stays), then [`apply`], one function taking
//! the validated configuration:
//! - removed and restarted flows: their partitions are revoked, drained, their final positions
//!   and offset syncs written (a removed flow also records its clean stop);
//! - updated flows take the new plan in their duties and run one discovery pass at once (a
//!   widened filter starts its topics now); their partitions are not touched;
//! - restarted and added flows are opened with the new settings and discovered;
//! - the heartbeat duty restarts when its pairs changed.
//!
//! A flow that cannot be opened (a cluster does not answer) is left out and reported; the
//! next reload tries it again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};
use strait_dataplane::shard::{FlowId, PartitionKey, ShardCommand, ShardEvent, ShardStats};

use super::api_link::ApiLink;
use super::assign::Partitions;
use super::discovery::{Pass, assign, topic_duties};
use super::events::apply_event;
use super::group::{ConfigDigest, GroupLink};
use super::outbox::Shards;
use super::{FlowRuntime, RunOptions, now_ms};
use crate::api::{ApiCommand, CommandError, Reply};
use crate::config::Mm2Config;
use crate::config::diff::{ReloadPlan, diff};
use crate::duties::heartbeats::{self, HeartbeatPlan, Heartbeats};
use crate::model::TopicPartition;
use crate::plan::FlowPlan;
use crate::store::progress;

/// How long revoked partitions get to drain (their in-flight produce answered).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(8);
/// How long one cluster step of a reload may take (a flush, opening a flow, heartbeats).
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// The reload side of a run: the running configuration, SIGHUP, who started the run.
pub(crate) struct Reloader {
    /// What the next reload is compared with; `None` when the run has no config file.
    current: Option<Mm2Config>,
    heartbeat_plans: Vec<HeartbeatPlan>,
    sighup: Option<tokio::signal::unix::Signal>,
    instance: String,
}

/// What the control loop lends a reload.
pub(super) struct Loop<'a> {
    pub(super) flows: &'a mut Vec<FlowRuntime>,
    pub(super) shards: &'a Shards,
    pub(super) ev_rx: &'a Receiver<ShardEvent>,
    pub(super) parts: &'a mut Partitions,
    pub(super) stats: &'a mut HashMap<usize, ShardStats>,
    pub(super) opts: &'a RunOptions,
    pub(super) heartbeats: &'a mut Heartbeats,
    pub(super) api: &'a mut ApiLink,
    /// The group of instances: a reload is applied only when this member is alone in it, and
    /// the member then announces the new configuration's digest.
    pub(super) group: Option<&'a mut GroupLink>,
}

/// A new configuration that passed validation, with what applying it changes.
pub(crate) struct Validated {
    /// The new file's digest, as the group compares members ([`crate::group::digest`]).
    digest: ConfigDigest,
    config: Mm2Config,
    plan: ReloadPlan,
    flows: Vec<FlowPlan>,
    heartbeats: Vec<HeartbeatPlan>,
}

impl Reloader {
    /// Takes over SIGHUP (whose default would end the process) for reloads. Call it first
    /// thing in the run.
    pub(crate) fn new(opts: &RunOptions, instance: &str) -> Reloader {
        use tokio::signal::unix::{SignalKind, signal};
        let sighup = match signal(SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!("cannot handle SIGHUP ({e}); reload through the API only");
                None
            }
        };
        Reloader {
            current: opts.config.clone(),
            heartbeat_plans: opts.heartbeats.clone(),
            sighup,
            instance: instance.to_string(),
        }
    }

    /// Whether a SIGHUP arrived since the last call (never waits).
    fn hangup(&mut self) -> bool {
        let Some(s) = self.sighup.as_mut() else {
            return false;
        };
        let mut cx = Context::from_waker(Waker::noop());
        let mut seen = false;
        // The control loop polls every turn, so no wake-up is needed.
        while let Poll::Ready(Some(())) = s.poll_recv(&mut cx) {
            seen = true;
        }
        seen
    }
}

/// Carries out the reloads asked since the last turn: by SIGHUP, and through the API (each
/// answered).
pub(super) async fn if_requested(r: &mut Reloader, cx: &mut Loop<'_>) {
    if r.hangup() {
        // Nobody waits for an answer: the log says what happened.
        let _ = reload(r, cx, "SIGHUP").await;
    }
    for cmd in std::mem::take(&mut cx.api.reloads) {
        let ApiCommand { client, reply, .. } = cmd;
        let result = reload(r, cx, &client).await;
        let _ = reply.send(result.map(Reply::Reloaded));
        cx.api.last_publish = None;
    }
}

/// One reload asked by `who`, logged either way.
async fn reload(
    r: &mut Reloader,
    cx: &mut Loop<'_>,
    who: &str,
) -> Result<ReloadPlan, CommandError> {
    let result = match validate(r) {
        // The group's gate: several members must agree on one configuration, so a change is
        // applied only by a member alone in its group (others roll it out by restarting).
        Ok(v) => match cx.group.as_deref().map(GroupLink::agree_to_reload) {
            Some(Err(refused)) => Err(CommandError::WrongState {
                message: refused.to_string(),
            }),
            _ => {
                let digest = v.digest.clone();
                let applied = apply(r, cx, v).await;
                if applied.is_ok()
                    && let Some(g) = cx.group.as_deref_mut()
                {
                    g.reloaded(digest);
                    // Flows added or removed change the work the group shares.
                    g.note_units(cx.flows, cx.parts);
                }
                applied
            }
        },
        Err(e) => Err(e),
    };
    match &result {
        Ok(plan) => {
            tracing::info!(client = who, changes = %plan.summary(), "configuration reloaded")
        }
        Err(e) => tracing::warn!(client = who, "configuration reload refused: {e}"),
    }
    result
}

/// Reads the file again, as `strait check` does, and compares it with the running
/// configuration. Nothing changes here.
pub(crate) fn validate(r: &Reloader) -> Result<Validated, CommandError> {
    let Some(current) = &r.current else {
        return Err(CommandError::WrongState {
            message: "this run was not started from a config file; nothing to reload".into(),
        });
    };
    let path: PathBuf = current.path.clone();
    let report = crate::config::check(&path);
    let invalid = |errors: Vec<String>| CommandError::InvalidConfig {
        path: path.display().to_string(),
        errors,
    };
    let Some(config) = report.config.filter(|_| report.errors.is_empty()) else {
        return Err(invalid(
            report.errors.iter().map(|e| e.to_string()).collect(),
        ));
    };
    let plan = diff(current, &config);
    if !plan.refused.is_empty() {
        return Err(CommandError::RestartRequired {
            keys: plan.refused.iter().map(ToString::to_string).collect(),
        });
    }
    let flows = crate::plan::plans(&config).map_err(|e| invalid(vec![e.to_string()]))?;
    let (heartbeats, _) = heartbeats::plans(&config);
    let bytes = std::fs::read(&path).map_err(|e| invalid(vec![e.to_string()]))?;
    let digest =
        crate::group::digest::of_properties(&crate::config::properties::parse_bytes(&bytes));
    Ok(Validated {
        digest,
        config,
        plan,
        flows,
        heartbeats,
    })
}

fn running(flows: &[FlowRuntime], name: &str) -> Option<FlowId> {
    flows
        .iter()
        .position(|f| !f.retired && f.name() == name)
        .map(|i| i as FlowId)
}

/// Applies a validated configuration: the one step a gate may hold back.
pub(crate) async fn apply(
    r: &mut Reloader,
    cx: &mut Loop<'_>,
    v: Validated,
) -> Result<ReloadPlan, CommandError> {
    let Validated {
        digest: _,
        mut config,
        plan,
        flows,
        heartbeats,
    } = v;
    let mut plans: BTreeMap<String, FlowPlan> = flows
        .into_iter()
        .map(|p| (format!("{}->{}", p.source, p.target), p))
        .collect();
    let restarted: BTreeSet<&str> = plan.restarted.iter().map(|c| c.flow.as_str()).collect();
    for name in plan
        .removed
        .iter()
        .map(String::as_str)
        .chain(restarted.iter().copied())
    {
        if let Some(fid) = running(cx.flows, name) {
            stop_flow(cx, fid, !restarted.contains(name)).await;
        }
    }
    for c in &plan.updated {
        if let (Some(fid), Some(p)) = (running(cx.flows, &c.flow), plans.remove(&c.flow)) {
            update_flow(cx, fid, p).await;
        }
    }
    let mut failed = Vec::new();
    for name in restarted
        .iter()
        .copied()
        .chain(plan.added.iter().map(String::as_str))
    {
        let Some(p) = plans.remove(name) else {
            continue;
        };
        if let Err(e) = start_flow(r, cx, name, p).await {
            tracing::error!(
                flow = name,
                "cannot start the flow after the reload: {e}; the next reload tries again"
            );
            failed.push(format!("{name}: {e}"));
            // Not running: the next reload sees it as new.
            if let Some(f) = config.flows.iter_mut().find(|f| f.name() == name) {
                f.enabled.value = false;
            }
        }
    }
    if heartbeats != r.heartbeat_plans {
        restart_heartbeats(cx, &heartbeats).await;
        r.heartbeat_plans = heartbeats;
    }
    r.current = Some(config);
    if failed.is_empty() {
        Ok(plan)
    } else {
        Err(CommandError::Unavailable {
            message: format!(
                "reload applied except: {} (applied: {})",
                failed.join("; "),
                plan.summary()
            ),
        })
    }
}

/// Revokes every partition of a flow, waits for them to drain, and writes their final
/// positions and offset syncs. `remove` retires the flow (and records its clean stop).
async fn stop_flow(cx: &mut Loop<'_>, fid: FlowId, remove: bool) {
    let mut waiting: BTreeSet<PartitionKey> = BTreeSet::new();
    for (key, st) in cx.parts.iter_mut().filter(|(k, _)| k.flow == fid) {
        if st.assigned
            && cx
                .shards
                .send(st.shard, ShardCommand::Revoke(key.clone()))
                .is_ok()
        {
            st.assigned = false;
            waiting.insert(key.clone());
        }
    }
    drain_revoked(cx, waiting).await;
    let keys: Vec<PartitionKey> = cx.parts.keys().filter(|k| k.flow == fid).cloned().collect();
    let Loop { flows, parts, .. } = cx;
    let f = &mut flows[fid as usize];
    for key in &keys {
        let st = &parts[key];
        let tp = TopicPartition::new(&*key.topic, key.partition);
        // A position the last report did not carry yet; its target end is not known.
        if f.progress
            .get(&tp)
            .is_none_or(|e| e.next_offset != st.next_offset)
        {
            let entry = progress::Entry {
                next_offset: st.next_offset,
                topic_id: st.topic_id,
                target_offset: -1,
                leader_epoch: -1,
            };
            f.progress.update(&tp, entry);
        }
        parts.remove(key);
    }
    match tokio::time::timeout(STEP_TIMEOUT, f.offsets.finish(false, now_ms())).await {
        Ok(Ok(())) => {}
        // The flow stops here: its load's error ends nothing more than the flow.
        Ok(Err(e)) => tracing::warn!(flow = %f.name(), "{e}"),
        Err(_) => {
            tracing::warn!(flow = %f.name(), "the last offset syncs were not published within {STEP_TIMEOUT:?}")
        }
    }
    match tokio::time::timeout(STEP_TIMEOUT, f.flush_progress()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::warn!(flow = %f.name(), error = %e, "cannot write the final progress")
        }
        Err(_) => tracing::warn!(flow = %f.name(), "the final progress write timed out"),
    }
    if remove {
        cx.api.holds.retain(|k, _| k.flow != fid);
        if let Ok(Err(e)) =
            tokio::time::timeout(STEP_TIMEOUT, f.liveness.stopped(&f.target, now_ms())).await
        {
            tracing::warn!(flow = %f.name(), "cannot record the clean stop: {e}");
        }
        f.retired = true;
    }
    tracing::info!(flow = %f.name(), partitions = keys.len(), removed = remove, "flow stopped for the reload, progress flushed");
}

/// Applies shard events until every partition of `waiting` reported its final position (or
/// [`DRAIN_TIMEOUT`] passed).
async fn drain_revoked(cx: &mut Loop<'_>, mut waiting: BTreeSet<PartitionKey>) {
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while !waiting.is_empty() && Instant::now() < deadline {
        // The revocations that did not fit in a shard's channel at once.
        if let Err(e) = cx.shards.flush(cx.parts.len()) {
            tracing::warn!("revoked partitions may not drain: {e}");
            break;
        }
        match cx.ev_rx.try_recv() {
            Ok(ev) => {
                if let ShardEvent::Revoked { key, .. } = &ev {
                    waiting.remove(key);
                }
                apply_event(ev, cx.flows, cx.parts, cx.stats, cx.shards, cx.opts).await;
            }
            Err(TryRecvError::Empty) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(TryRecvError::Disconnected) => return,
        }
    }
    if !waiting.is_empty() {
        tracing::warn!(
            partitions = waiting.len(),
            "revoked partitions did not drain within {DRAIN_TIMEOUT:?}; their last reported positions are stored"
        );
    }
}

/// A flow takes a new plan in its duties, then discovers at once; its partitions go on.
async fn update_flow(cx: &mut Loop<'_>, fid: FlowId, plan: FlowPlan) {
    let now = Instant::now();
    let f = &mut cx.flows[fid as usize];
    f.topics.reconfigure(&plan, now);
    f.offsets.reconfigure(&plan.config, now);
    f.plan = plan;
    discover(cx, fid).await;
}

/// One discovery pass of a flow and the assignment of what it found; errors are logged and
/// the next refresh tries again.
async fn discover(cx: &mut Loop<'_>, fid: FlowId) {
    let f = &mut cx.flows[fid as usize];
    let name = f.name();
    let changes = match tokio::time::timeout(
        STEP_TIMEOUT,
        topic_duties(f, fid, cx.opts, Pass::Discover),
    )
    .await
    {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            tracing::warn!(flow = %name, "discovery after the reload failed ({e}); the next refresh tries again");
            return;
        }
        Err(_) => {
            tracing::warn!(flow = %name, "discovery after the reload timed out; the next refresh tries again");
            return;
        }
    };
    if let Err(e) = assign(
        changes,
        cx.flows,
        cx.shards,
        cx.parts,
        cx.opts,
        cx.group.as_deref_mut(),
    )
    .await
    {
        tracing::error!(flow = %name, "cannot assign the flow's partitions: {e}");
    }
}

/// Why a flow a reload restarted or added could not start (it is left out until the next
/// reload).
#[derive(Debug, thiserror::Error)]
enum FlowStartError {
    #[error("opening it took longer than {0:?}")]
    Timeout(Duration),
    #[error(transparent)]
    Open(#[from] super::RunError),
}

/// Opens a restarted or added flow with its new plan, discovers it, and pauses again what an
/// operator held.
async fn start_flow(
    r: &Reloader,
    cx: &mut Loop<'_>,
    name: &str,
    plan: FlowPlan,
) -> Result<(), FlowStartError> {
    // The load of its offset syncs and checkpoints is waited for: its error refuses the flow
    // with the reload, not the whole run later.
    let opened = tokio::time::timeout(STEP_TIMEOUT, async {
        let mut f = super::start::open_flow(plan, &r.instance, Instant::now()).await?;
        f.offsets.wait_loaded().await?;
        Ok::<_, super::RunError>(f)
    })
    .await
    .map_err(|_| FlowStartError::Timeout(STEP_TIMEOUT))??;
    // A restarted flow keeps its id (its partitions' keys); an added one takes the next.
    let fid = match cx.flows.iter().position(|f| !f.retired && f.name() == name) {
        Some(i) => {
            cx.flows[i] = opened;
            i as FlowId
        }
        None => {
            cx.flows.push(opened);
            (cx.flows.len() - 1) as FlowId
        }
    };
    discover(cx, fid).await;
    for key in cx.api.holds.keys().filter(|k| k.flow == fid) {
        if let Some(st) = cx.parts.get_mut(key).filter(|st| st.assigned) {
            if let Err(e) = cx.shards.send(st.shard, ShardCommand::Pause(key.clone())) {
                tracing::warn!(partition = %key, "cannot hold the partition again: {e}");
            }
            st.paused = true;
        }
    }
    Ok(())
}

/// Starts the heartbeat duty again with the new pairs.
async fn restart_heartbeats(cx: &mut Loop<'_>, plans: &[HeartbeatPlan]) {
    match Heartbeats::new(plans, Instant::now()) {
        Ok(mut h) => {
            if tokio::time::timeout(STEP_TIMEOUT, h.start()).await.is_err() {
                tracing::warn!("the heartbeat duty's start timed out; it retries at its interval");
            }
            *cx.heartbeats = h;
        }
        Err(e) => tracing::error!("cannot restart the heartbeats with the new settings: {e}"),
    }
}
