//! The sans-IO state machine of one client connection to one broker.
//!
//! It owns no socket and reads no clock. A driver ([`crate::io`]) moves bytes:
//!
//! 1. write out everything [`Connection::poll_transmit`] returns;
//! 2. read from the socket into the buffer [`Connection::read_buf`] hands out, and give it back
//!    with [`Connection::handle_read`] (or call [`Connection::handle_eof`]);
//! 3. drain [`Connection::poll_event`]: first [`Event::Ready`] once the TLS handshake,
//!    ApiVersions and SASL are done, then one [`Event::Response`] per answered request.
//!
//! Requests are accepted only once the connection is ready. Responses arrive in request order
//! (a Kafka broker answers the requests of one connection in order); a response whose
//! correlation id is not the oldest outstanding one is a protocol error.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use rustls::pki_types::ServerName;

use super::WireError;
use super::config::{SaslConfig, Secret};
use super::frame::{FrameBuilder, FrameDecoder, Segments};
use super::sasl::SaslClient;
use super::versions::{ApiVersions, api_name, client_range};

/// Kafka's UNSUPPORTED_VERSION error code.
const UNSUPPORTED_VERSION: i16 = 35;
/// Kafka's UNSUPPORTED_SASL_MECHANISM error code.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// Kafka's ILLEGAL_SASL_STATE error code.
const ILLEGAL_SASL_STATE: i16 = 34;

/// Ciphertext read size: one TLS record plus overhead, so rustls can always make progress.
const TLS_READ_BYTES: usize = 18 * 1024;

/// Everything the state machine needs to start.
#[derive(Clone)]
pub struct ConnectionParams {
    /// `host:port`, used in every error message.
    pub broker: String,
    pub client_id: String,
    /// TLS client configuration and the name to verify, when the listener uses TLS.
    pub tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
    pub sasl: Option<SaslConfig>,
    /// A fresh SCRAM nonce (see [`super::sasl::fresh_nonce`]); unused otherwise.
    pub scram_nonce: String,
    /// The token OAUTHBEARER sends (the driver builds or fetches it); unused otherwise.
    pub bearer_token: Option<Secret>,
    pub max_response_bytes: usize,
}

impl std::fmt::Debug for ConnectionParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionParams")
            .field("broker", &self.broker)
            .field("client_id", &self.client_id)
            .field("tls", &self.tls.as_ref().map(|(_, n)| n))
            .field("sasl", &self.sasl)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

/// A response frame, header already checked. `body` is a view of the receive buffer.
#[derive(Debug, Clone)]
pub struct Response {
    pub correlation_id: i32,
    pub api_key: i16,
    pub api_version: i16,
    pub body: Bytes,
}

impl Response {
    /// Decodes the body as `R`'s response. Record sets inside stay zero-copy slices of `body`.
    pub fn decode<R: Request>(mut self, broker: &str) -> Result<R::Response, WireError> {
        debug_assert_eq!(self.api_key, R::KEY);
        <R::Response as Decodable>::decode(&mut self.body, self.api_version).map_err(|e| {
            WireError::Protocol {
                broker: broker.to_string(),
                api: api_name(R::KEY),
                message: format!("cannot decode v{} response: {e}", self.api_version),
            }
        })
    }
}

/// What the connection has to say.
#[derive(Debug)]
pub enum Event {
    /// TLS, ApiVersions and SASL are complete; requests may be sent.
    Ready,
    Response(Response),
}

#[derive(Debug)]
enum Phase {
    TlsHandshake,
    ApiVersions { version: i16 },
    SaslHandshake,
    SaslAuthenticate,
    Ready,
    Failed,
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    correlation_id: i32,
    api_key: i16,
    api_version: i16,
}

/// One client connection, sans IO.
pub struct Connection {
    broker: String,
    client_id: StrBytes,
    tls: Option<rustls::ClientConnection>,
    decoder: FrameDecoder,
    /// TLS only: the buffer ciphertext is read into.
    cipher_in: BytesMut,
    /// Bytes ready for the socket, in order.
    out: Segments,
    in_flight: VecDeque<InFlight>,
    next_correlation_id: i32,
    phase: Phase,
    versions: ApiVersions,
    sasl_config: Option<SaslConfig>,
    sasl: Option<SaslClient>,
    scram_nonce: String,
    bearer_token: Option<Secret>,
    /// `session_lifetime_ms` from the last SaslAuthenticate response (0 = none).
    session_lifetime_ms: i64,
    /// Responses delivered since the connection became ready: a close before the first one
    /// is part of setting the connection up (a SASL listener hangs up on the first request of
    /// a client that skipped authentication), a close after it is the broker going away.
    responses_since_ready: u64,
    events: VecDeque<Event>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("broker", &self.broker)
            .field("phase", &self.phase)
            .field("in_flight", &self.in_flight.len())
            .finish()
    }
}

impl Connection {
    pub fn new(params: ConnectionParams) -> Result<Self, WireError> {
        let tls = match params.tls {
            Some((config, name)) => {
                let mut c =
                    rustls::ClientConnection::new(config, name).map_err(|e| WireError::Tls {
                        broker: params.broker.clone(),
                        message: super::tls::explain(&e),
                    })?;
                // Plaintext written before the handshake ends, and requests larger than
                // rustls' default 64 KiB limit, must not be refused: the caller bounds how much
                // it sends through the in-flight limit.
                c.set_buffer_limit(None);
                Some(c)
            }
            None => None,
        };
        let mut conn = Connection {
            broker: params.broker,
            client_id: StrBytes::from_string(params.client_id),
            tls,
            decoder: FrameDecoder::new(params.max_response_bytes),
            cipher_in: BytesMut::new(),
            out: Segments::new(),
            in_flight: VecDeque::new(),
            next_correlation_id: 0,
            phase: Phase::TlsHandshake,
            versions: ApiVersions::default(),
            sasl_config: params.sasl,
            sasl: None,
            scram_nonce: params.scram_nonce,
            bearer_token: params.bearer_token,
            session_lifetime_ms: 0,
            responses_since_ready: 0,
            events: VecDeque::new(),
        };
        if conn.tls.is_some() {
            conn.flush_tls();
        } else {
            conn.start_api_versions(client_range::<ApiVersionsRequest>().max)?;
        }
        Ok(conn)
    }

    pub fn broker(&self) -> &str {
        &self.broker
    }

    /// The broker's API version ranges (empty until ApiVersions has completed).
    pub fn versions(&self) -> &ApiVersions {
        &self.versions
    }

    pub fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready)
    }

    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The SASL session lifetime the broker granted, if any (KIP-368). The broker closes the
    /// connection when it ends; strait then reconnects rather than re-authenticating in place.
    pub fn session_lifetime_ms(&self) -> Option<i64> {
        (self.session_lifetime_ms > 0).then_some(self.session_lifetime_ms)
    }

    /// Bytes to write to the socket, in order.
    pub fn poll_transmit(&mut self) -> Option<Segments> {
        if self.out.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.out))
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The buffer for the next socket read: the driver appends to it (after its current length,
    /// into spare capacity) and hands it back through [`Connection::handle_read`].
    pub fn read_buf(&mut self) -> BytesMut {
        if self.tls.is_some() {
            let mut b = std::mem::take(&mut self.cipher_in);
            b.clear();
            b.reserve(TLS_READ_BYTES);
            b
        } else {
            self.decoder.reserve_for_read();
            std::mem::take(self.decoder.buffer_mut())
        }
    }

    /// Takes back the read buffer with newly read bytes appended.
    pub fn handle_read(&mut self, buf: BytesMut) -> Result<(), WireError> {
        let result = if self.tls.is_some() {
            self.cipher_in = buf;
            self.decrypt()
        } else {
            *self.decoder.buffer_mut() = buf;
            Ok(())
        };
        result
            .and_then(|()| self.process_frames())
            .inspect_err(|_| {
                self.phase = Phase::Failed;
            })
    }

    /// The peer closed the connection.
    pub fn handle_eof(&mut self) -> WireError {
        let phase = std::mem::replace(&mut self.phase, Phase::Failed);
        let message = match phase {
            Phase::TlsHandshake => {
                "closed by the broker during the TLS handshake (is this a TLS listener? check security.protocol)".to_string()
            }
            Phase::ApiVersions { .. } if self.tls.is_none() => {
                "closed by the broker before answering ApiVersions (is this a TLS listener? then security.protocol must be SSL or SASL_SSL)".to_string()
            }
            Phase::SaslHandshake | Phase::SaslAuthenticate => {
                "closed by the broker during SASL authentication".to_string()
            }
            Phase::Ready if !self.in_flight.is_empty() && self.session_lifetime_ms > 0 => format!(
                "closed by the broker with {} request(s) unanswered (the broker ends SASL sessions after {} ms, connections.max.reauth.ms: was the session over?)",
                self.in_flight.len(),
                self.session_lifetime_ms
            ),
            Phase::Ready
                if !self.in_flight.is_empty()
                    && self.responses_since_ready == 0
                    && self.sasl_config.is_none() =>
            {
                format!(
                    "closed by the broker at the first request of a new connection, {} request(s) unanswered (does the listener expect SASL? check security.protocol)",
                    self.in_flight.len()
                )
            }
            Phase::Ready if !self.in_flight.is_empty() => format!(
                "closed by the broker with {} request(s) unanswered",
                self.in_flight.len()
            ),
            _ => "closed by the broker".to_string(),
        };
        WireError::Closed {
            broker: self.broker.clone(),
            reason: message,
        }
    }

    /// Encodes and queues a request at the given version. Returns its correlation id.
    pub fn send<R: Request>(&mut self, req: &R, version: i16) -> Result<i32, WireError> {
        self.require_ready(R::KEY)?;
        self.queue_request(req, version)
    }

    /// Queues a request whose body the caller encodes itself (used for Produce, whose record
    /// batches travel as separate segments). `encode` receives the correlation id and a
    /// builder that already holds the request header.
    pub fn send_encoded(
        &mut self,
        api_key: i16,
        version: i16,
        encode: impl FnOnce(&mut FrameBuilder) -> Result<(), WireError>,
    ) -> Result<i32, WireError> {
        self.require_ready(api_key)?;
        let correlation_id = self.next_id();
        let mut fb = FrameBuilder::new();
        self.encode_header(&mut fb, api_key, version, correlation_id)?;
        encode(&mut fb)?;
        let frame = fb
            .finish()
            .map_err(|e| self.protocol(api_key, e.to_string()))?;
        self.queue_frame(frame);
        self.in_flight.push_back(InFlight {
            correlation_id,
            api_key,
            api_version: version,
        });
        Ok(correlation_id)
    }

    fn require_ready(&self, api_key: i16) -> Result<(), WireError> {
        match self.phase {
            Phase::Ready => Ok(()),
            Phase::Failed => Err(WireError::Closed {
                broker: self.broker.clone(),
                reason: "the connection has failed".to_string(),
            }),
            _ => Err(self.protocol(api_key, "connection not ready".to_string())),
        }
    }

    fn next_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1) & i32::MAX;
        id
    }

    fn encode_header(
        &self,
        fb: &mut FrameBuilder,
        api_key: i16,
        version: i16,
        correlation_id: i32,
    ) -> Result<(), WireError> {
        let key = ApiKey::try_from(api_key)
            .map_err(|_| self.protocol(api_key, "unknown API key".to_string()))?;
        let header = RequestHeader::default()
            .with_request_api_key(api_key)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        header
            .encode(fb.small(), key.request_header_version(version))
            .map_err(|e| self.protocol(api_key, format!("cannot encode request header: {e}")))
    }

    fn queue_request<R: Request>(&mut self, req: &R, version: i16) -> Result<i32, WireError> {
        let correlation_id = self.next_id();
        let mut fb = FrameBuilder::new();
        self.encode_header(&mut fb, R::KEY, version, correlation_id)?;
        req.encode(fb.small(), version)
            .map_err(|e| self.protocol(R::KEY, format!("cannot encode v{version} request: {e}")))?;
        let frame = fb
            .finish()
            .map_err(|e| self.protocol(R::KEY, e.to_string()))?;
        self.queue_frame(frame);
        self.in_flight.push_back(InFlight {
            correlation_id,
            api_key: R::KEY,
            api_version: version,
        });
        Ok(correlation_id)
    }

    fn queue_frame(&mut self, frame: Segments) {
        match self.tls.as_mut() {
            None => self.out.extend(frame),
            Some(tls) => {
                // Encryption has to read every byte anyway; rustls copies the plaintext into its
                // record buffer, and writing to it cannot fail with the buffer limit lifted.
                let mut w = tls.writer();
                for seg in frame.as_slice() {
                    w.write_all(seg)
                        .expect("rustls accepts all plaintext when its buffer limit is lifted");
                }
                self.flush_tls();
            }
        }
    }

    /// Moves rustls' pending ciphertext into the output queue.
    fn flush_tls(&mut self) {
        let Some(tls) = self.tls.as_mut() else { return };
        while tls.wants_write() {
            let mut buf = Vec::with_capacity(TLS_READ_BYTES);
            match tls.write_tls(&mut buf) {
                Ok(0) => break,
                Ok(_) => self.out.push(Bytes::from(buf)),
                Err(_) => break, // writing into a Vec cannot fail
            }
        }
    }

    fn decrypt(&mut self) -> Result<(), WireError> {
        let Some(tls) = self.tls.as_mut() else {
            return Ok(());
        };
        let mut pending: &[u8] = &self.cipher_in;
        while !pending.is_empty() {
            match tls.read_tls(&mut pending) {
                Ok(_) => {}
                Err(e) => {
                    return Err(WireError::Tls {
                        broker: self.broker.clone(),
                        message: format!("TLS record layer: {e}"),
                    });
                }
            }
            if let Err(e) = tls.process_new_packets() {
                // Send the alert rustls prepared, so the broker logs why we hung up.
                let _ = tls.write_tls(&mut Vec::new());
                return Err(WireError::Tls {
                    broker: self.broker.clone(),
                    message: super::tls::explain(&e),
                });
            }
            // Move plaintext into the frame buffer. The extra copy is inherent to TLS: the
            // bytes are decrypted into rustls' buffer first.
            // Bounded: rustls holds only what the last ciphertext read decrypted to.
            let buf = self.decoder.buffer_mut();
            loop {
                let start = buf.len();
                buf.resize(start + TLS_READ_BYTES, 0);
                match tls.reader().read(&mut buf[start..]) {
                    Ok(n) => {
                        buf.truncate(start + n);
                        if n == 0 {
                            break;
                        }
                    }
                    Err(_) => {
                        // WouldBlock: no more plaintext for now.
                        buf.truncate(start);
                        break;
                    }
                }
            }
        }
        let handshake_done = matches!(self.phase, Phase::TlsHandshake)
            && self.tls.as_ref().is_some_and(|t| !t.is_handshaking());
        self.flush_tls();
        if handshake_done {
            self.start_api_versions(client_range::<ApiVersionsRequest>().max)?;
        }
        Ok(())
    }

    fn process_frames(&mut self) -> Result<(), WireError> {
        loop {
            let frame = match self.decoder.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(()),
                Err(_) if self.tls.is_none() && self.looks_like_tls() => {
                    return Err(WireError::Protocol {
                        broker: self.broker.clone(),
                        api: "ApiVersions",
                        message: "the broker answered with TLS: this is a TLS listener, so security.protocol must be SSL or SASL_SSL".to_string(),
                    });
                }
                Err(e) => {
                    return Err(WireError::Protocol {
                        broker: self.broker.clone(),
                        api: self
                            .in_flight
                            .front()
                            .map_or("response", |f| api_name(f.api_key)),
                        message: e.to_string(),
                    });
                }
            };
            let response = self.match_response(frame)?;
            match self.phase {
                Phase::Ready => {
                    self.responses_since_ready += 1;
                    self.events.push_back(Event::Response(response));
                }
                Phase::ApiVersions { version } => self.on_api_versions(response, version)?,
                Phase::SaslHandshake => self.on_sasl_handshake(response)?,
                Phase::SaslAuthenticate => self.on_sasl_authenticate(response)?,
                Phase::TlsHandshake | Phase::Failed => {
                    return Err(self.protocol(response.api_key, "unexpected response".into()));
                }
            }
        }
    }

    /// A TLS record header (alert or handshake, version 3.x) where a frame size should be: a
    /// plaintext client talking to a TLS listener.
    fn looks_like_tls(&mut self) -> bool {
        let b = self.decoder.buffer_mut();
        b.len() >= 3 && matches!(b[0], 0x15 | 0x16) && b[1] == 0x03 && b[2] <= 0x04
    }

    fn match_response(&mut self, mut frame: Bytes) -> Result<Response, WireError> {
        let Some(expected) = self.in_flight.pop_front() else {
            return Err(WireError::Protocol {
                broker: self.broker.clone(),
                api: "response",
                message: "a response arrived with no request outstanding".to_string(),
            });
        };
        let key = ApiKey::try_from(expected.api_key)
            .map_err(|_| self.protocol(expected.api_key, "unknown API key".into()))?;
        let header = ResponseHeader::decode(
            &mut frame,
            key.response_header_version(expected.api_version),
        )
        .map_err(|e| self.protocol(expected.api_key, format!("bad response header: {e}")))?;
        if header.correlation_id != expected.correlation_id {
            return Err(self.protocol(
                expected.api_key,
                format!(
                    "correlation id {} does not match the oldest request ({})",
                    header.correlation_id, expected.correlation_id
                ),
            ));
        }
        Ok(Response {
            correlation_id: expected.correlation_id,
            api_key: expected.api_key,
            api_version: expected.api_version,
            body: frame,
        })
    }

    fn start_api_versions(&mut self, version: i16) -> Result<(), WireError> {
        self.phase = Phase::ApiVersions { version };
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("strait"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        self.queue_request(&req, version).map(|_| ())
    }

    fn on_api_versions(&mut self, resp: Response, version: i16) -> Result<(), WireError> {
        // error_code is the first field in every version; when the broker rejects our version it
        // answers in v0, listing the versions it does support.
        let error_code = resp
            .body
            .get(..2)
            .map(|b| i16::from_be_bytes([b[0], b[1]]))
            .unwrap_or(-1);
        if error_code == UNSUPPORTED_VERSION && version > 0 {
            let mut body = resp.body;
            let v0 = ApiVersionsResponse::decode(&mut body, 0)
                .map_err(|e| self.protocol(resp.api_key, format!("bad v0 response: {e}")))?;
            let theirs = ApiVersions::from_response(&v0);
            let retry = theirs
                .broker_range(ApiKey::ApiVersions as i16)
                .map(|r| r.max.min(version - 1))
                .unwrap_or(0);
            return self.start_api_versions(retry.max(0));
        }
        let decoded: ApiVersionsResponse = resp.decode::<ApiVersionsRequest>(&self.broker)?;
        if decoded.error_code != 0 {
            return Err(self.protocol(
                ApiKey::ApiVersions as i16,
                format!("ApiVersions failed with error code {}", decoded.error_code),
            ));
        }
        self.versions = ApiVersions::from_response(&decoded);
        match self.sasl_config.clone() {
            None => self.become_ready(),
            Some(cfg) => {
                self.phase = Phase::SaslHandshake;
                let version = self.negotiate::<SaslHandshakeRequest>()?;
                let req = SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_static_str(cfg.mechanism.name()));
                let client = SaslClient::new(
                    &cfg,
                    std::mem::take(&mut self.scram_nonce),
                    self.bearer_token.take().as_ref(),
                )
                .map_err(|e| WireError::Authentication {
                    broker: self.broker.clone(),
                    mechanism: cfg.mechanism.name().to_string(),
                    message: e.to_string(),
                })?;
                self.queue_request(&req, version)?;
                self.sasl = Some(client);
                Ok(())
            }
        }
    }

    fn on_sasl_handshake(&mut self, resp: Response) -> Result<(), WireError> {
        let decoded: SaslHandshakeResponse = resp.decode::<SaslHandshakeRequest>(&self.broker)?;
        let mechanism = self.sasl_config.as_ref().map_or("", |c| c.mechanism.name());
        match decoded.error_code {
            0 => {}
            UNSUPPORTED_SASL_MECHANISM => {
                return Err(WireError::Authentication {
                    broker: self.broker.clone(),
                    mechanism: mechanism.to_string(),
                    message: format!(
                        "the broker does not enable {mechanism} on this listener; it offers [{}]",
                        decoded
                            .mechanisms
                            .iter()
                            .map(|m| m.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
            ILLEGAL_SASL_STATE => {
                return Err(WireError::Authentication {
                    broker: self.broker.clone(),
                    mechanism: mechanism.to_string(),
                    message: "the broker is not expecting SASL here (is this a SASL listener?)"
                        .to_string(),
                });
            }
            code => {
                return Err(self.protocol(
                    ApiKey::SaslHandshake as i16,
                    format!("SaslHandshake failed with error code {code}"),
                ));
            }
        }
        self.phase = Phase::SaslAuthenticate;
        let first = self
            .sasl
            .as_mut()
            .map(SaslClient::start)
            .unwrap_or_default();
        self.send_sasl_bytes(first)
    }

    fn send_sasl_bytes(&mut self, bytes: Vec<u8>) -> Result<(), WireError> {
        let version = self.negotiate::<SaslAuthenticateRequest>()?;
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
        self.queue_request(&req, version).map(|_| ())
    }

    fn on_sasl_authenticate(&mut self, resp: Response) -> Result<(), WireError> {
        let decoded: SaslAuthenticateResponse =
            resp.decode::<SaslAuthenticateRequest>(&self.broker)?;
        let mechanism = self
            .sasl_config
            .as_ref()
            .map_or("", |c| c.mechanism.name())
            .to_string();
        if decoded.error_code != 0 {
            let mut detail = decoded
                .error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_else(|| format!("error code {}", decoded.error_code));
            if let Some(said) = self.sasl.as_ref().and_then(SaslClient::server_error) {
                detail = format!("{detail}; the broker said {said}");
            }
            return Err(WireError::Authentication {
                broker: self.broker.clone(),
                mechanism,
                message: detail,
            });
        }
        self.session_lifetime_ms = decoded.session_lifetime_ms;
        let Some(client) = self.sasl.as_mut() else {
            return Err(self.protocol(resp_key_sasl(), "no SASL exchange in progress".into()));
        };
        match client.step(&decoded.auth_bytes) {
            Ok(Some(next)) => self.send_sasl_bytes(next),
            Ok(None) => {
                self.sasl = None;
                self.become_ready()
            }
            Err(e) => Err(WireError::Authentication {
                broker: self.broker.clone(),
                mechanism,
                message: e.to_string(),
            }),
        }
    }

    fn become_ready(&mut self) -> Result<(), WireError> {
        self.phase = Phase::Ready;
        self.events.push_back(Event::Ready);
        Ok(())
    }

    fn negotiate<R: Request>(&self) -> Result<i16, WireError> {
        self.versions
            .negotiate::<R>()
            .map_err(|m| WireError::UnsupportedVersion {
                broker: self.broker.clone(),
                api: api_name(m.api_key),
                ours: (m.ours.min, m.ours.max),
                theirs: m.theirs.map(|t| (t.min, t.max)),
            })
    }

    fn protocol(&self, api_key: i16, message: String) -> WireError {
        WireError::Protocol {
            broker: self.broker.clone(),
            api: api_name(api_key),
            message,
        }
    }
}

fn resp_key_sasl() -> i16 {
    ApiKey::SaslAuthenticate as i16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::config::SaslMechanism;
    use bytes::BufMut;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
    use kafka_protocol::protocol::HeaderVersion;

    /// A scripted broker for the sans-IO tests: it decodes our frames and answers them.
    struct FakeBroker {
        decoder: FrameDecoder,
    }

    impl FakeBroker {
        fn new() -> Self {
            FakeBroker {
                decoder: FrameDecoder::new(1 << 20),
            }
        }

        /// Feeds client bytes; returns the decoded (header, body) requests.
        fn requests(&mut self, segs: Segments) -> Vec<(RequestHeader, Bytes)> {
            self.decoder
                .buffer_mut()
                .extend_from_slice(&segs.to_contiguous());
            let mut out = Vec::new();
            while let Some(mut f) = self.decoder.next_frame().unwrap() {
                let h =
                    kafka_protocol::protocol::decode_request_header_from_buffer(&mut f).unwrap();
                out.push((h, f));
            }
            out
        }
    }

    fn respond<R: Encodable>(corr: i32, header_version: i16, body: &R, version: i16) -> BytesMut {
        let mut b = BytesMut::new();
        b.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(corr)
            .encode(&mut b, header_version)
            .unwrap();
        body.encode(&mut b, version).unwrap();
        let size = (b.len() - 4) as i32;
        b[..4].copy_from_slice(&size.to_be_bytes());
        b
    }

    fn versions_response() -> ApiVersionsResponse {
        let mut r = ApiVersionsResponse::default();
        for (k, min, max) in [
            (ApiKey::ApiVersions, 0, 4),
            (ApiKey::Metadata, 0, 13),
            (ApiKey::SaslHandshake, 0, 1),
            (ApiKey::SaslAuthenticate, 0, 2),
        ] {
            r.api_keys.push(
                ApiVersion::default()
                    .with_api_key(k as i16)
                    .with_min_version(min)
                    .with_max_version(max),
            );
        }
        r
    }

    fn params(sasl: Option<SaslConfig>) -> ConnectionParams {
        ConnectionParams {
            broker: "127.0.0.1:9092".into(),
            client_id: "test".into(),
            tls: None,
            sasl,
            scram_nonce: "nonce".into(),
            bearer_token: None,
            max_response_bytes: 1 << 20,
        }
    }

    /// Delivers `bytes` to the connection in pieces of `chunk` bytes.
    fn deliver(conn: &mut Connection, bytes: &[u8], chunk: usize) -> Result<(), WireError> {
        for piece in bytes.chunks(chunk.max(1)) {
            let mut buf = conn.read_buf();
            buf.extend_from_slice(piece);
            conn.handle_read(buf)?;
        }
        Ok(())
    }

    #[test]
    fn plaintext_handshake_then_pipelined_requests() {
        let mut conn = Connection::new(params(None)).unwrap();
        let mut broker = FakeBroker::new();
        let reqs = broker.requests(conn.poll_transmit().unwrap());
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].0.request_api_key, ApiKey::ApiVersions as i16);
        assert_eq!(reqs[0].0.request_api_version, 4);
        let resp = respond(reqs[0].0.correlation_id, 0, &versions_response(), 4);
        deliver(&mut conn, &resp, 7).unwrap();
        assert!(matches!(conn.poll_event(), Some(Event::Ready)));
        assert!(conn.is_ready());

        // Two requests in flight; answers delivered in one read.
        let v = conn.versions().negotiate::<MetadataRequest>().unwrap();
        assert_eq!(v, 12);
        let a = conn.send(&MetadataRequest::default(), v).unwrap();
        let b = conn.send(&MetadataRequest::default(), v).unwrap();
        assert_eq!(conn.in_flight(), 2);
        let reqs = broker.requests(conn.poll_transmit().unwrap());
        assert_eq!(reqs.len(), 2);
        let hv = MetadataResponse::header_version(v);
        let mut both = respond(
            a,
            hv,
            &MetadataResponse::default().with_throttle_time_ms(1),
            v,
        );
        both.extend_from_slice(&respond(
            b,
            hv,
            &MetadataResponse::default().with_throttle_time_ms(2),
            v,
        ));
        deliver(&mut conn, &both, 1000).unwrap();
        for (corr, throttle) in [(a, 1), (b, 2)] {
            let Some(Event::Response(r)) = conn.poll_event() else {
                panic!("expected a response")
            };
            assert_eq!(r.correlation_id, corr);
            let m = r.decode::<MetadataRequest>("b").unwrap();
            assert_eq!(m.throttle_time_ms, throttle);
        }
        assert_eq!(conn.in_flight(), 0);
    }

    #[test]
    fn falls_back_when_broker_rejects_api_versions_version() {
        let mut conn = Connection::new(params(None)).unwrap();
        let mut broker = FakeBroker::new();
        let reqs = broker.requests(conn.poll_transmit().unwrap());
        // Old broker: answers v0 with UNSUPPORTED_VERSION and its range for ApiVersions (0..2).
        let mut r = ApiVersionsResponse::default().with_error_code(UNSUPPORTED_VERSION);
        r.api_keys.push(
            ApiVersion::default()
                .with_api_key(ApiKey::ApiVersions as i16)
                .with_min_version(0)
                .with_max_version(2),
        );
        deliver(&mut conn, &respond(reqs[0].0.correlation_id, 0, &r, 0), 100).unwrap();
        let reqs = broker.requests(conn.poll_transmit().unwrap());
        assert_eq!(reqs[0].0.request_api_version, 2);
        deliver(
            &mut conn,
            &respond(reqs[0].0.correlation_id, 0, &versions_response(), 2),
            100,
        )
        .unwrap();
        assert!(matches!(conn.poll_event(), Some(Event::Ready)));
    }

    /// A PLAIN connection for `alice` with `password`, driven through ApiVersions and the SASL
    /// handshake; returns it with the broker and its SaslAuthenticate request, to be answered.
    fn up_to_sasl_authenticate(password: &str) -> (Connection, FakeBroker, (RequestHeader, Bytes)) {
        let sasl = SaslConfig::password(SaslMechanism::Plain, "alice", Secret::new(password));
        let mut conn = Connection::new(params(Some(sasl))).unwrap();
        let mut broker = FakeBroker::new();
        let reqs = broker.requests(conn.poll_transmit().unwrap());
        deliver(
            &mut conn,
            &respond(reqs[0].0.correlation_id, 0, &versions_response(), 4),
            64,
        )
        .unwrap();
        let reqs = broker.requests(conn.poll_transmit().unwrap());
        assert_eq!(reqs[0].0.request_api_key, ApiKey::SaslHandshake as i16);
        let hs = SaslHandshakeResponse::default();
        deliver(&mut conn, &respond(reqs[0].0.correlation_id, 0, &hs, 1), 64).unwrap();
        let mut reqs = broker.requests(conn.poll_transmit().unwrap());
        assert_eq!(reqs[0].0.request_api_key, ApiKey::SaslAuthenticate as i16);
        let auth = reqs.swap_remove(0);
        (conn, broker, auth)
    }

    #[test]
    fn sasl_failure_is_an_authentication_error() {
        let (mut conn, _broker, auth_req) = up_to_sasl_authenticate("wrong");
        let mut body = auth_req.1.clone();
        let auth = SaslAuthenticateRequest::decode(&mut body, 2).unwrap();
        assert_eq!(&auth.auth_bytes[..], b"\0alice\0wrong");
        let fail = SaslAuthenticateResponse::default()
            .with_error_code(58)
            .with_error_message(Some(StrBytes::from_static_str(
                "Authentication failed: Invalid username or password",
            )));
        let err = deliver(
            &mut conn,
            &respond(auth_req.0.correlation_id, 1, &fail, 2),
            64,
        )
        .unwrap_err();
        assert!(matches!(err, WireError::Authentication { .. }), "{err}");
        assert!(err.to_string().contains("Invalid username or password"));
        assert!(err.to_string().contains("127.0.0.1:9092"));
    }

    #[test]
    fn a_limited_sasl_session_is_reported_and_named_when_the_broker_closes() {
        let (mut conn, _broker, (header, _)) = up_to_sasl_authenticate("alice-secret");
        let ok = SaslAuthenticateResponse::default().with_session_lifetime_ms(4_000);
        deliver(&mut conn, &respond(header.correlation_id, 1, &ok, 2), 64).unwrap();
        assert!(matches!(conn.poll_event(), Some(Event::Ready)));
        assert_eq!(conn.session_lifetime_ms(), Some(4_000));

        conn.send(&MetadataRequest::default(), 12).unwrap();
        let text = conn.handle_eof().to_string();
        assert!(
            text.contains("connections.max.reauth.ms") && text.contains("4000 ms"),
            "{text}"
        );
    }

    #[test]
    fn mismatched_correlation_id_is_a_protocol_error() {
        let mut conn = Connection::new(params(None)).unwrap();
        let mut broker = FakeBroker::new();
        let reqs = broker.requests(conn.poll_transmit().unwrap());
        let err = deliver(
            &mut conn,
            &respond(reqs[0].0.correlation_id + 5, 0, &versions_response(), 4),
            100,
        )
        .unwrap_err();
        assert!(err.to_string().contains("correlation id"), "{err}");
        assert!(conn.send(&MetadataRequest::default(), 1).is_err());
    }

    /// A count or length off the wire larger than the bytes left is an error before anything is
    /// allocated (kafka-protocol as published would reserve the count and abort the process;
    /// see vendor/README.md).
    #[test]
    fn hostile_counts_and_lengths_are_errors_not_allocations() {
        let response = |version: i16, body: &[u8]| Response {
            correlation_id: 1,
            api_key: MetadataRequest::KEY,
            api_version: version,
            body: Bytes::copy_from_slice(body),
        };
        // v1: the brokers array claims i32::MAX entries.
        let mut v1 = Vec::new();
        v1.put_i32(i32::MAX);
        v1.put_slice(&[0; 16]);
        // v12 (flexible): throttle time, then a compact array of u32::MAX - 1 brokers.
        let mut v12 = Vec::new();
        v12.put_i32(0);
        v12.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        v12.put_slice(&[0; 16]);
        // v1: one broker whose host name claims 32 767 bytes.
        let mut host = Vec::new();
        host.put_i32(1);
        host.put_i32(7);
        host.put_i16(i16::MAX);
        host.put_slice(b"broker");
        for (version, body, says) in [
            (1, v1, "bytes left"),
            (12, v12, "bytes left"),
            (1, host, "Not enough bytes"),
        ] {
            let err = response(version, &body)
                .decode::<MetadataRequest>("127.0.0.1:9092")
                .unwrap_err();
            let text = err.to_string();
            assert!(text.contains(says), "{text}");
            assert!(
                text.contains("127.0.0.1:9092") && text.contains("Metadata"),
                "{text}"
            );
        }
    }

    /// The SASL hint only where it can be right: the first request of a plaintext connection.
    #[test]
    fn the_sasl_hint_is_given_only_when_a_new_connection_closes_at_once() {
        let ready = || {
            let mut conn = Connection::new(params(None)).unwrap();
            let mut broker = FakeBroker::new();
            let reqs = broker.requests(conn.poll_transmit().unwrap());
            let resp = respond(reqs[0].0.correlation_id, 0, &versions_response(), 4);
            deliver(&mut conn, &resp, 64).unwrap();
            assert!(matches!(conn.poll_event(), Some(Event::Ready)));
            (conn, broker)
        };
        // A SASL listener closes the connection at our first request.
        let (mut conn, _) = ready();
        conn.send(&MetadataRequest::default(), 12).unwrap();
        let text = conn.handle_eof().to_string();
        assert!(text.contains("does the listener expect SASL"), "{text}");

        // A broker shutting down after answering: no hint.
        let (mut conn, mut broker) = ready();
        let a = conn.send(&MetadataRequest::default(), 12).unwrap();
        broker.requests(conn.poll_transmit().unwrap());
        let hv = MetadataResponse::header_version(12);
        deliver(
            &mut conn,
            &respond(a, hv, &MetadataResponse::default(), 12),
            64,
        )
        .unwrap();
        conn.send(&MetadataRequest::default(), 12).unwrap();
        let text = conn.handle_eof().to_string();
        assert!(text.contains("1 request(s) unanswered"), "{text}");
        assert!(!text.contains("SASL"), "{text}");

        // Nothing in flight: just closed.
        let (mut conn, _) = ready();
        assert_eq!(
            conn.handle_eof().to_string(),
            "connection to broker 127.0.0.1:9092 closed: closed by the broker"
        );
    }

    #[test]
    fn requests_before_ready_are_refused() {
        let mut conn = Connection::new(params(None)).unwrap();
        assert!(conn.send(&MetadataRequest::default(), 1).is_err());
    }
}
