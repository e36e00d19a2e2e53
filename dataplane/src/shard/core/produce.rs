//! Producing: the shard's idempotent producer id per target cluster, Produce requests per
//! (target broker, flow) holding at most one batch per partition, and their outcomes handed
//! back to the partitions.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::ProduceResponse;

use super::routing::{BrokerId, ClusterId};
use super::{Action, Incident, RequestId, ShardCore};
use crate::shard::backoff::{Backoff, Report};
use crate::shard::channel::{Acks, FailureKind, FlowId, PartitionKey, StallReason};
use crate::shard::partition::{ProduceOutcome, ProducerIdentity};
use crate::wire::WireError;
use crate::wire::produce::TopicBatches;

/// A Produce request for the driver to encode at the connection's version.
#[derive(Debug, Clone)]
pub struct ProduceRequestPlan {
    /// Exactly-once: the transactional id of the one partition in the request.
    pub transactional_id: Option<Arc<str>>,
    pub acks: Acks,
    pub timeout_ms: i32,
    pub topics: Vec<TopicBatches>,
}

/// Why InitProducerId gave no producer id.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProducerIdError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("InitProducerId on cluster {cluster} (broker {broker}): {error}")]
    Refused {
        cluster: String,
        broker: String,
        error: ResponseError,
    },
}

#[derive(Debug)]
pub(super) enum ProducerIdState {
    Missing {
        not_before: Option<Instant>,
        backoff: Backoff,
    },
    Pending {
        id: RequestId,
        deadline: Instant,
        backoff: Backoff,
    },
    Ready(ProducerIdentity),
}

/// A batch in a request: which partition's window entry its outcome belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SentKey {
    topic: Arc<str>,
    partition: i32,
}

#[derive(Debug)]
struct SentBatch {
    key: PartitionKey,
    seq: i32,
}

#[derive(Debug)]
struct ProduceInFlight {
    broker: BrokerId,
    flow: FlowId,
    generation: u32,
    sent: HashMap<SentKey, SentBatch>,
    sent_at: Instant,
    deadline: Instant,
}

/// How long a produce request may go unanswered before its partitions count as stalled on an
/// unreachable target (`target_unreachable`, which also starts `delivery.timeout.ms`). The
/// request itself still waits for its answer until `request.timeout.ms`; this only makes a
/// target that accepts connections and never answers (a black hole) visible sooner.
pub(super) const UNANSWERED_STALL: std::time::Duration = std::time::Duration::from_secs(5);

/// The produce side's state.
#[derive(Debug, Default)]
pub(super) struct Produces {
    in_flight: BTreeMap<RequestId, ProduceInFlight>,
    /// Requests in flight per (target broker, flow), bounded by
    /// `max_produce_requests_per_broker`.
    pub(super) per_group: HashMap<(BrokerId, FlowId), usize>,
}

impl ShardCore {
    /// Asks every target cluster that partitions need a producer id from for one.
    pub(super) fn plan_producer_ids(&mut self, now: Instant) {
        let mut needed: Vec<ClusterId> = Vec::new();
        for o in self.parts.values() {
            if !o.p.has_producer() && !needed.contains(&o.target) {
                needed.push(o.target);
            }
        }
        for cluster in needed {
            let retry = self.routing.cluster(cluster).backoff;
            let state = self
                .producers
                .entry(cluster)
                .or_insert_with(|| ProducerIdState::Missing {
                    not_before: None,
                    backoff: Backoff::new(retry.retry_ms, retry.retry_max_ms),
                });
            match state {
                ProducerIdState::Pending { .. } => {}
                ProducerIdState::Missing {
                    not_before: Some(t),
                    ..
                } if now < *t => {
                    let t = *t;
                    self.note_release(t, now);
                }
                ProducerIdState::Ready(producer) => {
                    let producer = *producer;
                    for o in self.parts.values_mut() {
                        if o.target == cluster {
                            o.p.set_producer(producer);
                        }
                    }
                }
                ProducerIdState::Missing { backoff, .. } => {
                    let backoff = *backoff;
                    let id = self.next_request_id();
                    let deadline = now + self.meta_timeout(cluster);
                    self.producers.insert(
                        cluster,
                        ProducerIdState::Pending {
                            id,
                            deadline,
                            backoff,
                        },
                    );
                    self.actions
                        .push_back(Action::InitProducerId { id, cluster });
                }
            }
        }
    }

    /// InitProducerId finished.
    pub fn handle_producer_id(
        &mut self,
        id: RequestId,
        result: Result<ProducerIdentity, ProducerIdError>,
        now: Instant,
    ) {
        let Some((cluster, mut backoff)) = self.producers.iter().find_map(|(c, s)| match s {
            ProducerIdState::Pending {
                id: rid, backoff, ..
            } if *rid == id => Some((*c, *backoff)),
            _ => None,
        }) else {
            return; // abandoned at its deadline
        };
        self.dirty = true;
        self.report_soon = true;
        match result {
            Ok(producer) => {
                self.producers
                    .insert(cluster, ProducerIdState::Ready(producer));
                if let Some((n, ms)) = self
                    .incidents
                    .recovered(&Incident::ProducerId(cluster), now)
                {
                    let alias = self.routing.alias(cluster);
                    tracing::info!(shard = self.cfg.index, cluster = %alias, failures = n, after_ms = ms, "producer id obtained");
                }
                for o in self.parts.values_mut() {
                    if o.target == cluster {
                        o.p.set_producer(producer);
                    }
                }
            }
            Err(e) => {
                let wait = backoff.fail(&mut self.jitter);
                self.producers.insert(
                    cluster,
                    ProducerIdState::Missing {
                        not_before: Some(now + wait),
                        backoff,
                    },
                );
                self.producer_id_failed(cluster, &e, now);
            }
        }
    }

    fn producer_id_failed(&mut self, cluster: ClusterId, e: &dyn std::fmt::Display, now: Instant) {
        let alias = self.routing.alias(cluster).to_string();
        match self
            .incidents
            .failed(&Incident::ProducerId(cluster), e, now)
        {
            Report::Started => {
                tracing::warn!(shard = self.cfg.index, cluster = %alias, error = %e, "InitProducerId failed; retrying with backoff")
            }
            Report::StillFailing { attempts, for_ms } => {
                tracing::warn!(shard = self.cfg.index, cluster = %alias, attempts, for_ms, last_error = %e, "InitProducerId still failing")
            }
            Report::Quiet => {
                tracing::debug!(shard = self.cfg.index, cluster = %alias, error = %e, "InitProducerId failed")
            }
        }
        let detail = format!("no producer id from cluster {alias}: {e}");
        for o in self.parts.values_mut() {
            if o.target == cluster {
                o.p.stall_target(StallReason::ProducerIdUnavailable, &detail, now);
            }
        }
    }

    /// Abandons producer-id requests past their deadline.
    pub(super) fn expire_producer_ids(&mut self, now: Instant) {
        let expired: Vec<(ClusterId, Backoff)> = self
            .producers
            .iter()
            .filter_map(|(c, s)| match s {
                ProducerIdState::Pending {
                    deadline, backoff, ..
                } if now >= *deadline => Some((*c, *backoff)),
                _ => None,
            })
            .collect();
        for (cluster, mut backoff) in expired {
            let wait = backoff.fail(&mut self.jitter);
            self.producers.insert(
                cluster,
                ProducerIdState::Missing {
                    not_before: Some(now + wait),
                    backoff,
                },
            );
            self.stats.request_timeouts += 1;
            let ms = self.meta_timeout(cluster).as_millis();
            self.producer_id_failed(cluster, &format!("no answer within {ms} ms"), now);
            self.dirty = true;
            self.report_soon = true;
        }
    }

    /// Builds Produce requests for every (target broker, flow) with batches ready.
    pub(super) fn plan_produces(&mut self, now: Instant) {
        if self.lease_ended(now) {
            return;
        }
        // A request carries one transactional id: a transactional partition (exactly-once)
        // is a group of its own.
        type Group = (BrokerId, FlowId, Option<Arc<str>>);
        let mut groups: BTreeMap<Group, Vec<PartitionKey>> = BTreeMap::new();
        let mut retry: Option<Instant> = None;
        for (k, o) in &self.parts {
            if let Some(b) = o.target_leader
                && o.p.can_send(now)
            {
                let txn = o.p.transactional_id().cloned();
                groups.entry((b, k.flow, txn)).or_default().push(k.clone());
            } else if let Some(at) = o.p.retry_at().filter(|at| now < *at) {
                retry = Some(retry.map_or(at, |r| r.min(at)));
            }
        }
        if let Some(at) = retry {
            self.note_release(at, now);
        }
        for ((broker, flow, transactional_id), keys) in groups {
            // One batch per partition per request (a protocol rule), so keep building requests
            // while partitions have batches to send: that is what fills each partition's
            // in-flight window within one turn of the loop.
            loop {
                let in_flight = self
                    .produces
                    .per_group
                    .get(&(broker, flow))
                    .copied()
                    .unwrap_or(0);
                // Check for a free slot before any batch is taken out of its queue: a batch
                // marked sent but never written would only cost a resend round.
                if in_flight >= self.cfg.max_produce_requests_per_broker {
                    break;
                }
                let Some(generation) = self.ready_conn(broker, now) else {
                    break;
                };
                if !self.start_produce(
                    broker,
                    flow,
                    transactional_id.clone(),
                    generation,
                    &keys,
                    now,
                ) {
                    break;
                }
            }
        }
    }

    /// Builds one request from the partitions among `keys` that can send; false when none can.
    fn start_produce(
        &mut self,
        broker: BrokerId,
        flow: FlowId,
        transactional_id: Option<Arc<str>>,
        generation: u32,
        keys: &[PartitionKey],
        now: Instant,
    ) -> bool {
        let mut ready: VecDeque<&PartitionKey> = keys
            .iter()
            .filter(|k| self.parts.get(*k).is_some_and(|o| o.p.can_send(now)))
            .collect();
        if ready.is_empty() {
            return false;
        }
        let mut topics: Vec<TopicBatches> = Vec::new();
        let mut sent = HashMap::new();
        let mut bytes = 0usize;
        let (mut acks, mut timeout_ms) = (Acks::All, 30_000i32);
        while let Some(k) = ready.front().copied() {
            let o = self.parts.get_mut(k).expect("grouped keys exist");
            let max_bytes = self
                .cfg
                .max_produce_request_bytes
                .min(o.p.produce.max_request_bytes);
            if bytes > 0 && bytes + o.p.queued_bytes().min(1 << 20) > max_bytes {
                break;
            }
            ready.pop_front();
            // A merged batch is new memory while the frames of its inputs may still be held
            // by later batches: merge only within what the budget has left.
            let merge_room = self
                .cfg
                .memory_budget_bytes
                .saturating_sub(self.in_use.get() + self.fetches.reserved);
            let Some((seq, pb)) = o.p.poll_send_within(now, merge_room, &mut self.stats) else {
                continue;
            };
            tracing::trace!(shard = self.cfg.index, partition = %k, seq, "batch into request");
            acks = o.p.produce.acks;
            timeout_ms = o.p.produce.timeout_ms;
            bytes += pb.len();
            sent.insert(
                SentKey {
                    topic: o.p.target_topic.clone(),
                    partition: pb.partition,
                },
                SentBatch {
                    key: k.clone(),
                    seq,
                },
            );
            match topics.iter_mut().find(|t| *t.topic == *o.p.target_topic) {
                Some(t) => t.partitions.push(pb),
                None => topics.push(TopicBatches {
                    topic: o.p.target_topic.to_string(),
                    partitions: vec![pb],
                }),
            }
        }
        if sent.is_empty() {
            return false;
        }
        let id = self.next_request_id();
        let deadline = now + self.request_timeout(broker);
        self.stats.produce_requests += 1;
        *self.produces.per_group.entry((broker, flow)).or_default() += 1;
        self.produces.in_flight.insert(
            id,
            ProduceInFlight {
                broker,
                flow,
                generation,
                sent,
                sent_at: now,
                deadline,
            },
        );
        self.note_sent(broker);
        self.actions.push_back(Action::Produce {
            id,
            broker,
            request: ProduceRequestPlan {
                transactional_id,
                acks,
                timeout_ms,
                topics,
            },
        });
        true
    }

    /// A produce finished (or could not be sent).
    pub fn handle_produce_response(
        &mut self,
        id: RequestId,
        result: Result<ProduceResponse, WireError>,
        now: Instant,
    ) {
        let Some(req) = self.produces.in_flight.remove(&id) else {
            return; // abandoned with its connection
        };
        self.dirty = true;
        self.report_soon = true;
        self.produce_done(&req);
        self.note_answered(req.broker, req.generation);
        match result {
            Ok(resp) => {
                self.broker_answered(req.broker, now);
                self.on_produce_response(req, resp, now);
            }
            Err(e @ WireError::UnsupportedVersion { .. }) => {
                let keys: Vec<PartitionKey> = req.sent.into_values().map(|b| b.key).collect();
                self.fail_keys(&keys, FailureKind::TargetRejected, &e.to_string());
            }
            Err(e) => {
                // Every request on the connection fails with it; this one first (its batches
                // were sent first).
                let broker = req.broker;
                self.produce_lost(req, &e, now);
                self.conn_failed(broker, &e, now);
            }
        }
    }

    fn produce_done(&mut self, req: &ProduceInFlight) {
        if let Some(n) = self.produces.per_group.get_mut(&(req.broker, req.flow)) {
            *n = n.saturating_sub(1);
        }
    }

    /// Abandons the produces in flight on `broker` (its connection failed), oldest first.
    pub(super) fn abandon_produces(&mut self, broker: BrokerId, e: &WireError, now: Instant) {
        let ids: Vec<RequestId> = self
            .produces
            .in_flight
            .iter()
            .filter(|(_, r)| r.broker == broker)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(req) = self.produces.in_flight.remove(&id) {
                self.produce_done(&req);
                self.produce_lost(req, e, now);
            }
        }
    }

    /// Marks the partitions of produce requests unanswered for [`UNANSWERED_STALL`] as stalled
    /// on an unreachable target (cleared when an answer settles them).
    pub(super) fn mark_unanswered_produces(&mut self, now: Instant) {
        let mut stalled: Vec<(PartitionKey, BrokerId)> = Vec::new();
        for r in self.produces.in_flight.values() {
            if now.saturating_duration_since(r.sent_at) >= UNANSWERED_STALL {
                stalled.extend(r.sent.values().map(|b| (b.key.clone(), r.broker)));
            }
        }
        for (key, broker) in stalled {
            let detail = format!(
                "target broker {} has not answered a produce request for {} s or more",
                self.routing.addr(broker),
                UNANSWERED_STALL.as_secs()
            );
            if let Some(o) = self.parts.get_mut(&key) {
                o.p.stall_target(StallReason::TargetUnreachable, &detail, now);
                self.report_soon = true;
            }
        }
    }

    /// The broker owing the oldest produce answer past its deadline, if any.
    pub(super) fn overdue_produce(&self, now: Instant) -> Option<(BrokerId, std::time::Duration)> {
        self.produces
            .in_flight
            .values()
            .find(|r| now >= r.deadline)
            .map(|r| (r.broker, self.request_timeout(r.broker)))
    }

    fn produce_lost(&mut self, req: ProduceInFlight, e: &WireError, now: Instant) {
        let reason = e.to_string();
        let mut batches: Vec<SentBatch> = req.sent.into_values().collect();
        batches.sort_by_key(|b| b.seq);
        let outcomes = batches
            .into_iter()
            .map(|b| {
                (
                    b,
                    ProduceOutcome::Lost {
                        reason: reason.clone(),
                    },
                )
            })
            .collect();
        self.apply_outcomes(outcomes, now);
    }

    fn on_produce_response(&mut self, req: ProduceInFlight, resp: ProduceResponse, now: Instant) {
        let mut sent = req.sent;
        let mut outcomes = Vec::new();
        for t in resp.responses {
            let topic: Arc<str> = Arc::from(t.name.0.as_str());
            for pr in t.partition_responses {
                let Some(b) = sent.remove(&SentKey {
                    topic: topic.clone(),
                    partition: pr.index,
                }) else {
                    continue;
                };
                let outcome = if pr.error_code == 0 {
                    ProduceOutcome::Appended {
                        base_offset: pr.base_offset,
                    }
                } else {
                    ProduceOutcome::Error {
                        code: pr.error_code,
                        message: pr.error_message.map(|m| m.to_string()),
                    }
                };
                outcomes.push((b, outcome));
            }
        }
        // Partitions the broker did not mention were not answered: resend them.
        for (_, b) in sent {
            outcomes.push((
                b,
                ProduceOutcome::Lost {
                    reason: "missing from the produce response".to_string(),
                },
            ));
        }
        self.apply_outcomes(outcomes, now);
    }

    fn apply_outcomes(&mut self, outcomes: Vec<(SentBatch, ProduceOutcome)>, now: Instant) {
        let mut failures = Vec::new();
        for (b, outcome) in outcomes {
            tracing::trace!(shard = self.cfg.index, partition = %b.key, seq = b.seq, ?outcome, "produce outcome");
            let Some(o) = self.parts.get_mut(&b.key) else {
                continue;
            };
            match o.p.handle_produced(b.seq, outcome, now, &mut self.stats) {
                Ok(()) => {
                    if o.p.needs_target_leader {
                        o.target_leader = None;
                    }
                }
                Err(f) => failures.push((b.key, f)),
            }
        }
        for (k, f) in failures {
            self.report_failure(&k, f);
        }
    }
}
