//! Continuous verification (`strait.verify.*`, off by default): while the run goes on, a
//! thread of its own compares, every `strait.verify.interval.ms`, what was copied since its
//! last round with the source, record by record, as `strait verify` does (the bookkeeping is
//! `verify::continuous`). It reads only, with clients of its own, and shares nothing with the
//! control loop but the published status (which partitions this member holds) and what it
//! found (shown in `/status`, `/flows/{flow}/partitions`, `/metrics`; a mismatch fails
//! `/health/ready`).
//!
//! Its own thread, because comparing decodes every compared record: on the control thread it
//! would hold up the duties. Memory: one partition at a time, one fetch per side
//! (`store::records::MAX_FETCH_BYTES`) in memory. Each round reads the flow's stored progress
//! (the mapping it compares by is the one a restart would use).

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::RunError;
use crate::api::{ApiState, PartitionVerification, Published, Status};
use crate::cluster::{Cluster, TopicPartition};
use crate::config::FlowConfig;
use crate::duties::offsets::cluster_for;
use crate::store::progress::{self, StoredProgress};
use crate::verify::continuous::{PartitionRef, Rounds};
use crate::verify::partition::{Mode, compacted, compaction_of, partition_input, verify_partition};

/// `strait.verify.*`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VerifySettings {
    /// `strait.verify.interval.ms`: the pause between two rounds.
    pub interval: Duration,
    /// `strait.verify.sample.rate`: 1.0 compares every record.
    pub sample_rate: f64,
    /// `strait.verify.max.records.per.round`, per partition.
    pub max_records_per_round: u64,
    /// `strait.verify.from=history`: the first round starts where the stored history does,
    /// not where the run started.
    pub from_history: bool,
    /// `strait.mapping.max.runs.per.partition`, to read the stored mappings.
    pub mapping_max_runs: usize,
}

/// What the rounds found, by partition, for the status snapshots.
type Shown = Arc<Mutex<BTreeMap<PartitionRef, PartitionVerification>>>;

/// The verifier thread, from the control loop's side.
pub(super) struct Verifier {
    shown: Shown,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How long the run waits for the verifier to stop (it only reads: a round cut short loses
/// nothing).
const STOP_WAIT: Duration = Duration::from_secs(2);

impl Verifier {
    /// Starts the thread. `started_at`: each partition's stored progress when the run started
    /// (the first round compares from there).
    pub(super) fn start(
        settings: VerifySettings,
        flows: Vec<FlowConfig>,
        started_at: BTreeMap<PartitionRef, i64>,
        published: Published,
    ) -> Result<Verifier, RunError> {
        let shown = Shown::default();
        let (stop, stop_rx) = watch::channel(false);
        let thread_shown = shown.clone();
        let started_at = if settings.from_history {
            BTreeMap::new()
        } else {
            started_at
        };
        let thread = std::thread::Builder::new()
            .name("strait-verify".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!(error = %e, "continuous verification cannot start its runtime; nothing is verified");
                        return;
                    }
                };
                let rounds = Rounds::new(settings.max_records_per_round);
                let task = Task {
                    settings,
                    flows,
                    started_at,
                    published,
                    shown: thread_shown,
                    rounds,
                };
                // Cluster clients spawn local tasks.
                tokio::task::LocalSet::new().block_on(&rt, task.run(stop_rx));
            })
            .map_err(|error| RunError::VerifierStart { error })?;
        tracing::info!(
            interval_ms = settings.interval.as_millis() as u64,
            sample_rate = settings.sample_rate,
            "continuous verification started"
        );
        Ok(Verifier {
            shown,
            stop,
            thread: Some(thread),
        })
    }

    /// The verification of every partition of `status` that a round looked at.
    pub(super) fn fill(&self, status: &mut Status) {
        let shown = match self.shown.lock() {
            Ok(g) => g,
            Err(e) => e.into_inner(),
        };
        // The thread ends only when told to: if it did, nothing is verified any more, and
        // every partition says so rather than showing the last counts as current.
        let gone = self.thread.as_ref().is_none_or(|t| t.is_finished());
        for f in &mut status.flows {
            for p in &mut f.partitions {
                let key = PartitionRef {
                    flow: f.name.clone(),
                    topic: p.topic.clone(),
                    partition: p.partition,
                };
                p.verification = shown.get(&key).cloned();
                if gone {
                    p.verification.get_or_insert_default().error = Some(
                        "continuous verification stopped unexpectedly (see the log); nothing is verified until strait restarts".into(),
                    );
                }
            }
        }
    }

    /// Stops the thread, waiting [`STOP_WAIT`] at most.
    pub(super) fn stop(mut self) {
        let _ = self.stop.send(true);
        let Some(thread) = self.thread.take() else {
            return;
        };
        let deadline = Instant::now() + STOP_WAIT;
        while !thread.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if thread.is_finished() {
            let _ = thread.join();
        } else {
            tracing::warn!("continuous verification did not stop within 2 s; leaving it");
        }
    }
}

/// One flow's clients, made once.
struct Clients {
    source: Rc<Cluster>,
    target: Rc<Cluster>,
    source_admin: Rc<Cluster>,
    target_admin: Rc<Cluster>,
}

impl Clients {
    fn of(flow: &FlowConfig) -> Result<Clients, crate::duties::offsets::OffsetsError> {
        let name = flow.name();
        let c = &flow.clients;
        Ok(Clients {
            source: cluster_for(&name, "source consumer", &c.source_consumer.client)?,
            target: cluster_for(&name, "target consumer", &c.target_consumer.client)?,
            source_admin: cluster_for(&name, "source admin", &c.source_admin.client)?,
            target_admin: cluster_for(&name, "target admin", &c.target_admin.client)?,
        })
    }
}

/// The verifier thread's state.
struct Task {
    settings: VerifySettings,
    flows: Vec<FlowConfig>,
    started_at: BTreeMap<PartitionRef, i64>,
    published: Published,
    shown: Shown,
    rounds: Rounds,
}

impl Task {
    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut clients: BTreeMap<String, Clients> = BTreeMap::new();
        for f in &self.flows {
            match Clients::of(f) {
                Ok(c) => {
                    clients.insert(f.name(), c);
                }
                Err(e) => {
                    tracing::error!(flow = %f.name(), error = %e, "continuous verification cannot connect; this flow is not verified");
                }
            }
        }
        let flows = std::mem::take(&mut self.flows);
        loop {
            tokio::select! {
                () = tokio::time::sleep(self.settings.interval) => {}
                _ = stop.changed() => return,
            }
            let held = held(&self.published.fresh(crate::api::state::READ_WAIT).await.0);
            for f in &flows {
                let (Some(c), Some(tps)) = (clients.get(&f.name()), held.get(&f.name())) else {
                    continue;
                };
                tokio::select! {
                    () = self.round(f, c, tps) => {}
                    _ = stop.changed() => return,
                }
            }
            let shown = self.rounds.shown();
            match self.shown.lock() {
                Ok(mut g) => *g = shown,
                Err(e) => *e.into_inner() = shown,
            }
        }
    }

    /// One round over the partitions `tps` of `flow` that this member holds.
    async fn round(&mut self, flow: &FlowConfig, c: &Clients, tps: &BTreeSet<TopicPartition>) {
        let name = flow.name();
        let topic = progress::topic_name(&flow.source);
        let stored = match StoredProgress::read(&c.target, &topic, &flow.source, Some(tps)).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(flow = %name, error = %e, "continuous verification cannot read the stored progress; next round tries again");
                for tp in tps {
                    self.rounds.failed(
                        &part_ref(&name, tp),
                        format!("cannot read the stored progress in {topic}: {e}"),
                        crate::time::wall_ms(),
                    );
                }
                return;
            }
        };
        let mut mappings = stored.mappings(self.settings.mapping_max_runs);
        let topics: Vec<String> = tps
            .iter()
            .map(|tp| tp.topic.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let remote: Vec<String> = topics.iter().map(|t| flow.remote_topic(t)).collect();
        let source_compacted = compacted(&c.source_admin, &topics).await;
        let target_compacted = compacted(&c.target_admin, &remote).await;
        for tp in tps {
            let Some(entry) = stored.entries.get(tp) else {
                continue; // nothing stored yet: nothing copied to compare
            };
            let target_tp = TopicPartition::new(flow.remote_topic(&tp.topic), tp.partition);
            let compaction = compaction_of(&source_compacted, &target_compacted, tp, &target_tp);
            let mapping = mappings.remove(tp);
            let mut input =
                partition_input(tp.clone(), target_tp, entry, mapping.as_ref(), compaction);
            let history_start = input.history_from();
            let key = part_ref(&name, tp);
            let range = self.rounds.next_range(
                &key,
                self.started_at.get(&key).copied(),
                history_start,
                input.copied_end,
            );
            input.compare_from = Some(range.from);
            input.compare_end = Some(range.end);
            let before = self.rounds.get(&key).map_or(0, |v| v.mismatches);
            let read = Cell::new(0);
            let result = verify_partition(&c.source, &c.target, input, self.mode(), &read).await;
            self.rounds.record(&key, &result, crate::time::wall_ms());
            let Some(v) = self.rounds.get(&key) else {
                continue;
            };
            if v.mismatches > before {
                tracing::error!(
                    flow = %name,
                    partition = %tp,
                    source_range = %format!("{}..{}", result.source_range[0], result.source_range[1]),
                    mismatches = v.mismatches - before,
                    first = %v.first_mismatch.as_deref().unwrap_or("-"),
                    "continuous verification found records missing, extra or different on the target"
                );
            }
        }
    }

    /// Every record, or whole batches at random (a new seed each round).
    fn mode(&self) -> Mode {
        if self.settings.sample_rate >= 1.0 {
            Mode::Full
        } else {
            Mode::Sample {
                rate: self.settings.sample_rate,
                seed: crate::time::wall_ms() as u64,
            }
        }
    }
}

fn part_ref(flow: &str, tp: &TopicPartition) -> PartitionRef {
    PartitionRef {
        flow: flow.to_string(),
        topic: tp.topic.clone(),
        partition: tp.partition,
    }
}

/// The partitions this member holds, by flow: every listed one but those not assigned to it.
fn held(status: &Status) -> BTreeMap<String, BTreeSet<TopicPartition>> {
    let mut out: BTreeMap<String, BTreeSet<TopicPartition>> = BTreeMap::new();
    for f in &status.flows {
        for p in f
            .partitions
            .iter()
            .filter(|p| p.api_state != ApiState::NotAssigned)
        {
            out.entry(f.name.clone())
                .or_default()
                .insert(TopicPartition::new(&p.topic, p.partition));
        }
    }
    out
}
