//! The shard thread: the thin IO loop around [`ShardCore`], the same on both IO backends.
//!
//! Each turn it performs the core's actions (connections, lookups, producer ids, fetch and
//! produce requests, each enqueued on its connection before the next is taken, so wire order
//! is build order), hands the core's events to control, then waits for the first of: a
//! finished request (fed back to the core), or the tick that reads commands and runs the
//! core's timers.

use std::collections::HashMap;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use futures_util::StreamExt;
use futures_util::future::LocalBoxFuture;
use futures_util::stream::FuturesUnordered;
use kafka_protocol::messages::{ApiKey, FetchRequest, ProduceRequest, ProduceResponse};

use super::channel::{ShardCommand, ShardConfig, ShardEvent};
use super::core::{
    Action, BrokerId, ClusterId, ConnInfo, FetchedFrame, Leaders, ProduceRequestPlan,
    ProducerIdError, RequestId, ShardCore,
};
use super::meta;
use super::partition::ProducerIdentity;
use super::timing::WallClock;
use crate::io::{BrokerConn, ConnSetup, IoBackend};
use crate::wire::WireError;
use crate::wire::produce::encode_produce_body;

/// A running shard: its command channel and thread.
#[derive(Debug)]
pub struct ShardHandle {
    pub index: usize,
    pub commands: Sender<ShardCommand>,
    pub thread: JoinHandle<()>,
}

/// Starts a shard thread. `command_capacity` bounds the command channel.
pub fn spawn_shard(
    cfg: ShardConfig,
    events: Sender<ShardEvent>,
    command_capacity: usize,
) -> std::io::Result<ShardHandle> {
    let (tx, rx) = crossbeam_channel::bounded(command_capacity.max(1));
    let index = cfg.index;
    let thread = std::thread::Builder::new()
        .name(format!("strait-shard-{index}"))
        .spawn(move || {
            if let Some(core) = cfg.core
                && !crate::io::runtime::pin_current_thread(core)
            {
                tracing::warn!(shard = index, core = core.id, "could not pin shard thread");
            }
            let backend = cfg.backend;
            let events2 = events.clone();
            let result = crate::io::block_on(backend, Driver::new(cfg, rx, events).run());
            if let Err(e) = result {
                let _ = events2.send(ShardEvent::Stopped {
                    shard: index,
                    error: Some(format!("cannot start the {} runtime: {e}", backend.name())),
                });
            }
        })?;
    Ok(ShardHandle {
        index,
        commands: tx,
        thread,
    })
}

/// A finished piece of IO, for the core.
enum Done {
    Connected {
        broker: BrokerId,
        generation: u32,
        result: Result<BrokerConn, WireError>,
    },
    Fetch {
        id: RequestId,
        result: Result<FetchedFrame, WireError>,
    },
    Produce {
        id: RequestId,
        result: Result<ProduceResponse, WireError>,
    },
    Leaders {
        id: RequestId,
        result: Result<Leaders, WireError>,
    },
    ProducerId {
        id: RequestId,
        result: Result<ProducerIdentity, ProducerIdError>,
    },
}

type Futs = FuturesUnordered<LocalBoxFuture<'static, Done>>;

struct Driver {
    core: ShardCore,
    backend: IoBackend,
    tick_ms: u64,
    commands: Receiver<ShardCommand>,
    events: Sender<ShardEvent>,
    /// The live connection of each broker, with the generation the core gave it.
    conns: HashMap<BrokerId, (u32, BrokerConn)>,
    setups: HashMap<ClusterId, ConnSetup>,
}

/// The first Fetch version with `last_fetched_epoch` (and the diverging epoch in its answer).
const LAST_FETCHED_EPOCH_VERSION: i16 = 12;
/// The first Fetch version with fetch sessions (KIP-227).
const FETCH_SESSION_VERSION: i16 = 7;

/// Removes from a Fetch what `version` cannot carry (the encoder refuses such fields).
fn fit_fetch(request: &mut FetchRequest, version: i16) {
    if version < LAST_FETCHED_EPOCH_VERSION {
        // Brokers before 2.7 cannot check the log against it.
        for p in request
            .topics
            .iter_mut()
            .flat_map(|t| t.partitions.iter_mut())
        {
            p.last_fetched_epoch = -1;
        }
    }
    if version < FETCH_SESSION_VERSION {
        // Brokers before 1.1 keep no sessions: a sessionless full fetch (the core asks for a
        // session only in full fetches). Their answer has no session id (0), so the core goes on
        // with full fetches.
        request.session_id = 0;
        request.session_epoch = -1;
        request.forgotten_topics_data.clear();
    }
}

impl Driver {
    fn new(cfg: ShardConfig, commands: Receiver<ShardCommand>, events: Sender<ShardEvent>) -> Self {
        // Jitter only has to differ between shards and runs; it needs no quality.
        let seed = getrandom::u64().unwrap_or(cfg.index as u64);
        let (backend, tick_ms) = (cfg.backend, cfg.tick_ms.max(1));
        let mut core = ShardCore::new(cfg, Instant::now(), seed);
        core.set_wall_clock(WallClock {
            at: Instant::now(),
            epoch_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        });
        Driver {
            backend,
            tick_ms,
            core,
            commands,
            events,
            conns: HashMap::new(),
            setups: HashMap::new(),
        }
    }

    async fn run(mut self) {
        let mut futs: Futs = FuturesUnordered::new();
        let mut tick = tokio::time::interval(Duration::from_millis(self.tick_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            self.perform(&mut futs, Instant::now());
            if !self.send_events() {
                break; // control is gone
            }
            if self.core.is_stopped() {
                self.send_events_blocking();
                return;
            }
            tokio::select! {
                Some(done) = futs.next() => self.complete(done, Instant::now()),
                _ = tick.tick() => {
                    if !self.read_commands() {
                        break; // control is gone
                    }
                    self.core.handle_timers(Instant::now());
                }
            }
        }
        let _ = self.events.try_send(ShardEvent::Stopped {
            shard: self.core.index(),
            error: Some("the control channel closed".to_string()),
        });
    }

    /// Reads every queued command. Returns false when control has disconnected.
    fn read_commands(&mut self) -> bool {
        loop {
            match self.commands.try_recv() {
                Ok(cmd) => self.core.handle_command(cmd, Instant::now()),
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => return self.core.is_shutting_down(),
            }
        }
    }

    /// Hands the core's events to control without waiting: what the channel refuses goes back
    /// to the core. Returns false when control has disconnected.
    fn send_events(&mut self) -> bool {
        while let Some(ev) = self.core.poll_event() {
            match self.events.try_send(ev) {
                Ok(()) => {}
                Err(TrySendError::Full(ev)) => {
                    self.core.handle_event_refused(ev);
                    return true;
                }
                Err(TrySendError::Disconnected(ev)) => {
                    self.core.handle_event_refused(ev);
                    return self.core.is_shutting_down();
                }
            }
        }
        true
    }

    /// At shutdown only: the last events must arrive, so wait for room (bounded by control
    /// draining the channel, which it does until every shard has stopped).
    fn send_events_blocking(&mut self) {
        while let Some(ev) = self.core.poll_event() {
            if self
                .events
                .send_timeout(ev, Duration::from_secs(5))
                .is_err()
            {
                return;
            }
        }
    }

    fn setup(&mut self, cluster: ClusterId) -> ConnSetup {
        let backend = self.backend;
        let ep = self.core.endpoint(cluster).clone();
        self.setups
            .entry(cluster)
            .or_insert_with(|| ConnSetup {
                config: ep.config.clone(),
                tls: ep.tls.clone(),
                backend,
            })
            .clone()
    }

    /// Performs the core's actions, in order.
    fn perform(&mut self, futs: &mut Futs, now: Instant) {
        while let Some(action) = self.core.poll_action(now) {
            match action {
                Action::Connect {
                    broker,
                    generation,
                    cluster,
                    addr,
                } => {
                    let setup = self.setup(cluster);
                    futs.push(Box::pin(async move {
                        let result = BrokerConn::connect(&addr, &setup).await;
                        Done::Connected {
                            broker,
                            generation,
                            result,
                        }
                    }));
                }
                Action::Disconnect { broker, generation } => {
                    if self
                        .conns
                        .get(&broker)
                        .is_some_and(|(g, _)| *g == generation)
                        && let Some((_, c)) = self.conns.remove(&broker)
                    {
                        c.close("given up on by the shard");
                    }
                }
                Action::LookupLeaders {
                    id,
                    cluster,
                    topics,
                } => {
                    let (ep, setup) = (self.core.endpoint(cluster).clone(), self.setup(cluster));
                    futs.push(Box::pin(async move {
                        let result = meta::lookup_leaders(&ep, &setup, topics).await;
                        Done::Leaders { id, result }
                    }));
                }
                Action::InitProducerId { id, cluster } => {
                    let (ep, setup) = (self.core.endpoint(cluster).clone(), self.setup(cluster));
                    futs.push(Box::pin(async move {
                        let result = meta::init_producer_id(&ep, &setup).await;
                        Done::ProducerId { id, result }
                    }));
                }
                Action::Fetch {
                    id,
                    broker,
                    request,
                } => match self.send_fetch(broker, request) {
                    Ok(fut) => futs.push(Box::pin(async move {
                        Done::Fetch {
                            id,
                            result: fut.await,
                        }
                    })),
                    Err(e) => self.core.handle_fetch_response(id, Err(e), now),
                },
                Action::Produce {
                    id,
                    broker,
                    request,
                } => match self.send_produce(broker, &request) {
                    Ok(fut) => futs.push(Box::pin(async move {
                        Done::Produce {
                            id,
                            result: fut.await,
                        }
                    })),
                    Err(e) => self.core.handle_produce_response(id, Err(e), now),
                },
            }
        }
    }

    fn conn(&self, broker: BrokerId) -> Result<&BrokerConn, WireError> {
        self.conns
            .get(&broker)
            .map(|(_, c)| c)
            .ok_or_else(|| WireError::Closed {
                broker: format!("{broker:?}"),
                reason: "no connection".to_string(),
            })
    }

    /// Enqueues a fetch; the future resolves to its decoded response.
    fn send_fetch(
        &self,
        broker: BrokerId,
        mut request: Box<FetchRequest>,
    ) -> Result<LocalBoxFuture<'static, Result<FetchedFrame, WireError>>, WireError> {
        let conn = self.conn(broker)?;
        let version = conn.version_for::<FetchRequest>()?;
        fit_fetch(&mut request, version);
        let pending = conn
            .try_send(&*request, version)?
            .ok_or_else(|| no_slot(conn))?;
        let addr = conn.broker_shared();
        Ok(Box::pin(async move {
            let resp = pending.wait().await?;
            let frame_bytes = resp.body.len();
            Ok(FetchedFrame {
                response: resp.decode::<FetchRequest>(&addr)?,
                frame_bytes,
            })
        }))
    }

    /// Encodes and enqueues a produce; the future resolves to its decoded response.
    fn send_produce(
        &self,
        broker: BrokerId,
        plan: &ProduceRequestPlan,
    ) -> Result<LocalBoxFuture<'static, Result<ProduceResponse, WireError>>, WireError> {
        let conn = self.conn(broker)?;
        let version = conn.version_for::<ProduceRequest>()?;
        let pending = conn
            .try_send_encoded(ApiKey::Produce as i16, version, |fb| {
                encode_produce_body(
                    fb,
                    version,
                    plan.transactional_id.as_deref(),
                    plan.acks.wire(),
                    plan.timeout_ms,
                    &plan.topics,
                )
                .map_err(|e| WireError::Protocol {
                    broker: conn.broker().to_string(),
                    api: "Produce",
                    message: e.to_string(),
                })
            })?
            .ok_or_else(|| no_slot(conn))?;
        Ok(Box::pin(pending.decode::<ProduceRequest>()))
    }

    fn complete(&mut self, done: Done, now: Instant) {
        match done {
            Done::Connected {
                broker,
                generation,
                result,
            } => {
                let info = match &result {
                    Ok(c) => Ok(ConnInfo {
                        max_in_flight: c.max_in_flight(),
                        replace_at: c.replace_at(),
                    }),
                    Err(e) => Err(e.clone()),
                };
                if self.core.handle_connected(broker, generation, info, now)
                    && let Ok(c) = result
                {
                    self.conns.insert(broker, (generation, c));
                }
            }
            Done::Fetch { id, result } => self.core.handle_fetch_response(id, result, now),
            Done::Produce { id, result } => self.core.handle_produce_response(id, result, now),
            Done::Leaders { id, result } => self.core.handle_leaders(id, result, now),
            Done::ProducerId { id, result } => self.core.handle_producer_id(id, result, now),
        }
    }
}

fn no_slot(conn: &BrokerConn) -> WireError {
    WireError::Closed {
        broker: conn.broker().to_string(),
        reason: "every in-flight slot of the connection is taken".to_string(),
    }
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("shard", &self.core.index())
            .field("connections", &self.conns.len())
            .finish()
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::*;

    #[test]
    fn a_fetch_fits_every_version_from_4() {
        let name = || TopicName(StrBytes::from_static_str("t"));
        let session_fetch = FetchRequest::default()
            .with_session_id(12)
            .with_session_epoch(3)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(name())
                    .with_partitions(vec![FetchPartition::default().with_last_fetched_epoch(5)]),
            ])
            .with_forgotten_topics_data(vec![
                ForgottenTopic::default()
                    .with_topic(name())
                    .with_partitions(vec![1]),
            ]);
        assert!(session_fetch.encode(&mut BytesMut::new(), 6).is_err());
        for version in 4..=12 {
            let mut r = session_fetch.clone();
            fit_fetch(&mut r, version);
            r.encode(&mut BytesMut::new(), version)
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
            let sessions = version >= FETCH_SESSION_VERSION;
            assert_eq!(r.session_epoch == 3, sessions, "v{version}");
            assert_eq!(r.forgotten_topics_data.is_empty(), !sessions, "v{version}");
        }
    }
}
