//! The periodic work of the control loop. Each duty decides what is due at an instant with a
//! pure `due(now)` and does it with `tick` (which awaits the clusters); the control loop calls
//! `tick` every turn.
//!
//! - [`topics`]: discovery, remote topic creation and growth, config and ACL sync (its pure
//!   decisions in [`topics::decide`]).
//! - [`offsets`]: offset syncs, checkpoints and group-offset sync of one flow.
//! - [`heartbeats`]: MM2's heartbeats for every herder pair.
//! - [`liveness`]: the flow's liveness record, so import and export refuse while it runs.
//! - [`exactly_once`]: transactions of the partitions forwarded exactly-once.
//! - [`recovery`]: at start, skipping what the target provably holds after an unclean stop.

pub mod exactly_once;
pub mod heartbeats;
pub mod liveness;
pub mod offsets;
pub mod recovery;
pub mod topics;
