//! Connections: one per broker the shard fetches from or produces to. Each has a state, a
//! generation (so that a late answer on a connection already given up is recognised), a count
//! of requests in flight against its bound, a reconnect backoff, and deadlines: an attempt that
//! does not complete within `connect_timeout_ms`, or a request unanswered within
//! `request.timeout.ms`, drops the connection, fails what was in flight on it, and backs off.

use std::time::{Duration, Instant};

use super::routing::BrokerId;
use super::{Action, Incident, ShardCore};
use crate::shard::backoff::{Backoff, Report};
use crate::shard::channel::StallReason;
use crate::wire::WireError;

/// What a driver reports about a connection that came up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnInfo {
    /// Requests it accepts in flight (`ConnConfig::max_in_flight_requests`).
    pub max_in_flight: usize,
    /// When to stop sending on it and open another (a SASL session the broker ends, KIP-368).
    pub replace_at: Option<Instant>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnState {
    Idle,
    Connecting { deadline: Instant },
    Ready(ConnInfo),
    Down { until: Instant },
}

/// One broker's connection as the core sees it.
#[derive(Debug)]
pub(super) struct Conn {
    state: ConnState,
    generation: u32,
    /// Requests sent on the current generation and not yet answered or abandoned.
    pub(super) in_flight: usize,
    backoff: Backoff,
}

impl Conn {
    fn new(backoff: Backoff) -> Self {
        Conn {
            state: ConnState::Idle,
            generation: 0,
            in_flight: 0,
            backoff,
        }
    }
}

impl ShardCore {
    fn conn_mut(&mut self, broker: BrokerId) -> &mut Conn {
        let i = broker.0 as usize;
        while self.conns.len() <= i {
            let b = BrokerId(self.conns.len() as u32);
            let settings = self.routing.cluster(self.routing.broker(b).cluster).backoff;
            self.conns.push(Conn::new(Backoff::new(
                settings.reconnect_ms,
                settings.reconnect_max_ms,
            )));
        }
        &mut self.conns[i]
    }

    /// The generation of `broker`'s connection if a request may be sent on it now: it is up,
    /// not being replaced, and has a free in-flight slot.
    pub(super) fn ready_conn(&self, broker: BrokerId, now: Instant) -> Option<u32> {
        let c = self.conns.get(broker.0 as usize)?;
        match c.state {
            ConnState::Ready(info)
                if info.replace_at.is_none_or(|at| now < at)
                    && c.in_flight < info.max_in_flight =>
            {
                Some(c.generation)
            }
            _ => None,
        }
    }

    /// Opens connections to the leaders partitions need, and replaces connections whose SASL
    /// session ends soon once their requests in flight have finished (nothing new is sent on
    /// them meanwhile): a produce on the new connection must not overtake one on the old.
    pub(super) fn plan_connections(&mut self, now: Instant) {
        // Brokers are few and partitions many: a linear check beats collecting one entry
        // per partition and sorting them at every planning.
        let mut needed: Vec<BrokerId> = Vec::new();
        let mut need = |b: BrokerId| {
            if !needed.contains(&b) {
                needed.push(b);
            }
        };
        for o in self.parts.values() {
            if let Some(b) = o.source_leader
                && o.p.wants_fetch(usize::MAX)
            {
                need(b);
            }
            if let Some(b) = o.target_leader
                && !o.p.needs_target_leader
            {
                need(b);
            }
        }
        needed.sort_unstable();
        for broker in needed {
            let timeout = self.connect_timeout(broker);
            let c = self.conn_mut(broker);
            let (start, release) = match c.state {
                ConnState::Idle => (true, None),
                ConnState::Ready(info) => match info.replace_at {
                    Some(at) if now >= at => (c.in_flight == 0, None),
                    at => (false, at),
                },
                ConnState::Connecting { .. } => (false, None),
                ConnState::Down { until } => (now >= until, Some(until)),
            };
            if !start {
                if let Some(at) = release {
                    self.note_release(at, now);
                }
                continue;
            }
            if matches!(c.state, ConnState::Ready(_)) {
                let generation = c.generation;
                self.actions
                    .push_back(Action::Disconnect { broker, generation });
            }
            let c = self.conn_mut(broker);
            c.generation = c.generation.wrapping_add(1);
            c.in_flight = 0;
            c.state = ConnState::Connecting {
                deadline: now + timeout,
            };
            let generation = c.generation;
            self.actions.push_back(Action::Connect {
                broker,
                generation,
                cluster: self.routing.broker(broker).cluster,
                addr: self.routing.broker(broker).addr.clone(),
            });
        }
    }

    fn connect_timeout(&self, broker: BrokerId) -> Duration {
        let cluster = self.routing.broker(broker).cluster;
        // The driver bounds the attempt by connect_timeout_ms too; the slack lets its own error
        // (which says which step hung) arrive first.
        Duration::from_millis(
            self.routing
                .cluster(cluster)
                .endpoint
                .config
                .connect_timeout_ms
                .saturating_add(1_000),
        )
    }

    /// A connection attempt finished. Returns whether the connection is the live one for
    /// `broker` (the driver keeps it); false for an attempt given up on already, which the
    /// driver drops.
    pub fn handle_connected(
        &mut self,
        broker: BrokerId,
        generation: u32,
        result: Result<ConnInfo, WireError>,
        now: Instant,
    ) -> bool {
        let c = self.conn_mut(broker);
        if c.generation != generation || !matches!(c.state, ConnState::Connecting { .. }) {
            return false;
        }
        match result {
            Ok(info) => {
                self.dirty = true;
                self.report_soon = true;
                let c = &mut self.conns[broker.0 as usize];
                c.state = ConnState::Ready(ConnInfo {
                    max_in_flight: info.max_in_flight.max(1),
                    ..info
                });
                c.in_flight = 0;
                true
            }
            Err(e) => {
                self.conn_failed(broker, &e, now);
                false
            }
        }
    }

    pub(super) fn note_sent(&mut self, broker: BrokerId) {
        self.conn_mut(broker).in_flight += 1;
    }

    pub(super) fn note_answered(&mut self, broker: BrokerId, generation: u32) {
        let c = self.conn_mut(broker);
        if c.generation == generation {
            c.in_flight = c.in_flight.saturating_sub(1);
        }
    }

    /// A request on `broker` succeeded: the broker incident, if any, is over.
    pub(super) fn broker_answered(&mut self, broker: BrokerId, now: Instant) {
        self.conn_mut(broker).backoff.reset();
        if let Some((n, ms)) = self.incidents.recovered(&Incident::Broker(broker), now) {
            let addr = self.routing.addr(broker);
            tracing::info!(shard = self.cfg.index, broker = %addr, failures = n, after_ms = ms, "broker answers again");
        }
    }

    /// The connection to `broker` failed (attempt refused, request failed or timed out): it
    /// goes down for the reconnect backoff, and the partitions it served look their leader up
    /// again (it may have moved off a dead broker) and report why they stall.
    pub(super) fn conn_failed(&mut self, broker: BrokerId, error: &WireError, now: Instant) {
        let was_up = {
            let c = self.conn_mut(broker);
            matches!(c.state, ConnState::Ready(_))
        };
        self.conn_mut(broker);
        let c = &mut self.conns[broker.0 as usize];
        let wait = c.backoff.fail(&mut self.jitter);
        let generation = c.generation;
        c.state = ConnState::Down { until: now + wait };
        c.in_flight = 0;
        if was_up {
            self.actions
                .push_back(Action::Disconnect { broker, generation });
        }
        self.stats.reconnects += 1;
        self.log_broker_failure(broker, error, now);
        self.abandon_fetches(broker, error, now);
        self.abandon_produces(broker, error, now);
        let addr = self.routing.addr(broker).to_string();
        let detail = format!("broker {addr}: {error}");
        for o in self.parts.values_mut() {
            if o.source_leader == Some(broker) {
                o.source_leader = None;
                o.p.needs_source_leader = true;
                o.p.stall_source(StallReason::SourceUnreachable, &detail, now);
            }
            if o.target_leader == Some(broker) {
                o.target_leader = None;
                o.p.needs_target_leader = true;
                o.p.stall_target(StallReason::TargetUnreachable, &detail, now);
            }
        }
        self.dirty = true;
        self.report_soon = true;
    }

    fn log_broker_failure(&mut self, broker: BrokerId, error: &WireError, now: Instant) {
        let addr = self.routing.addr(broker).to_string();
        let attempts = self.conn_mut(broker).backoff.attempts();
        match self.incidents.failed(&Incident::Broker(broker), error, now) {
            Report::Started => {
                tracing::warn!(shard = self.cfg.index, broker = %addr, error = %error, "broker unavailable; reconnecting with backoff")
            }
            Report::StillFailing { attempts, for_ms } => {
                tracing::warn!(shard = self.cfg.index, broker = %addr, attempts, for_ms, last_error = %error, "broker still unavailable")
            }
            Report::Quiet => {
                tracing::debug!(shard = self.cfg.index, broker = %addr, attempts, error = %error, "broker unavailable")
            }
        }
    }

    /// Gives up on connection attempts past their deadline.
    pub(super) fn expire_connects(&mut self, now: Instant) {
        let expired: Vec<BrokerId> = self
            .conns
            .iter()
            .enumerate()
            .filter(
                |(_, c)| matches!(c.state, ConnState::Connecting { deadline } if now >= deadline),
            )
            .map(|(i, _)| BrokerId(i as u32))
            .collect();
        for broker in expired {
            let addr = self.routing.addr(broker).to_string();
            let ms = self.connect_timeout(broker).as_millis() as u64;
            let err = WireError::Timeout {
                broker: addr,
                api: "connect",
                after_ms: ms,
            };
            self.stats.request_timeouts += 1;
            self.conn_failed(broker, &err, now);
        }
    }
}
