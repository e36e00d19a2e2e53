//! Internal-topic IO: everything strait reads from or writes to the small topics that hold its
//! state and MM2's.
//!
//! - [`records`]: read a partition to its end or over a range, append a batch of records.
//! - [`progress`]: strait's progress per source partition (`strait-progress.<source>.internal`).
//! - [`mapping`]: the exact offset mapping stored with the progress, in chunks.
//! - [`liveness`]: the liveness record kept in the progress topic, and judging it.
//! - [`failover`]: which topics of a flow were failed over (`strait-failover.internal`).
//! - [`topics`]: creating the compacted single-partition topics strait and MM2 use.
//! - [`checkpoints`], [`offset_syncs`]: reading MM2's checkpoints and offset syncs back at start.

pub mod checkpoints;
pub mod failover;
pub mod liveness;
pub mod mapping;
pub mod offset_syncs;
pub mod progress;
pub mod records;
pub mod topics;
