//! The CLI commands besides `run` (the binary parses arguments and maps results to exit codes):
//!
//! - [`migrate`]: `strait offsets import-mm2` and `export-mm2`.
//! - [`translate`]: `strait offsets translate`.
//! - [`verify`]: `strait verify`, record-level proof of the copy.
//! - [`drill`]: `strait drill`, the failover rehearsal for one group.
//! - [`ctl`]: `strait ctl`, the REST API's client.
//! - [`preflight`]: `strait check --connect`, the permissions each flow needs on its clusters.
//!
//! `strait check` is [`crate::config::check()`]: it is the config's own report.

pub mod ctl;
pub mod drill;
pub mod migrate;
pub mod preflight;
pub mod translate;
pub mod verify;
