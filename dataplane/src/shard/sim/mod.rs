//! A deterministic simulation of one shard: the real [`ShardCore`] and partition state machines,
//! an in-memory transport, and fake source and target clusters (two brokers each) that keep
//! real record batches and check the target's idempotence rules as a Kafka broker does. A
//! seeded schedule interleaves requests, answers (in any order), the passing of time and
//! faults: dropped connections, slow and black-holed brokers, brokers down, leader moves and
//! elections, NOT_ENOUGH_REPLICAS (before and after the append), answers lost after the broker
//! wrote, reassignment of a partition inside the shard, pauses, a full control channel, a lapsed group
//! session (the lease ends, every partition is revoked; no Produce may follow). The source
//! brokers keep fetch sessions (KIP-227) and sometimes refuse one (cache full), evict one or
//! refuse its epoch.
//!
//! After every step it checks: the target log of every partition holds the source records in
//! source order, each once, with no gap (the fake broker refuses a sequence gap); every
//! reported mapping segment and target position matches the target log; the shard's memory
//! stays within its budget; no partition fails; a partition that makes no progress for a
//! while says why. Once the faults stop, everything must be replicated within a bounded time.
//!
//! `cargo test -p strait-dataplane --lib shard::sim` runs `STRAIT_SIM_SEEDS` seeds (default
//! 2 000); a failure prints its seed and the last steps, and `STRAIT_SIM_SEED=<seed>` replays
//! exactly that run.

mod world;

use world::{Outcome, World};

/// Seeds run by default: a few seconds in a debug build.
const DEFAULT_SEEDS: u64 = 2_000;

/// What one thread's share of the seeds gave: totals, steps, and its first failure (seed, why).
type Share = (world::Totals, usize, Option<(u64, String)>);

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn run_seed(seed: u64, tracing: bool) -> Outcome {
    World::new(seed, tracing).run()
}

#[test]
fn thousands_of_seeded_fault_schedules_lose_reorder_and_duplicate_nothing() {
    if let Some(seed) = env_u64("STRAIT_SIM_SEED") {
        let out = run_seed(seed, true);
        println!("{}", out.trace);
        assert!(
            out.failure.is_none(),
            "seed {seed}: {}",
            out.failure.unwrap_or_default()
        );
        return;
    }
    let seeds = env_u64("STRAIT_SIM_SEEDS").unwrap_or(DEFAULT_SEEDS);
    let first = env_u64("STRAIT_SIM_FIRST_SEED").unwrap_or(1);
    // Seeds are independent: spread them over the cores there are (whatever their number).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let results: Vec<Share> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Share {
                    let mut stats = world::Totals::default();
                    let mut steps = 0;
                    for seed in (first..first + seeds).filter(|x| x % threads == t) {
                        let out = run_seed(seed, false);
                        stats.add(&out);
                        steps += out.steps;
                        if let Some(f) = out.failure {
                            return (stats, steps, Some((seed, f)));
                        }
                    }
                    (stats, steps, None)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a seed thread"))
            .collect()
    });
    let mut stats = world::Totals::default();
    let mut steps = 0;
    let mut failures = Vec::new();
    for (st, n, f) in results {
        stats.merge(&st);
        steps += n;
        failures.extend(f);
    }
    if let Some((seed, f)) = failures.into_iter().min_by_key(|(seed, _)| *seed) {
        // The same seed again, keeping the trace this time.
        let out = run_seed(seed, true);
        assert_eq!(
            out.failure.as_deref(),
            Some(f.as_str()),
            "seed {seed} replays"
        );
        panic!(
            "simulation failed for seed {seed}: {f}\nlast steps:\n{}\nreplay: STRAIT_SIM_SEED={seed} cargo test -p strait-dataplane --lib shard::sim -- --nocapture",
            out.trace
        );
    }
    println!("{seeds} seeds, {steps} steps: {stats}");
    // The schedules must really exercise the faults they are meant to.
    assert!(stats.faults > seeds, "{stats}");
    assert!(
        stats.produce_retries > 0 && stats.reconnects > 0 && stats.timeouts > 0,
        "{stats}"
    );
    assert!(
        stats.stalls_seen > 0 && stats.reassignments > 0 && stats.lapses > 0,
        "{stats}"
    );
    // Partitions behind grow their fetch size (within the bound checked at every fetch).
    assert!(stats.grown_asks > 0, "{stats}");
    // The transactional partition went through commit cycles.
    assert!(stats.commits > seeds, "{stats}");
    // Fetch sessions are used, and refused, evicted and answered with wrong epochs.
    assert!(
        stats.incremental_fetches > seeds && stats.session_faults > seeds,
        "{stats}"
    );
}

#[test]
fn a_seed_replays_exactly() {
    let a = run_seed(42, true);
    let b = run_seed(42, true);
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.steps, b.steps);
}
