//! strait data plane.
//!
//! - [`wire`]: a sans-IO Kafka connection (framing, correlation ids, ApiVersions negotiation,
//!   TLS through rustls, SASL PLAIN and SCRAM). It takes bytes in and gives bytes out; it owns no
//!   socket and reads no clock.
//! - [`io`]: the two IO drivers behind one [`io::Transport`] trait (tokio-uring and tokio
//!   current_thread on epoll), backend selection, core pinning, and [`io::BrokerConn`], the async
//!   connection that both the control plane and the shards use.
//! - [`batch`]: the v2 record-batch header walker, in-place header rewrite with CRC patching,
//!   and the slow-path rebuild.
//! - [`shard`]: the per-core fetch and produce pipelines.
//!
//! No module needs `unsafe`: tokio-uring's owned buffers and `core_affinity` wrap the kernel
//! interfaces, so the whole crate forbids it.
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

pub mod batch;
pub mod io;
pub mod shard;
pub mod wire;
