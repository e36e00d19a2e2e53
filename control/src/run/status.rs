//! The run as the API shows it: every flow's partitions with position, lag and state, and the
//! shards' counters.

use std::collections::HashMap;

use strait_dataplane::shard::ShardStats;

use super::assign::Partitions;
use super::unheld::Unheld;
use super::{FlowRuntime, RunOptions};
use crate::api::{ApiState, FlowStatus, PartitionStatus, ShardStatus, Status};

/// The API's view of the run: the partitions the shards hold, and those of a member out of
/// its group (`unheld`).
pub(super) fn status(
    flows: &[FlowRuntime],
    parts: &Partitions,
    unheld: &Unheld,
    stats: &HashMap<usize, ShardStats>,
    opts: &RunOptions,
) -> Status {
    let mut out: Vec<FlowStatus> = flows
        .iter()
        .map(|f| FlowStatus {
            name: format!("{}->{}", f.plan.source, f.plan.target),
            ..FlowStatus::default()
        })
        .collect();
    for (key, st) in parts {
        let Some(f) = out.get_mut(key.flow as usize) else {
            continue;
        };
        let state = if st.failed.is_some() {
            "failed"
        } else if st.paused || st.vanished {
            "paused"
        } else {
            "replicating"
        };
        f.partitions.push(PartitionStatus {
            topic: key.topic.to_string(),
            partition: key.partition,
            remote_topic: (flows[key.flow as usize].plan.remote_name)(&key.topic),
            next_offset: st.next_offset,
            end_offset: st.end_offset,
            lag: if st.end_offset >= 0 {
                (st.end_offset - st.next_offset).max(0)
            } else {
                0
            },
            state: state.to_string(),
            error: st.failed.clone(),
            shard: st.shard,
            // Set from the operator's holds by the API link.
            api_state: ApiState::Running,
            since_ms: 0,
            records_copied: st.records_copied,
            ..PartitionStatus::default()
        });
    }
    unheld.list(&mut out, flows, parts);
    let mut shard_status: Vec<ShardStatus> = stats
        .iter()
        .map(|(i, s)| ShardStatus::from_stats(*i, s))
        .collect();
    shard_status.sort_by_key(|s| s.shard);
    let mut out = Status {
        version: env!("CARGO_PKG_VERSION").to_string(),
        io_backend: opts.backend.name().to_string(),
        flows: out,
        shards: shard_status,
        lost_position_resets: flows.iter().map(|f| f.lost_position_resets).sum(),
        ..Status::default()
    };
    super::observe::fill(&mut out, flows, stats, opts, super::now_ms());
    out
}

/// Adds one shard's counters to `total`.
pub(super) fn add_stats(total: &mut ShardStats, s: &ShardStats) {
    total.fetch_requests += s.fetch_requests;
    total.fetch_bytes += s.fetch_bytes;
    total.produce_requests += s.produce_requests;
    total.produced_batches += s.produced_batches;
    total.produced_records += s.produced_records;
    total.produced_bytes += s.produced_bytes;
    total.fast_batches += s.fast_batches;
    total.slow_batches += s.slow_batches;
    total.slow_bytes += s.slow_bytes;
    total.merged_batches += s.merged_batches;
    total.merges += s.merges;
    total.slow_reasons.add(&s.slow_reasons);
    total.dropped_control += s.dropped_control;
    total.dropped_aborted += s.dropped_aborted;
    total.produce_retries += s.produce_retries;
    total.reconnects += s.reconnects;
    total.buffered_bytes += s.buffered_bytes;
    total.request_timeouts += s.request_timeouts;
    total.memory_budget_bytes += s.memory_budget_bytes;
    strait_dataplane::shard::timing::add_timings(&mut total.timings, &s.timings);
}
