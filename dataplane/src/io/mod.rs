//! IO drivers: one [`Transport`] trait with an io_uring driver (tokio-uring) and an epoll
//! driver (tokio `current_thread`), backend selection with an explained fallback, core pinning,
//! and [`BrokerConn`], the pipelined async connection used by both planes.
//!
//! No `unsafe` is needed here: tokio-uring's owned-buffer API keeps buffers alive for the
//! kernel, and `core_affinity` wraps the affinity syscalls.
#![forbid(unsafe_code)]

pub mod conn;
pub mod runtime;
pub mod token;
pub mod transport;

pub use conn::{BrokerConn, ConnSetup, PendingResponse};
pub use runtime::{IoBackend, IoChoice, Selection, block_on, select_backend};
pub use transport::{EpollTcp, Transport, UringTcp};
