//! strait control plane: MM2 configuration, the admin client, replication policies and filters,
//! topic management, offset translation, heartbeats, progress, the REST API and metrics.
//!
//! Layers, top first; a module uses only modules below it (`tests/layers.rs` checks this and
//! that no module cycle exists):
//!
//! | layer | modules | duty |
//! |---|---|---|
//! | commands | [`commands`] | `strait offsets import-mm2/export-mm2/translate`, `strait verify`, `strait ctl`, `strait check --connect` (`check` is [`config::check()`]) |
//! | run | [`run`] | `strait run`: start-up, the control loop, assignment, shard events, shutdown |
//! | duties, api | [`duties`], [`api`] | periodic work (`due(now)` then `tick`); REST and `/metrics` |
//! | verify | [`verify`] | record-by-record comparison of a partition with its copy over the stored mapping |
//! | plan | [`plan`] | a resolved flow reduced to what the control loop runs |
//! | store | [`store`] | internal-topic IO: records, progress, liveness, topic creation, loading MM2's topics |
//! | cluster, offsets | [`cluster`], [`offsets`] | the admin client (and group calls); offset formats, mapping and translation (pure) |
//! | group | [`group`] | groups of instances: member codec, assignment, membership, config digest (pure) |
//! | config | [`config`] | `mm2.properties` with MM2's rules |
//! | mm2 | [`mm2`] | replication policies and filters (pure) |
//! | model, time | [`model`], [`time`] | value types; the `Every` timer (pure) |
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

pub mod api;
pub mod cluster;
pub mod commands;
// config/ long functions carry their own allow (issue 12: long functions left).
pub mod config;
pub mod duties;
pub mod group;
pub mod mm2;
pub mod model;
pub mod offsets;
pub mod plan;
pub mod run;
pub mod store;
pub mod time;
pub mod verify;
