//! Routing: which broker leads each partition, found by leader lookups on the partition's
//! cluster. Clusters and broker addresses are interned into small copyable ids once, when they
//! are first seen, so that grouping partitions by broker on every turn clones no string.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Action, RequestId, ShardCore, Side};
use crate::shard::backoff::{Backoff, Report};
use crate::shard::channel::{BackoffSettings, ClusterEndpoint, StallReason};
use crate::shard::partition::Status;
use crate::wire::WireError;

/// A cluster this shard talks to (index into the shard's cluster table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterId(pub u32);

/// A broker address this shard has seen (index into the shard's broker table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BrokerId(pub u32);

/// The answer of a leader lookup: `(topic, partition)` → its leader, `None` while the partition
/// has no leader.
pub type Leaders = HashMap<(String, i32), Option<Leader>>;

/// A partition's leader as a metadata response names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    /// `host:port`.
    pub addr: String,
    /// The leader epoch (KIP-320), -1 when the broker does not say (Metadata before v7). Sent
    /// as the fetch's `current_leader_epoch` so that a stale leader answers FENCED_LEADER_EPOCH
    /// instead of serving a log that a newer leader may already have truncated.
    pub epoch: i32,
}

/// One cluster: how to reach it, how to back off on it, and its leader lookups.
#[derive(Debug)]
pub struct Cluster {
    pub endpoint: Arc<ClusterEndpoint>,
    pub backoff: BackoffSettings,
    lookup: Lookup,
}

#[derive(Debug)]
struct Lookup {
    in_flight: Option<(RequestId, Instant)>,
    /// No lookup before this (retry backoff after a failure, and a floor between lookups).
    not_before: Option<Instant>,
    backoff: Backoff,
}

#[derive(Debug)]
pub struct Broker {
    pub addr: Arc<str>,
    pub cluster: ClusterId,
}

/// The shard's clusters and brokers. Both tables only grow: a shard sees a handful of clusters
/// and the brokers that led its partitions.
#[derive(Debug, Default)]
pub struct Routing {
    clusters: Vec<Cluster>,
    cluster_ids: HashMap<String, ClusterId>,
    brokers: Vec<Broker>,
    broker_ids: HashMap<Arc<str>, BrokerId>,
}

impl Routing {
    /// The id of `endpoint`'s cluster (by alias; the first registration's settings stay).
    pub fn cluster_id(
        &mut self,
        endpoint: &Arc<ClusterEndpoint>,
        backoff: BackoffSettings,
    ) -> ClusterId {
        if let Some(id) = self.cluster_ids.get(&endpoint.alias) {
            return *id;
        }
        let id = ClusterId(u32::try_from(self.clusters.len()).expect("fewer than 2^32 clusters"));
        self.clusters.push(Cluster {
            endpoint: endpoint.clone(),
            backoff,
            lookup: Lookup {
                in_flight: None,
                not_before: None,
                backoff: Backoff::new(backoff.retry_ms, backoff.retry_max_ms),
            },
        });
        self.cluster_ids.insert(endpoint.alias.clone(), id);
        id
    }

    pub fn cluster(&self, id: ClusterId) -> &Cluster {
        &self.clusters[id.0 as usize]
    }

    pub fn clusters(&self) -> impl Iterator<Item = (ClusterId, &Cluster)> {
        self.clusters
            .iter()
            .enumerate()
            .map(|(i, c)| (ClusterId(i as u32), c))
    }

    /// The id of the broker at `addr`, interning it (in `cluster`) when new.
    pub fn broker_id(&mut self, addr: &str, cluster: ClusterId) -> BrokerId {
        if let Some(id) = self.broker_ids.get(addr) {
            return *id;
        }
        let id = BrokerId(u32::try_from(self.brokers.len()).expect("fewer than 2^32 brokers"));
        let addr: Arc<str> = Arc::from(addr);
        self.brokers.push(Broker {
            addr: addr.clone(),
            cluster,
        });
        self.broker_ids.insert(addr, id);
        id
    }

    pub fn broker(&self, id: BrokerId) -> &Broker {
        &self.brokers[id.0 as usize]
    }

    pub fn broker_count(&self) -> usize {
        self.brokers.len()
    }

    pub fn alias(&self, id: ClusterId) -> &str {
        &self.cluster(id).endpoint.alias
    }

    pub fn addr(&self, id: BrokerId) -> &str {
        &self.broker(id).addr
    }
}

impl ShardCore {
    /// Starts a leader lookup on every cluster where a partition needs a leader, unless one is
    /// in flight or backing off.
    pub(super) fn plan_lookups(&mut self, now: Instant) {
        let mut wanted: BTreeMap<ClusterId, Vec<Arc<str>>> = BTreeMap::new();
        for o in self.parts.values() {
            if matches!(o.p.status(), Status::Failed(_)) {
                continue;
            }
            if o.p.needs_source_leader && !o.revoking {
                push_unique(wanted.entry(o.source).or_default(), &o.p.key.topic);
            }
            if o.p.needs_target_leader {
                push_unique(wanted.entry(o.target).or_default(), &o.p.target_topic);
            }
        }
        for (cluster, topics) in wanted {
            let lookup = &mut self.routing.clusters[cluster.0 as usize].lookup;
            if lookup.in_flight.is_some() {
                continue;
            }
            if let Some(t) = lookup.not_before.filter(|t| now < *t) {
                self.note_release(t, now);
                continue;
            }
            let id = self.next_request_id();
            let deadline = now + self.meta_timeout(cluster);
            let lookup = &mut self.routing.clusters[cluster.0 as usize].lookup;
            lookup.in_flight = Some((id, deadline));
            self.actions.push_back(Action::LookupLeaders {
                id,
                cluster,
                topics,
            });
        }
    }

    /// How long a lookup or producer-id request may take: a fresh connection and one request.
    pub(super) fn meta_timeout(&self, cluster: ClusterId) -> Duration {
        let c = &self.routing.cluster(cluster).endpoint.config;
        Duration::from_millis(c.connect_timeout_ms.saturating_add(c.request_timeout_ms))
    }

    /// A leader lookup finished.
    pub fn handle_leaders(
        &mut self,
        id: RequestId,
        result: Result<Leaders, WireError>,
        now: Instant,
    ) {
        let Some(cluster) = self.finish_lookup(id) else {
            return; // abandoned at its deadline
        };
        self.dirty = true;
        self.report_soon = true;
        match result {
            Ok(leaders) => self.apply_leaders(cluster, &leaders, now),
            Err(e) => self.lookup_failed(cluster, &e.to_string(), now),
        }
    }

    fn finish_lookup(&mut self, id: RequestId) -> Option<ClusterId> {
        for (i, c) in self.routing.clusters.iter_mut().enumerate() {
            if c.lookup.in_flight.is_some_and(|(rid, _)| rid == id) {
                c.lookup.in_flight = None;
                return Some(ClusterId(i as u32));
            }
        }
        None
    }

    fn apply_leaders(&mut self, cluster: ClusterId, leaders: &Leaders, now: Instant) {
        let alias = self.routing.alias(cluster).to_string();
        if let Some((n, ms)) = self
            .incidents
            .recovered(&super::Incident::Lookup(cluster), now)
        {
            tracing::info!(shard = self.cfg.index, cluster = %alias, failures = n, after_ms = ms, "leader lookups work again");
        }
        let mut unresolved = false;
        let mut found: Vec<(crate::shard::PartitionKey, Side, BrokerId, i32)> = Vec::new();
        for (k, o) in &self.parts {
            for side in [Side::Source, Side::Target] {
                let (needs, on, topic) = match side {
                    Side::Source => (o.p.needs_source_leader, o.source, &o.p.key.topic),
                    Side::Target => (o.p.needs_target_leader, o.target, &o.p.target_topic),
                };
                if !needs || on != cluster {
                    continue;
                }
                match leaders.get(&(topic.to_string(), k.partition)) {
                    Some(Some(leader)) => {
                        let broker = self.routing.broker_id(&leader.addr, cluster);
                        found.push((k.clone(), side, broker, leader.epoch));
                    }
                    _ => unresolved = true,
                }
            }
        }
        for (k, side, broker, epoch) in found {
            let Some(o) = self.parts.get_mut(&k) else {
                continue;
            };
            match side {
                Side::Source => {
                    o.source_leader = Some(broker);
                    o.p.needs_source_leader = false;
                    o.p.set_source_leader_epoch(epoch);
                }
                Side::Target => {
                    o.target_leader = Some(broker);
                    o.p.needs_target_leader = false;
                }
            }
        }
        // Partitions still without a leader (an election, a topic being created) say so.
        for o in self.parts.values_mut() {
            let detail = || format!("cluster {alias} reports no leader for the partition");
            if o.source == cluster && o.p.needs_source_leader && !o.revoking {
                o.p.stall_source(StallReason::SourceLeaderUnknown, &detail(), now);
            }
            if o.target == cluster && o.p.needs_target_leader {
                o.p.stall_target(StallReason::TargetLeaderUnknown, &detail(), now);
            }
        }
        let retry = self.routing.cluster(cluster).backoff;
        let lookup = &mut self.routing.clusters[cluster.0 as usize].lookup;
        // A floor between lookups even on success; growing while leaders stay unknown.
        let wait = if unresolved {
            lookup.backoff.fail(&mut self.jitter)
        } else {
            lookup.backoff.reset();
            Duration::from_millis(retry.retry_ms)
        };
        lookup.not_before = Some(now + wait);
    }

    fn lookup_failed(&mut self, cluster: ClusterId, error: &str, now: Instant) {
        let alias = self.routing.alias(cluster).to_string();
        let lookup = &mut self.routing.clusters[cluster.0 as usize].lookup;
        let wait = lookup.backoff.fail(&mut self.jitter);
        lookup.not_before = Some(now + wait);
        let attempts = lookup.backoff.attempts();
        match self
            .incidents
            .failed(&super::Incident::Lookup(cluster), &error, now)
        {
            Report::Started => {
                tracing::warn!(shard = self.cfg.index, cluster = %alias, error, "leader lookup failed; retrying with backoff")
            }
            Report::StillFailing { attempts, for_ms } => {
                tracing::warn!(shard = self.cfg.index, cluster = %alias, attempts, for_ms, last_error = error, "leader lookups still failing")
            }
            Report::Quiet => {
                tracing::debug!(shard = self.cfg.index, cluster = %alias, attempts, error, "leader lookup failed")
            }
        }
        let detail = format!("leader lookup on cluster {alias} failed: {error}");
        for o in self.parts.values_mut() {
            if o.source == cluster && o.p.needs_source_leader && !o.revoking {
                o.p.stall_source(StallReason::SourceUnreachable, &detail, now);
            }
            if o.target == cluster && o.p.needs_target_leader {
                o.p.stall_target(StallReason::TargetUnreachable, &detail, now);
            }
        }
    }

    /// Abandons lookups past their deadline (the answer is ignored if it comes).
    pub(super) fn expire_lookups(&mut self, now: Instant) {
        let expired: Vec<(ClusterId, RequestId)> = self
            .routing
            .clusters()
            .filter_map(|(id, c)| {
                c.lookup
                    .in_flight
                    .filter(|(_, deadline)| now >= *deadline)
                    .map(|(rid, _)| (id, rid))
            })
            .collect();
        for (cluster, rid) in expired {
            self.finish_lookup(rid);
            self.stats.request_timeouts += 1;
            let ms = self.meta_timeout(cluster).as_millis();
            self.lookup_failed(cluster, &format!("no answer within {ms} ms"), now);
            self.dirty = true;
            self.report_soon = true;
        }
    }
}

fn push_unique(topics: &mut Vec<Arc<str>>, topic: &Arc<str>) {
    if !topics.iter().any(|t| **t == **topic) {
        topics.push(topic.clone());
    }
}
