//! Exactly-once forwarding, control's half (issue 26; the design is in docs/ARCHITECTURE.md,
//! "Transactional forwarding"). Per source partition of a flow into a target with
//! `exactly.once.source.support=enabled`: its transactional producer, taken over with
//! InitProducerId (which fences any earlier holder) before its stored progress is read, and the
//! commit cycle: seal the partition in its shard, write its progress inside the transaction,
//! commit, open the next transaction, unseal.
//!
//! The phases are pure ([`ExactlyOnce::due_seals`], [`ExactlyOnce::on_sealed`], ...); the calls
//! to the target are in the async methods, which the control loop runs with its deadlines. A
//! call that fails leaves the partition in a phase the next turn takes up again, or aborts its
//! transaction and restarts it from the progress its last commit stored: what read_committed
//! consumers of the target see never goes past that progress.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strait_dataplane::shard::partition::ProducerIdentity;
use strait_dataplane::shard::{PartitionKey, Transactional};

use crate::cluster::txn::{TxnEnd, TxnProducer, TxnState};
use kafka_protocol::ResponseError;

use crate::cluster::{Cluster, ClusterError, TopicPartition};
use crate::config::FlowConfig;
use crate::duties::offsets::OffsetsRuntime;
use crate::model::counters::TxnCounters;
use crate::store::progress::{Entry, ProgressStore};

/// The transactional id of one source partition of a flow: the same on every member and after
/// every restart, so that whoever starts the partition fences whoever held it before. A colon
/// cannot appear in a topic name, so the id is unambiguous.
pub fn transactional_id(source: &str, target: &str, tp: &TopicPartition) -> String {
    format!(
        "{}{}:{}",
        transactional_id_prefix(source, target),
        tp.topic,
        tp.partition
    )
}

/// What every transactional id of a flow starts with (what its ACL names, pattern PREFIXED).
pub fn transactional_id_prefix(source: &str, target: &str) -> String {
    format!("strait-eos:{source}->{target}:")
}

/// The transactional id `strait check --connect` registers to prove the WRITE permission on
/// the ids of a flow (`prefix`: [`transactional_id_prefix`]): under the prefix, and no
/// partition's (it has no `:<partition>`).
pub fn preflight_transactional_id(prefix: &str) -> String {
    format!("{prefix}strait-check")
}

/// Where one partition's commit cycle stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// Forwarding into the open transaction since `since`.
    Open { since: Instant },
    /// Seal sent at `since`; waiting for the shard's Sealed.
    Sealing { since: Instant },
    /// Everything sent is acknowledged (sealed at `since`): commit.
    Sealed { since: Instant },
    /// Committed, no transaction open, the shard still sealed: a partition with nothing to
    /// copy writes no transaction markers, and has no open transaction for the coordinator to
    /// time out.
    Idle,
    /// It has something to copy again: open its next transaction (AddPartitionsToTxn), then
    /// unseal.
    Opening,
    /// The commit failed and the transaction was aborted: the partition is being revoked in
    /// its shard, to be taken over again (a new epoch) from the committed progress.
    Restarting,
    /// The partition stopped in its shard: abort its transaction, then nothing more.
    Aborting,
    /// Refused as fenced while its transaction was open longer than the transaction timeout:
    /// the coordinator may have aborted it (and bumped the epoch, as a fencing does). The next
    /// round asks the coordinator which it was ([`timed_out`]): timed out, the partition is
    /// taken over again; fenced, it stops with `error`.
    Suspect { error: String },
    /// Stopped (failed or fenced): nothing more is done for it.
    Stopped,
}

#[derive(Debug)]
struct TxnPartition {
    key: PartitionKey,
    remote: TopicPartition,
    producer: TxnProducer,
    /// The producer's next sequence on the progress partition.
    progress_sequence: i32,
    /// The progress the last commit stored (`None`: none yet, the start's decision stands).
    committed: Option<Entry>,
    /// When its open transaction's first AddPartitionsToTxn was sent (`None`: none open).
    /// The coordinator's clock for its timeout starts later, so a transaction open for less
    /// than the timeout by this clock cannot have timed out.
    opened: Option<Instant>,
    phase: Phase,
}

impl TxnPartition {
    /// Whether the coordinator may have aborted its open transaction for its age.
    fn may_have_timed_out(&self, timeout: Duration, now: Instant) -> bool {
        self.opened
            .is_some_and(|t| now.saturating_duration_since(t) >= timeout)
    }
}

/// What the control loop must tell a partition's shard after a commit round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterCommit {
    /// Committed and the next transaction is open: unseal, writing with `producer` (a new
    /// epoch after each commit where the coordinator speaks KIP-890's second part).
    Unseal {
        key: PartitionKey,
        producer: ProducerIdentity,
    },
    /// The commit failed and the transaction was aborted: revoke the partition in its shard;
    /// once it is revoked it is taken over again ([`ExactlyOnce::release`] says so) and starts
    /// from the committed progress.
    Restart(PartitionKey),
    /// Fenced: stop the partition, with this error.
    Fenced { key: PartitionKey, error: String },
}

/// One flow's exactly-once state.
#[derive(Debug)]
pub struct ExactlyOnce {
    source: String,
    target: String,
    progress: TopicPartition,
    interval: Duration,
    /// The transaction timeout the producers ask for (`transaction.timeout.ms`).
    timeout_ms: i32,
    parts: BTreeMap<TopicPartition, TxnPartition>,
    counters: TxnCounters,
}

impl ExactlyOnce {
    /// `progress_topic` is the flow's progress topic on the target; a transaction commits
    /// every `interval`, and the coordinator aborts one left open for `timeout_ms`.
    pub fn new(
        source: &str,
        target: &str,
        progress_topic: &str,
        interval: Duration,
        timeout_ms: i32,
    ) -> Self {
        ExactlyOnce {
            source: source.to_string(),
            target: target.to_string(),
            progress: TopicPartition::new(progress_topic, 0),
            interval,
            timeout_ms,
            parts: BTreeMap::new(),
            counters: TxnCounters::default(),
        }
    }

    /// The exactly-once state of a flow whose target enables it (`None`: at-least-once), its
    /// commit interval and transaction timeout from its configuration.
    pub fn for_flow(config: &FlowConfig, progress_topic: &str) -> Option<Self> {
        config.exactly_once.value.then(|| {
            ExactlyOnce::new(
                &config.source,
                &config.target,
                progress_topic,
                Duration::from_millis(config.transaction_boundary_interval_ms.value),
                i32::try_from(config.clients.target_producer.transaction_timeout_ms.value)
                    .unwrap_or(i32::MAX),
            )
        })
    }

    /// What it did, for the API and `/metrics`.
    pub fn counters(&self) -> TxnCounters {
        TxnCounters {
            partitions: self.parts.len(),
            ..self.counters.clone()
        }
    }

    /// Takes over `starts` (source partition key, remote partition) before they start: fences
    /// every earlier holder (InitProducerId), reads their committed progress again (the read
    /// waits for transactions open when it began), and opens a transaction holding the remote
    /// partition and the progress partition. Returns, per partition, its producer for the
    /// shard's assignment and the committed progress to start from, or why it cannot start.
    pub async fn take_over(
        &mut self,
        target: &Cluster,
        progress: &mut ProgressStore,
        starts: &[(PartitionKey, TopicPartition)],
        now: Instant,
    ) -> Vec<(PartitionKey, Result<TakenOver, ClusterError>)> {
        let mut fenced = Vec::new();
        let mut out = Vec::new();
        for (key, remote) in starts {
            let tp = TopicPartition::new(&*key.topic, key.partition);
            let id = transactional_id(&self.source, &self.target, &tp);
            match target.init_txn_producer(&id, self.timeout_ms).await {
                Ok(producer) => fenced.push((key.clone(), tp, remote.clone(), producer)),
                Err(e) => out.push((key.clone(), Err(e))),
            }
        }
        if fenced.is_empty() {
            return out;
        }
        let tps: std::collections::BTreeSet<TopicPartition> =
            fenced.iter().map(|(_, tp, _, _)| tp.clone()).collect();
        let restored = match progress.reload(target, &tps).await {
            Ok(m) => m,
            Err(e) => {
                out.extend(fenced.into_iter().map(|(k, ..)| (k, Err(e.clone()))));
                return out;
            }
        };
        for (key, tp, remote, producer) in fenced {
            let parts = [remote.clone(), self.progress.clone()];
            if let Err(e) = target.add_partitions_to_txn(&producer, &parts).await {
                out.push((key, Err(e)));
                continue;
            }
            progress.set_transactional(&tp, true);
            let committed = progress.get(&tp);
            let transactional = Transactional {
                transactional_id: Arc::from(producer.transactional_id.as_str()),
                producer: ProducerIdentity {
                    id: producer.producer_id,
                    epoch: producer.producer_epoch,
                },
            };
            tracing::info!(partition = %tp, transactional_id = %producer.transactional_id, epoch = producer.producer_epoch, committed = ?committed.map(|e| e.next_offset), "exactly-once: partition taken over");
            self.parts.insert(
                tp.clone(),
                TxnPartition {
                    key: key.clone(),
                    remote,
                    producer,
                    progress_sequence: 0,
                    committed,
                    opened: Some(now),
                    phase: Phase::Open { since: now },
                },
            );
            out.push((
                key,
                Ok(TakenOver {
                    transactional,
                    committed,
                    mapping: restored.get(&tp).cloned(),
                }),
            ));
        }
        out
    }

    /// The partitions whose transaction is due to commit at `now` and that `running` says run
    /// in a shard: the control loop seals them there.
    pub fn due_seals(
        &mut self,
        now: Instant,
        running: impl Fn(&PartitionKey) -> bool,
    ) -> Vec<PartitionKey> {
        let mut out = Vec::new();
        for p in self.parts.values_mut() {
            if let Phase::Open { since } = p.phase
                && now.saturating_duration_since(since) >= self.interval
                && running(&p.key)
            {
                p.phase = Phase::Sealing { since: now };
                out.push(p.key.clone());
            }
        }
        out
    }

    /// Idle partitions that `has_work` (records to copy) get their next transaction opened
    /// by the next [`ExactlyOnce::commit_round`].
    pub fn due_opens(&mut self, has_work: impl Fn(&PartitionKey) -> bool) {
        for p in self.parts.values_mut() {
            if p.phase == Phase::Idle && has_work(&p.key) {
                p.phase = Phase::Opening;
            }
        }
    }

    /// The shard reports `tp` sealed: everything it sent is acknowledged.
    pub fn on_sealed(&mut self, tp: &TopicPartition) {
        if let Some(p) = self.parts.get_mut(tp)
            && let Phase::Sealing { since } = p.phase
        {
            p.phase = Phase::Sealed { since };
        }
    }

    /// A stop: every open partition that `running` says runs in a shard is sealed now,
    /// whatever its interval (its commit is the stop's last).
    pub fn seal_all(
        &mut self,
        now: Instant,
        running: impl Fn(&PartitionKey) -> bool,
    ) -> Vec<PartitionKey> {
        let interval = std::mem::replace(&mut self.interval, Duration::ZERO);
        let out = self.due_seals(now, running);
        self.interval = interval;
        out
    }

    /// Whether a partition waits for its shard's Sealed.
    pub fn sealing(&self) -> bool {
        self.parts
            .values()
            .any(|p| matches!(p.phase, Phase::Sealing { .. }))
    }

    /// `tp` stopped in its shard with `error` (`fenced`: its producer's epoch was refused).
    /// Its transaction is aborted at the next round (unless fenced: the fencing aborted it).
    /// A refused epoch that may be the coordinator's timeout rather than another holder is
    /// held back until the next round has asked the coordinator.
    pub fn on_failed(
        &mut self,
        tp: &TopicPartition,
        fenced: bool,
        error: &str,
        now: Instant,
    ) -> OnFailed {
        let timeout = self.timeout();
        let Some(p) = self.parts.get_mut(tp) else {
            return OnFailed::Stop(None);
        };
        // Each batch in flight reports the refusal: the first decided.
        if matches!(p.phase, Phase::Suspect { .. } | Phase::Restarting) {
            return OnFailed::HeldBack;
        }
        if fenced && p.may_have_timed_out(timeout, now) {
            tracing::warn!(partition = %tp, transactional_id = %p.producer.transactional_id, "exactly-once: the epoch was refused while the transaction was open longer than its timeout; asking the coordinator whether it timed out or another holder took over ({error})");
            p.phase = Phase::Suspect {
                error: error.to_string(),
            };
            return OnFailed::HeldBack;
        }
        if fenced {
            self.counters.fenced += 1;
            p.phase = Phase::Stopped;
            return OnFailed::Stop(Some(fenced_error(&p.producer, error)));
        }
        if p.phase != Phase::Stopped {
            p.phase = Phase::Aborting;
        }
        OnFailed::Stop(None)
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.timeout_ms).unwrap_or(0))
    }

    /// Commits the sealed partitions' transactions (progress written inside, EndTxn, the next
    /// transaction opened), and aborts those of failed partitions and of failed commits. Says
    /// what to tell the shards. Each partition's state changes only once its calls are done,
    /// so a round dropped half-way is taken up again by the next.
    pub async fn commit_round(
        &mut self,
        target: &Cluster,
        progress: &mut ProgressStore,
        offsets: &mut OffsetsRuntime,
        now_ms: i64,
        now: Instant,
    ) -> Vec<AfterCommit> {
        let ready: Vec<TopicPartition> = self
            .parts
            .iter()
            .filter(|(_, p)| {
                matches!(
                    p.phase,
                    Phase::Sealed { .. } | Phase::Aborting | Phase::Opening | Phase::Suspect { .. }
                )
            })
            .map(|(tp, _)| tp.clone())
            .collect();
        let mut out = Vec::new();
        let timeout = self.timeout();
        for tp in ready {
            let Some(p) = self.parts.get_mut(&tp) else {
                continue;
            };
            if let Phase::Suspect { error } = &p.phase {
                let error = error.clone();
                out.extend(suspect(target, &mut self.counters, &tp, p, &error).await);
                continue;
            }
            if p.phase == Phase::Aborting {
                if let Err(e) = target.end_txn(&p.producer, TxnEnd::Abort).await {
                    tracing::warn!(partition = %tp, error = %e, "exactly-once: cannot abort the transaction of a stopped partition; the coordinator's timeout will");
                }
                self.counters.aborted += 1;
                p.phase = Phase::Stopped;
                continue;
            }
            if p.phase == Phase::Opening {
                let progress_tp = TopicPartition::new(progress.topic(), 0);
                let opened = open_next(target, &progress_tp, p, now).await;
                out.extend(opened.map_or_else(
                    |e| failed_txn(&mut self.counters, &tp, p, &e, "opening", timeout),
                    Some,
                ));
                continue;
            }
            match commit_one(target, progress, offsets.mapping_mut(), &tp, p, now_ms).await {
                Ok(()) => {
                    offsets.on_committed(&tp);
                    // Seal to the coordinator's answer (the round's `now` is before the calls).
                    let took = match p.phase {
                        Phase::Sealed { since } => Instant::now().saturating_duration_since(since),
                        _ => Duration::ZERO,
                    };
                    self.counters
                        .committed_after(u64::try_from(took.as_millis()).unwrap_or(u64::MAX));
                    // The shard stays sealed until there is something to copy.
                    p.phase = Phase::Idle;
                    p.opened = None;
                }
                Err(e) => {
                    if !is_fenced(&e)
                        && let Err(e) = target.end_txn(&p.producer, TxnEnd::Abort).await
                    {
                        tracing::warn!(partition = %tp, error = %e, "exactly-once: abort failed; the take-over's fencing aborts it");
                    }
                    out.extend(failed_txn(
                        &mut self.counters,
                        &tp,
                        p,
                        &e,
                        "commit",
                        timeout,
                    ));
                }
            }
        }
        out
    }

    /// `tp` left its shard (revoked): its open transaction is aborted (its next holder copies
    /// again from the committed progress) and the partition forgotten. Returns true when the
    /// partition is to be taken over again at once (a failed commit restarts it). Best effort:
    /// a transaction left open is aborted by the next holder's fencing or the coordinator's
    /// timeout.
    pub async fn release(
        &mut self,
        target: &Cluster,
        progress: &mut ProgressStore,
        tp: &TopicPartition,
    ) -> bool {
        let Some(p) = self.parts.remove(tp) else {
            return false;
        };
        progress.set_transactional(tp, false);
        // Its uncommitted progress must not be flushed outside the transaction.
        progress.discard(tp);
        if matches!(
            p.phase,
            Phase::Open { .. } | Phase::Sealing { .. } | Phase::Sealed { .. } | Phase::Aborting
        ) {
            if let Err(e) = target.end_txn(&p.producer, TxnEnd::Abort).await {
                tracing::warn!(partition = %tp, error = %e, "exactly-once: cannot abort the transaction of a released partition; its next holder or the coordinator's timeout will");
            } else {
                self.counters.aborted += 1;
            }
        }
        p.phase == Phase::Restarting
    }

    /// Every partition held.
    pub fn held(&self) -> Vec<TopicPartition> {
        self.parts.keys().cloned().collect()
    }
}

/// What becomes of a partition that stopped in its shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnFailed {
    /// It stops, with this error instead of the shard's (`None`: the shard's).
    Stop(Option<String>),
    /// Not yet decided: the next exactly-once round asks the coordinator.
    HeldBack,
}

/// A partition taken over: what its shard assignment carries and where it starts.
#[derive(Debug)]
pub struct TakenOver {
    pub transactional: Transactional,
    /// The progress stored by the last committed transaction (read after fencing).
    pub committed: Option<Entry>,
    /// Its stored mapping, to translate with.
    pub mapping: Option<crate::offsets::mapping::PartitionMapping>,
}

fn is_fenced(e: &ClusterError) -> bool {
    e.is(ResponseError::ProducerFenced)
        || e.is(ResponseError::InvalidProducerEpoch)
        || e.is(ResponseError::TransactionalIdAuthorizationFailed)
}

/// A transaction call of `p` (its `what`: commit, opening) failed with `e`: fenced, it stops
/// (or, open longer than `timeout`, waits for the next round to ask the coordinator whether it
/// timed out: `None`); otherwise (its transaction aborted by the caller) it is taken over
/// again from the committed progress.
fn failed_txn(
    counters: &mut TxnCounters,
    tp: &TopicPartition,
    p: &mut TxnPartition,
    e: &ClusterError,
    what: &str,
    timeout: Duration,
) -> Option<AfterCommit> {
    if is_fenced(e) && p.may_have_timed_out(timeout, Instant::now()) {
        tracing::warn!(partition = %tp, transactional_id = %p.producer.transactional_id, "exactly-once: {what} refused while the transaction was open longer than its timeout; asking the coordinator whether it timed out or another holder took over ({e})");
        p.phase = Phase::Suspect {
            error: e.to_string(),
        };
        return None;
    }
    if is_fenced(e) {
        return Some(fenced(counters, tp, p, &e.to_string()));
    }
    tracing::warn!(partition = %tp, error = %e, "exactly-once: {what} failed; the transaction is aborted and the partition taken over again from the committed progress");
    counters.aborted += 1;
    p.phase = Phase::Restarting;
    Some(AfterCommit::Restart(p.key.clone()))
}

/// `p`'s producer is fenced (`cause`): it stops.
fn fenced(
    counters: &mut TxnCounters,
    tp: &TopicPartition,
    p: &mut TxnPartition,
    cause: &str,
) -> AfterCommit {
    counters.fenced += 1;
    p.phase = Phase::Stopped;
    let error = fenced_error(&p.producer, cause);
    tracing::error!(partition = %tp, "{error}");
    AfterCommit::Fenced {
        key: p.key.clone(),
        error,
    }
}

/// What a partition whose producer another holder fenced (`cause`) stops with.
fn fenced_error(producer: &TxnProducer, cause: &str) -> String {
    format!(
        "fenced: another holder of transactional id {} took the partition over ({cause}); this member stops it",
        producer.transactional_id
    )
}

/// Whether the coordinator's `state` for `held`'s transactional id says that the coordinator
/// itself aborted `held`'s transaction for its timeout: an abort under `held`'s producer id at
/// the epoch just above `held`'s (the timeout's abort bumps the epoch once, as a fencing does;
/// another holder's InitProducerId would have bumped it again and left the id `Empty` or in
/// its own transaction).
pub fn timed_out(held: &TxnProducer, state: &TxnState) -> bool {
    state.producer_id == held.producer_id
        && held.producer_epoch.checked_add(1) == Some(state.producer_epoch)
        && matches!(state.state.as_str(), "PrepareAbort" | "CompleteAbort")
}

/// A [`Phase::Suspect`] partition: asks the coordinator. Timed out, the partition is taken
/// over again from the committed progress (its transaction is already aborted); another
/// holder, or an answer that cannot be retried, stops it as fenced; a retriable error leaves
/// it for the next round (`None`).
async fn suspect(
    target: &Cluster,
    counters: &mut TxnCounters,
    tp: &TopicPartition,
    p: &mut TxnPartition,
    error: &str,
) -> Option<AfterCommit> {
    let id = p.producer.transactional_id.clone();
    match target.describe_txn(&id).await {
        Ok(state) if timed_out(&p.producer, &state) => {
            tracing::warn!(partition = %tp, transactional_id = %id, epoch = p.producer.producer_epoch, coordinator_epoch = state.producer_epoch, state = %state.state, "exactly-once: the coordinator aborted the transaction for its timeout (transaction.timeout.ms); the partition is taken over again from the committed progress");
            counters.aborted += 1;
            p.phase = Phase::Restarting;
            Some(AfterCommit::Restart(p.key.clone()))
        }
        Ok(state) => Some(fenced(
            counters,
            tp,
            p,
            &format!(
                "{error}; the coordinator holds epoch {} in state {}",
                state.producer_epoch, state.state
            ),
        )),
        Err(e) if e.is_retriable() => {
            tracing::warn!(partition = %tp, transactional_id = %id, error = %e, "exactly-once: cannot ask the coordinator yet whether the transaction timed out; trying again");
            None
        }
        Err(e) => Some(fenced(
            counters,
            tp,
            p,
            &format!("{error}; the coordinator cannot say whether it timed out: {e}"),
        )),
    }
}

/// Opens `p`'s next transaction (its remote partition and the progress partition
/// `progress_tp`): then its shard may unseal it.
async fn open_next(
    target: &Cluster,
    progress_tp: &TopicPartition,
    p: &mut TxnPartition,
    now: Instant,
) -> Result<AfterCommit, ClusterError> {
    let parts = [p.remote.clone(), progress_tp.clone()];
    p.opened = Some(now);
    target.add_partitions_to_txn(&p.producer, &parts).await?;
    p.phase = Phase::Open { since: now };
    Ok(AfterCommit::Unseal {
        key: p.key.clone(),
        producer: ProducerIdentity {
            id: p.producer.producer_id,
            epoch: p.producer.producer_epoch,
        },
    })
}

/// Writes the partition's progress inside its transaction and commits.
async fn commit_one(
    target: &Cluster,
    progress: &mut ProgressStore,
    mappings: &mut crate::offsets::mapping::OffsetMapping,
    tp: &TopicPartition,
    p: &mut TxnPartition,
    now_ms: i64,
) -> Result<(), ClusterError> {
    let write = match progress.get(tp) {
        Some(_) => Some(
            progress
                .write_in_txn(
                    target,
                    tp,
                    &p.producer,
                    p.progress_sequence,
                    now_ms,
                    mappings,
                )
                .await?,
        ),
        None => None,
    };
    if let Some(w) = &write {
        // Consumed whatever happens next: the broker has the batch.
        p.progress_sequence = w.next_sequence;
    }
    if let Some(next) = target.end_txn(&p.producer, TxnEnd::Commit).await? {
        // KIP-890 part 2: the next transaction's epoch; its sequences start at 0.
        p.producer = next;
        p.progress_sequence = 0;
    }
    if let Some(w) = write {
        progress.txn_committed(w, mappings);
        p.committed = progress.get(tp);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flow holding `t-0`, its transaction opened at `opened`.
    fn holding(opened: Instant) -> (ExactlyOnce, TopicPartition) {
        let mut eos = ExactlyOnce::new("A", "B", "progress", Duration::from_secs(1), 5_000);
        let tp = TopicPartition::new("t", 0);
        eos.parts.insert(
            tp.clone(),
            TxnPartition {
                key: PartitionKey::new(0, "t", 0),
                remote: TopicPartition::new("A.t", 0),
                producer: TxnProducer {
                    transactional_id: transactional_id("A", "B", &tp),
                    producer_id: 7,
                    producer_epoch: 3,
                },
                progress_sequence: 0,
                committed: None,
                opened: Some(opened),
                phase: Phase::Open { since: opened },
            },
        );
        (eos, tp)
    }

    #[test]
    fn a_refused_epoch_is_a_fencing_unless_the_transaction_outlived_its_timeout() {
        let t0 = Instant::now();
        // Open for 4.9 s of a 5 s timeout: the coordinator cannot have timed it out.
        let (mut eos, tp) = holding(t0);
        let OnFailed::Stop(Some(e)) = eos.on_failed(
            &tp,
            true,
            "epoch refused",
            t0 + Duration::from_millis(4_900),
        ) else {
            panic!("stops, fenced");
        };
        assert!(e.starts_with("fenced: another holder of transactional id strait-eos:A->B:t:0"));
        assert_eq!(eos.parts[&tp].phase, Phase::Stopped);
        assert_eq!(eos.counters().fenced, 1);
        // Open for 5 s: ask the coordinator before stopping anything.
        let (mut eos, tp) = holding(t0);
        assert_eq!(
            eos.on_failed(&tp, true, "epoch refused", t0 + Duration::from_secs(5)),
            OnFailed::HeldBack
        );
        assert!(matches!(eos.parts[&tp].phase, Phase::Suspect { .. }));
        assert_eq!(eos.counters().fenced, 0);
        // The other batches in flight report it too: held back, still suspect.
        assert_eq!(
            eos.on_failed(&tp, true, "epoch refused", t0 + Duration::from_secs(5)),
            OnFailed::HeldBack
        );
        assert!(matches!(eos.parts[&tp].phase, Phase::Suspect { .. }));
        // Not a refused epoch: abort, whatever its age.
        let (mut eos, tp) = holding(t0);
        assert_eq!(
            eos.on_failed(&tp, false, "rejected", t0 + Duration::from_secs(60)),
            OnFailed::Stop(None)
        );
        assert_eq!(eos.parts[&tp].phase, Phase::Aborting);
        // No transaction open (idle): nothing to time out.
        let (mut eos, tp) = holding(t0);
        eos.parts.get_mut(&tp).unwrap().opened = None;
        assert!(matches!(
            eos.on_failed(&tp, true, "epoch refused", t0 + Duration::from_secs(60)),
            OnFailed::Stop(Some(_))
        ));
        assert_eq!(eos.parts[&tp].phase, Phase::Stopped);
    }

    #[test]
    fn only_the_coordinators_own_abort_one_epoch_up_is_a_timeout() {
        let held = TxnProducer {
            transactional_id: "strait-eos:A->B:t:0".into(),
            producer_id: 7,
            producer_epoch: 3,
        };
        let state = |state: &str, producer_id: i64, producer_epoch: i16| TxnState {
            state: state.into(),
            producer_id,
            producer_epoch,
        };
        assert!(timed_out(&held, &state("CompleteAbort", 7, 4)));
        assert!(timed_out(&held, &state("PrepareAbort", 7, 4)));
        // Another holder's InitProducerId: a second bump, or the id reset for it.
        assert!(!timed_out(&held, &state("CompleteAbort", 7, 5)));
        assert!(!timed_out(&held, &state("Empty", 7, 4)));
        assert!(!timed_out(&held, &state("Ongoing", 7, 4)));
        // Another producer id (epochs exhausted, or the id expired and was created again).
        assert!(!timed_out(&held, &state("CompleteAbort", 8, 4)));
        // Nothing happened to it.
        assert!(!timed_out(&held, &state("Ongoing", 7, 3)));
        let last = TxnProducer {
            producer_epoch: i16::MAX,
            ..held
        };
        assert!(!timed_out(&last, &state("CompleteAbort", 7, i16::MIN)));
    }

    #[test]
    fn transactional_ids_are_stable_and_unambiguous() {
        let tp = TopicPartition::new("orders.eu", 7);
        assert_eq!(
            transactional_id("A", "B", &tp),
            "strait-eos:A->B:orders.eu:7"
        );
        assert_ne!(
            transactional_id("A", "B", &TopicPartition::new("x", 11)),
            transactional_id("A", "B", &TopicPartition::new("x1", 1))
        );
    }
}
