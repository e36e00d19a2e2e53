//! strait-bench: a load generator, a measuring consumer and an end-to-end harness that runs
//! strait and MirrorMaker 2 on the same brokers and records throughput, latency, CPU and
//! memory. See `perf/README.md` for how to run it and how to read the results.
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

pub mod consumer;
pub mod group;
pub mod kafka;
pub mod kernel;
pub mod link;
pub mod load;
pub mod machine;
pub mod payload;
pub mod procfs;
pub mod producer;
pub mod readme;
pub mod relay;
pub mod replicator;
pub mod report;
pub mod restore;
pub mod run;
pub mod scenario;
pub mod stats;
