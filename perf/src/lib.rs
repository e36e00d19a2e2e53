//! Shared helpers for perf benches.
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]
