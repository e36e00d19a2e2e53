//! strait control plane: MM2 configuration, the admin client, replication policies and filters,
//! topic management, offset translation, heartbeats, progress, the REST API and metrics.
#![forbid(unsafe_code)]

pub mod api;
pub mod cluster;
pub mod config;
pub mod filter;
pub mod heartbeat;
pub mod internal;
pub mod migrate;
pub mod offsets;
pub mod plan;
pub mod policy;
pub mod progress;
pub mod recover;
pub mod replicate;
pub mod topics;
pub mod translate;
