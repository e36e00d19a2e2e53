//! Shared helpers for perf benches.
