//! [`BrokerConn`]: the async face of a [`Connection`], shared by the control plane and the
//! shards, on either IO backend.
//!
//! After the handshake, two local tasks serve the socket: a reader, which is never cancelled
//! (dropping an io_uring read would lose its bytes), and a writer fed by a FIFO queue. Requests
//! are pipelined: [`BrokerConn::send`] encodes and queues a request at once and returns a
//! [`PendingResponse`] to await later, so many requests can be in flight on one connection, up
//! to `max_in_flight_requests`.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::protocol::Request;
use rustls::pki_types::ServerName;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use super::runtime::IoBackend;
use super::transport::{EpollTcp, Transport, UringTcp};
use crate::wire::versions::{ApiVersions, api_name};
use crate::wire::{
    ConnConfig, Connection, ConnectionParams, Event, FrameBuilder, Response, SaslCredentials,
    WireError, sasl, tls,
};

/// What a connection attempt needs beyond the address: the cluster's settings, with the TLS
/// configuration already built (building it reads files, so it is done once per cluster).
#[derive(Clone)]
pub struct ConnSetup {
    pub config: ConnConfig,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub backend: IoBackend,
}

impl std::fmt::Debug for ConnSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnSetup")
            .field("config", &self.config)
            .field("backend", &self.backend)
            .finish()
    }
}

impl ConnSetup {
    /// Validates the settings and loads TLS material. Fails with a message naming the file or
    /// setting at fault.
    pub fn new(config: ConnConfig, backend: IoBackend) -> Result<Self, WireError> {
        let tls = if config.security_protocol.uses_tls() {
            let tls_cfg = config.tls.clone().unwrap_or_default();
            Some(
                tls::client_config(&tls_cfg).map_err(|e| WireError::TlsConfig {
                    broker: "(any)".to_string(),
                    message: e.to_string(),
                })?,
            )
        } else {
            None
        };
        if config.security_protocol.uses_sasl() && config.sasl.is_none() {
            return Err(WireError::Authentication {
                broker: "(any)".to_string(),
                mechanism: "(none)".to_string(),
                message: format!(
                    "security.protocol={} needs sasl.mechanism and sasl.jaas.config",
                    config.security_protocol.name()
                ),
            });
        }
        Ok(ConnSetup {
            config,
            tls,
            backend,
        })
    }
}

struct Shared {
    conn: Connection,
    /// Waiters in request order; responses arrive in the same order.
    pending: VecDeque<(i32, oneshot::Sender<Result<Response, WireError>>)>,
    failed: Option<WireError>,
}

/// Writes queued for the writer task, beyond the requests in flight: TLS records rustls wants
/// to send after a read (alerts, key updates). Requests take an in-flight permit before they
/// queue their write, so the queue holds at most `max_in_flight_requests` plus this many.
const EXTRA_WRITES: usize = 16;

struct Inner {
    broker: Arc<str>,
    shared: RefCell<Shared>,
    /// Bounded by the in-flight permits plus [`EXTRA_WRITES`]. When it is full nonetheless (a
    /// broker that stopped reading while sending TLS records), the connection fails with an
    /// error saying so: nothing queued is lost unnoticed, every waiter gets the error.
    write_tx: mpsc::Sender<Vec<Bytes>>,
    permits: Arc<Semaphore>,
    max_in_flight: usize,
    request_timeout: Duration,
    versions: ApiVersions,
    /// When to stop sending on this connection and open another, because the broker ends the
    /// SASL session soon after (KIP-368); `None` when the session does not expire.
    replace_at: Option<Instant>,
    shutdown: Box<dyn Fn()>,
}

/// When a connection whose SASL session lasts `session_lifetime_ms` from `authenticated_at`
/// should be replaced. A broker closes a connection whose session has expired at its next
/// request (KIP-368), which would fail everything in flight on it; strait does not
/// re-authenticate in place, it moves to a fresh connection at 85 % of the lifetime (the Java
/// client re-authenticates between 85 and 95 %), leaving time for requests in flight to finish.
pub fn session_replace_at(
    authenticated_at: Instant,
    session_lifetime_ms: Option<i64>,
) -> Option<Instant> {
    let ms = u64::try_from(session_lifetime_ms?)
        .ok()
        .filter(|ms| *ms > 0)?;
    Some(authenticated_at + Duration::from_millis(ms - ms * 15 / 100))
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Wakes the reader task, which then ends.
        (self.shutdown)();
    }
}

impl Inner {
    fn fail(&self, err: WireError) {
        let waiters = {
            let mut s = self.shared.borrow_mut();
            if s.failed.is_none() {
                s.failed = Some(err.clone());
            }
            std::mem::take(&mut s.pending)
        };
        for (_, tx) in waiters {
            let _ = tx.send(Err(err.clone()));
        }
        (self.shutdown)();
    }
}

/// A connection to one broker. Cheap to clone; the socket closes when the last clone drops.
#[derive(Clone)]
pub struct BrokerConn {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for BrokerConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerConn")
            .field("broker", &self.inner.broker)
            .finish()
    }
}

/// A request on the wire; await [`PendingResponse::wait`] for its response.
#[must_use = "a pending response must be awaited or its answer is lost"]
pub struct PendingResponse {
    inner: Rc<Inner>,
    rx: oneshot::Receiver<Result<Response, WireError>>,
    api_key: i16,
    _permit: OwnedSemaphorePermit,
}

impl std::fmt::Debug for PendingResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingResponse")
            .field("broker", &self.inner.broker)
            .field("api", &api_name(self.api_key))
            .finish()
    }
}

impl PendingResponse {
    /// The response, or an error. A timeout fails the whole connection, as the Java client does:
    /// a broker that stopped answering one request will not answer the ones behind it.
    pub async fn wait(self) -> Result<Response, WireError> {
        match tokio::time::timeout(self.inner.request_timeout, self.rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(self
                .inner
                .shared
                .borrow()
                .failed
                .clone()
                .unwrap_or_else(|| WireError::Closed {
                    broker: self.inner.broker.to_string(),
                    reason: "the connection was dropped".to_string(),
                })),
            Err(_) => {
                let err = WireError::Timeout {
                    broker: self.inner.broker.to_string(),
                    api: api_name(self.api_key),
                    after_ms: self.inner.request_timeout.as_millis() as u64,
                };
                self.inner.fail(err.clone());
                Err(err)
            }
        }
    }

    /// Waits and decodes the response as `R`'s.
    pub async fn decode<R: Request>(self) -> Result<R::Response, WireError> {
        let broker = self.inner.broker.clone();
        self.wait().await?.decode::<R>(&broker)
    }
}

impl BrokerConn {
    /// Connects to `broker` (`host:port`), runs TLS, ApiVersions and SASL, and starts the
    /// reader and writer tasks. Must run inside an [`super::runtime::IoBackend`] runtime (it
    /// spawns local tasks). The whole attempt is bounded by `connect_timeout_ms`.
    pub async fn connect(broker: &str, setup: &ConnSetup) -> Result<BrokerConn, WireError> {
        let timeout = Duration::from_millis(setup.config.connect_timeout_ms);
        let attempt = async {
            match setup.backend {
                IoBackend::Uring => connect_with::<UringTcp>(broker, setup).await,
                IoBackend::Epoll => connect_with::<EpollTcp>(broker, setup).await,
            }
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(r) => r,
            Err(_) => Err(WireError::Connect {
                broker: broker.to_string(),
                message: format!(
                    "no complete handshake within {} ms (connect, TLS, ApiVersions, SASL)",
                    setup.config.connect_timeout_ms
                ),
            }),
        }
    }

    pub fn broker(&self) -> &str {
        &self.inner.broker
    }

    /// The broker's address, shared (a reference count, not a copy of the string).
    pub fn broker_shared(&self) -> Arc<str> {
        self.inner.broker.clone()
    }

    /// When new requests should move to a fresh connection ([`session_replace_at`]).
    pub fn replace_at(&self) -> Option<Instant> {
        self.inner.replace_at
    }

    /// Closes the connection now: every request still in flight fails with `reason`, and the
    /// socket shuts down (a broker that stopped answering keeps nothing of ours alive).
    pub fn close(&self, reason: &str) {
        self.inner.fail(WireError::Closed {
            broker: self.inner.broker.to_string(),
            reason: reason.to_string(),
        });
    }

    /// The broker's advertised API versions.
    pub fn versions(&self) -> &ApiVersions {
        &self.inner.versions
    }

    /// The negotiated version for `R`.
    pub fn version_for<R: Request>(&self) -> Result<i16, WireError> {
        self.inner
            .versions
            .negotiate::<R>()
            .map_err(|m| WireError::UnsupportedVersion {
                broker: self.inner.broker.to_string(),
                api: api_name(m.api_key),
                ours: (m.ours.min, m.ours.max),
                theirs: m.theirs.map(|t| (t.min, t.max)),
            })
    }

    /// Whether the connection has failed (it will not recover; open a new one).
    pub fn is_failed(&self) -> bool {
        self.inner.shared.borrow().failed.is_some()
    }

    /// Whether new requests should go to a fresh connection because the broker will soon end
    /// this one's SASL session ([`session_replace_at`]). Requests already in flight finish here:
    /// the socket stays open until the last clone and pending response are dropped.
    pub fn should_replace(&self, now: Instant) -> bool {
        self.inner.replace_at.is_some_and(|at| now >= at)
    }

    /// Sends `req` at the negotiated version and waits for the decoded response.
    pub async fn call<R: Request>(&self, req: &R) -> Result<R::Response, WireError> {
        let version = self.version_for::<R>()?;
        self.send(req, version).await?.decode::<R>().await
    }

    /// Queues `req` at `version` once an in-flight slot is free.
    pub async fn send<R: Request>(
        &self,
        req: &R,
        version: i16,
    ) -> Result<PendingResponse, WireError> {
        let permit = self.acquire().await?;
        self.enqueue(R::KEY, permit, |conn| conn.send(req, version))
    }

    /// Queues a request whose body the caller encodes (Produce with zero-copy batches).
    pub async fn send_encoded(
        &self,
        api_key: i16,
        version: i16,
        encode: impl FnOnce(&mut FrameBuilder) -> Result<(), WireError>,
    ) -> Result<PendingResponse, WireError> {
        let permit = self.acquire().await?;
        self.enqueue(api_key, permit, |conn| {
            conn.send_encoded(api_key, version, encode)
        })
    }

    /// Like [`BrokerConn::send`] but never waits: `Ok(None)` when every in-flight slot is taken.
    /// The request is on its way (in wire order) when this returns, which is what callers that
    /// pipeline ordered requests (Produce sequence numbers) need.
    pub fn try_send<R: Request>(
        &self,
        req: &R,
        version: i16,
    ) -> Result<Option<PendingResponse>, WireError> {
        match self.try_acquire()? {
            Some(permit) => self
                .enqueue(R::KEY, permit, |conn| conn.send(req, version))
                .map(Some),
            None => Ok(None),
        }
    }

    /// Like [`BrokerConn::send_encoded`] but never waits; see [`BrokerConn::try_send`].
    pub fn try_send_encoded(
        &self,
        api_key: i16,
        version: i16,
        encode: impl FnOnce(&mut FrameBuilder) -> Result<(), WireError>,
    ) -> Result<Option<PendingResponse>, WireError> {
        match self.try_acquire()? {
            Some(permit) => self
                .enqueue(api_key, permit, |conn| {
                    conn.send_encoded(api_key, version, encode)
                })
                .map(Some),
            None => Ok(None),
        }
    }

    /// Requests in flight on this connection.
    pub fn in_flight(&self) -> usize {
        self.inner.shared.borrow().pending.len()
    }

    /// Whether [`BrokerConn::try_send`] would find a free in-flight slot.
    pub fn has_capacity(&self) -> bool {
        self.inner.permits.available_permits() > 0
    }

    /// The connection's bound on requests in flight.
    pub fn max_in_flight(&self) -> usize {
        self.inner.max_in_flight
    }

    fn try_acquire(&self) -> Result<Option<OwnedSemaphorePermit>, WireError> {
        if let Some(e) = self.inner.shared.borrow().failed.clone() {
            return Err(e);
        }
        Ok(self.inner.permits.clone().try_acquire_owned().ok())
    }

    async fn acquire(&self) -> Result<OwnedSemaphorePermit, WireError> {
        if let Some(e) = self.inner.shared.borrow().failed.clone() {
            return Err(e);
        }
        self.inner
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| WireError::Closed {
                broker: self.inner.broker.to_string(),
                reason: "connection shut down".to_string(),
            })
    }

    fn enqueue(
        &self,
        api_key: i16,
        permit: OwnedSemaphorePermit,
        send: impl FnOnce(&mut Connection) -> Result<i32, WireError>,
    ) -> Result<PendingResponse, WireError> {
        let (tx, rx) = oneshot::channel();
        {
            // Encoding, registering the waiter and queueing the bytes happen under one borrow
            // with no await in between, so wire order, correlation order and waiter order agree.
            let mut s = self.inner.shared.borrow_mut();
            if let Some(e) = s.failed.clone() {
                return Err(e);
            }
            let corr = send(&mut s.conn)?;
            s.pending.push_back((corr, tx));
            if let Some(segs) = s.conn.poll_transmit()
                && let Err(e) = self.inner.write_tx.try_send(segs.into_vec())
            {
                drop(s);
                let err = write_queue_error(&self.inner.broker, &e);
                self.inner.fail(err.clone());
                return Err(err);
            }
        }
        Ok(PendingResponse {
            inner: self.inner.clone(),
            rx,
            api_key,
            _permit: permit,
        })
    }
}

/// Every address `broker` (`host:port`) resolves to, in the resolver's order, and its host.
async fn resolve(broker: &str) -> Result<(Vec<SocketAddr>, String), WireError> {
    let host = match broker.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']').to_string(),
        None => {
            return Err(WireError::Connect {
                broker: broker.to_string(),
                message: "address must be host:port".to_string(),
            });
        }
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(broker)
        .await
        .map_err(|e| WireError::Connect {
            broker: broker.to_string(),
            message: format!("cannot resolve: {e}"),
        })?
        .collect();
    if addrs.is_empty() {
        return Err(WireError::Connect {
            broker: broker.to_string(),
            message: "resolves to no address".to_string(),
        });
    }
    Ok((addrs, host))
}

/// Connects to the first of `addrs` that accepts, trying them in order, as Kafka's clients do
/// with `client.dns.lookup=use_all_dns_ips`. The error names every address tried (just the
/// error when there is one address).
async fn connect_any<T, F, Fut>(
    broker: &str,
    addrs: &[SocketAddr],
    connect: F,
) -> Result<T, WireError>
where
    F: Fn(SocketAddr) -> Fut,
    Fut: std::future::Future<Output = std::io::Result<T>>,
{
    let mut errors = Vec::new();
    for &addr in addrs {
        match connect(addr).await {
            Ok(t) => return Ok(t),
            Err(e) => errors.push((addr, e)),
        }
    }
    let message = match errors.as_slice() {
        [(_, e)] => e.to_string(),
        _ => errors
            .iter()
            .map(|(a, e)| format!("{a}: {e}"))
            .collect::<Vec<_>>()
            .join("; "),
    };
    Err(WireError::Connect {
        broker: broker.to_string(),
        message,
    })
}

async fn connect_with<T: Transport>(
    broker: &str,
    setup: &ConnSetup,
) -> Result<BrokerConn, WireError> {
    let sasl = setup
        .config
        .security_protocol
        .uses_sasl()
        .then(|| setup.config.sasl.clone())
        .flatten();
    // Before dialling: the token may take a moment to come, and no socket should wait for it.
    let bearer_token = match sasl.as_ref().map(|s| &s.credentials) {
        Some(SaslCredentials::OAuthBearer(login)) => {
            Some(super::token::bearer_token(broker, login).await?)
        }
        _ => None,
    };
    let (addrs, host) = resolve(broker).await?;
    let transport = connect_any(broker, &addrs, T::connect).await?;
    let tls = match &setup.tls {
        Some(cfg) => {
            let name = ServerName::try_from(host.clone()).map_err(|e| WireError::TlsConfig {
                broker: broker.to_string(),
                message: format!("{host:?} is not a valid TLS server name: {e}"),
            })?;
            Some((cfg.clone(), name))
        }
        None => None,
    };
    let scram_nonce = sasl::fresh_nonce().map_err(|e| WireError::Connect {
        broker: broker.to_string(),
        message: format!("no randomness for the SCRAM nonce: {e}"),
    })?;
    let mut conn = Connection::new(ConnectionParams {
        broker: broker.to_string(),
        client_id: setup.config.client_id.clone(),
        tls,
        sasl,
        scram_nonce,
        bearer_token,
        max_response_bytes: setup.config.max_response_bytes,
    })?;

    handshake(&transport, &mut conn, broker).await?;

    let transport = Rc::new(transport);
    let max_in_flight = setup.config.max_in_flight_requests.max(1);
    let (write_tx, write_rx) = mpsc::channel(max_in_flight + EXTRA_WRITES);
    let closer = transport.clone();
    let replace_at = session_replace_at(Instant::now(), conn.session_lifetime_ms());
    let inner = Rc::new(Inner {
        broker: Arc::from(broker),
        versions: conn.versions().clone(),
        replace_at,
        shared: RefCell::new(Shared {
            conn,
            pending: VecDeque::new(),
            failed: None,
        }),
        write_tx,
        permits: Arc::new(Semaphore::new(max_in_flight)),
        max_in_flight,
        request_timeout: Duration::from_millis(setup.config.request_timeout_ms),
        shutdown: Box::new(move || closer.shutdown()),
    });
    tokio::task::spawn_local(writer_task(
        Rc::downgrade(&inner),
        transport.clone(),
        write_rx,
    ));
    tokio::task::spawn_local(reader_task(Rc::downgrade(&inner), transport));
    Ok(BrokerConn { inner })
}

/// Runs TLS, ApiVersions and SASL inline: one task, alternating writes and reads, nothing to
/// cancel.
async fn handshake<T: Transport>(
    transport: &T,
    conn: &mut Connection,
    broker: &str,
) -> Result<(), WireError> {
    loop {
        if let Some(segs) = conn.poll_transmit() {
            transport
                .write_all(segs.into_vec())
                .await
                .map_err(|e| io_error(broker, e))?;
        }
        match conn.poll_event() {
            Some(Event::Ready) => return Ok(()),
            Some(Event::Response(_)) => {
                return Err(WireError::Protocol {
                    broker: broker.to_string(),
                    api: "handshake",
                    message: "unexpected response during the handshake".to_string(),
                });
            }
            None => {}
        }
        let buf = conn.read_buf();
        let (res, buf) = transport.read(buf).await;
        match res {
            Ok(0) => return Err(conn.handle_eof()),
            Ok(_) => conn.handle_read(buf)?,
            Err(e) => return Err(io_error(broker, e)),
        }
    }
}

fn write_queue_error<T>(broker: &str, e: &mpsc::error::TrySendError<T>) -> WireError {
    let reason = match e {
        mpsc::error::TrySendError::Full(_) => {
            "its write queue is full: the broker stopped reading what strait sends"
        }
        mpsc::error::TrySendError::Closed(_) => "its writer stopped",
    };
    WireError::Closed {
        broker: broker.to_string(),
        reason: reason.to_string(),
    }
}

fn io_error(broker: &str, e: std::io::Error) -> WireError {
    WireError::Io {
        broker: broker.to_string(),
        kind: e.kind(),
        message: e.to_string(),
    }
}

async fn writer_task<T: Transport>(
    inner: Weak<Inner>,
    transport: Rc<T>,
    mut rx: mpsc::Receiver<Vec<Bytes>>,
) {
    while let Some(segs) = rx.recv().await {
        if let Err(e) = transport.write_all(segs).await {
            if let Some(inner) = inner.upgrade() {
                let err = io_error(&inner.broker, e);
                inner.fail(err);
            }
            return;
        }
    }
}

async fn reader_task<T: Transport>(inner: Weak<Inner>, transport: Rc<T>) {
    loop {
        // Hold no strong reference across the read: dropping the last BrokerConn must be able
        // to drop Inner, whose Drop shuts the socket and wakes this read.
        let buf = match inner.upgrade() {
            Some(i) => i.shared.borrow_mut().conn.read_buf(),
            None => return,
        };
        let (res, buf) = transport.read(buf).await;
        let Some(inner) = inner.upgrade() else { return };
        let outcome = {
            let mut s = inner.shared.borrow_mut();
            match res {
                Ok(0) => Err(s.conn.handle_eof()),
                Ok(_) => s.conn.handle_read(buf),
                Err(e) => Err(io_error(&inner.broker, e)),
            }
        };
        if let Err(e) = outcome {
            inner.fail(e);
            return;
        }
        let mut delivered = Vec::new();
        {
            let mut s = inner.shared.borrow_mut();
            while let Some(ev) = s.conn.poll_event() {
                if let Event::Response(r) = ev {
                    match s.pending.pop_front() {
                        Some((corr, tx)) if corr == r.correlation_id => delivered.push((tx, r)),
                        _ => {
                            drop(s);
                            inner.fail(WireError::Protocol {
                                broker: inner.broker.to_string(),
                                api: api_name(r.api_key),
                                message: "response does not match the oldest waiter".into(),
                            });
                            return;
                        }
                    }
                }
            }
            // TLS may have something to send after reading (alerts, key updates).
            if let Some(segs) = s.conn.poll_transmit()
                && let Err(e) = inner.write_tx.try_send(segs.into_vec())
            {
                drop(s);
                inner.fail(write_queue_error(&inner.broker, &e));
                return;
            }
        }
        for (tx, r) in delivered {
            let _ = tx.send(Ok(r));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sasl_session_is_replaced_at_85_percent_of_its_lifetime() {
        let t0 = Instant::now();
        assert_eq!(
            session_replace_at(t0, Some(10_000)),
            Some(t0 + Duration::from_millis(8_500))
        );
        assert_eq!(
            session_replace_at(t0, Some(1)),
            Some(t0 + Duration::from_millis(1))
        );
        // No lifetime (the broker's connections.max.reauth.ms is 0) or a nonsensical one.
        assert_eq!(session_replace_at(t0, None), None);
        assert_eq!(session_replace_at(t0, Some(0)), None);
        assert_eq!(session_replace_at(t0, Some(-5)), None);
    }

    #[test]
    fn every_address_of_a_host_is_tried_in_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let open = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let open_addr = open.local_addr().unwrap();
            // A port nobody listens on any more.
            let closed_addr = {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap()
            };
            let connect = |a: SocketAddr| async move { tokio::net::TcpStream::connect(a).await };
            let s = connect_any("b:9092", &[closed_addr, open_addr], connect)
                .await
                .expect("the second address accepts");
            assert_eq!(s.peer_addr().unwrap(), open_addr);
            let e = connect_any("b:9092", &[closed_addr, closed_addr], connect)
                .await
                .expect_err("nothing accepts");
            let text = e.to_string();
            assert!(
                text.contains(&closed_addr.to_string()) && text.contains("; "),
                "{text}"
            );
            let one = connect_any("b:9092", &[closed_addr], connect)
                .await
                .expect_err("nothing accepts");
            assert!(!one.to_string().contains("; "), "{one}");
        });
    }
}
