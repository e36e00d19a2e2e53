//! What the exact offset mapping costs per run, in memory and stored: one place for the figures
//! and bounds that `offsets::mapping` and `store::mapping` are built to and the config layer
//! checks and prints.

/// Default bound on runs per partition (`strait.mapping.max.runs.per.partition`).
pub const DEFAULT_MAX_SEGMENTS: usize = 1024;

/// Smallest allowed bound on runs per partition: thinning needs `K >= 1` run per level.
pub const MIN_MAX_SEGMENTS: usize = 256;

/// Largest allowed bound on runs per partition: a rewrite after thinning stays well under a
/// produce request's size (half of it, about 40 bytes a run stored).
pub const MAX_MAX_SEGMENTS: usize = 16_384;

/// Memory of one run (`offsets::mapping::Segment`: three `i64` and flags, padded).
pub const RUN_MEMORY_BYTES: usize = 32;

/// Upper bound on a partition mapping's fixed part (its struct, without the run buffer);
/// `offsets::mapping` asserts its real size stays under it.
pub const PARTITION_MAPPING_FIXED_BYTES: usize = 128;

/// The most bytes one run takes stored: three 19-digit offsets, `[`, `]`, commas and the
/// inexact-gap marker (typical runs take 20 to 35).
pub const MAX_STORED_RUN_BYTES: usize = 3 * 19 + 6 + 2;

/// Worst-case memory of one partition's mapping bounded to `max_runs` runs: the run buffer is a
/// `VecDeque` whose capacity grows by doubling.
pub fn worst_case_memory_bytes(max_runs: usize) -> usize {
    RUN_MEMORY_BYTES * max_runs.next_power_of_two() + PARTITION_MAPPING_FIXED_BYTES
}

/// Most bytes one partition's mapping takes stored with `max_runs` runs.
pub fn worst_case_stored_bytes(max_runs: usize) -> usize {
    MAX_STORED_RUN_BYTES * max_runs
}
