//! Prometheus `/metrics`: the status snapshot encoded by `prometheus-client` in text exposition
//! format 0.0.4. Every metric, its labels and its cardinality are listed in `docs/metrics.md`
//! (a test checks that the list and [`FAMILIES`] agree).
//!
//! The numbers are the control loop's snapshot (built for the scrape, at most 200 ms old), not
//! live counters: the shards count on plain integers of their own and report them every 200 ms
//! (every second when idle), so nothing
//! here touches the data path. `strait_status_age_seconds` says how old the snapshot is.

use std::collections::BTreeMap;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use strait_dataplane::shard::LatencyHistogram;
use strait_dataplane::shard::timing::BOUNDS_MS;

use crate::model::counters::TxnCounters;

use super::status::{
    ApiState, FlowStatus, PartitionStatus, PartitionVerification, ShardStatus, Status,
};

/// Every family `/metrics` can export (names as exposed: counters end in `_total`,
/// histograms add `_bucket`, `_sum` and `_count`).
pub const FAMILIES: &[&str] = &[
    "strait_info",
    "strait_status_age_seconds",
    "strait_lost_position_resets_total",
    "strait_fetch_requests_total",
    "strait_fetch_bytes_total",
    "strait_full_fetches_total",
    "strait_incremental_fetches_total",
    "strait_fetch_session_resets_total",
    "strait_produce_requests_total",
    "strait_produced_batches_total",
    "strait_produced_records_total",
    "strait_produced_bytes_total",
    "strait_fast_path_batches_total",
    "strait_slow_path_batches_total",
    "strait_slow_path_bytes_total",
    "strait_merged_batches_total",
    "strait_merges_total",
    "strait_dropped_control_batches_total",
    "strait_dropped_aborted_batches_total",
    "strait_produce_retries_total",
    "strait_reconnects_total",
    "strait_request_timeouts_total",
    "strait_slow_path_batches_by_reason_total",
    "strait_buffered_bytes",
    "strait_memory_budget_bytes",
    "strait_shard_commands_waiting",
    "strait_record_age_seconds",
    "strait_replication_latency_seconds",
    "strait_flow_records_copied_total",
    "strait_flow_bytes_copied_total",
    "strait_flow_lag_records",
    "strait_flow_lag_seconds",
    "strait_flow_partitions",
    "strait_flow_stalled_partitions",
    "strait_flow_verified_records_total",
    "strait_flow_verify_mismatches_total",
    "strait_flow_delivery",
    "strait_transactions_committed_total",
    "strait_transactions_aborted_total",
    "strait_transactions_fenced_total",
    "strait_transaction_partitions",
    "strait_transaction_commit_latency_seconds",
    "strait_offset_syncs_written_total",
    "strait_offset_sync_errors_total",
    "strait_checkpoint_rounds_total",
    "strait_checkpoints_written_total",
    "strait_checkpoint_errors_total",
    "strait_checkpoint_skips_total",
    "strait_checkpoint_latency_seconds",
    "strait_group_sync_rounds_total",
    "strait_groups_synced_total",
    "strait_groups_skipped_total",
    "strait_group_sync_errors_total",
    "strait_sync_rounds_total",
    "strait_sync_changes_total",
    "strait_sync_errors_total",
    "strait_heartbeats_written_total",
    "strait_heartbeat_errors_total",
    "strait_heartbeat_read_back_age_seconds",
    "strait_partition_next_offset",
    "strait_partition_end_offset",
    "strait_partition_lag_records",
    "strait_partition_lag_seconds",
    "strait_partition_records_copied_total",
    "strait_partition_bytes_copied_total",
    "strait_partition_failed",
    "strait_partition_stalled_seconds",
    "strait_partition_verified_records_total",
    "strait_partition_verify_mismatches_total",
    "strait_partition_last_verified_offset",
];

/// Prometheus text exposition (format 0.0.4) of a snapshot that is `age_s` seconds old.
pub fn render_metrics(s: &Status, age_s: f64) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot {
        status: s.clone(),
        age_s,
    }));
    let mut out = String::new();
    // Writing to a String cannot fail, and every value here is encodable.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
    out
}

/// One scrape's snapshot, as a `prometheus-client` collector.
#[derive(Debug)]
struct Snapshot {
    status: Status,
    age_s: f64,
}

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.status;
        let info = [
            ("version", s.version.as_str()),
            ("io_backend", &s.io_backend),
        ];
        gauges(
            &mut e,
            "strait_info",
            "strait version and IO backend.",
            [(info, 1i64)],
        )?;
        gauges(
            &mut e,
            "strait_status_age_seconds",
            "Age of the control loop's snapshot these numbers come from.",
            [(NO_LABELS, self.age_s)],
        )?;
        counters(
            &mut e,
            "strait_lost_position_resets",
            "Partitions restarted from the earliest offset after their position was lost.",
            [(NO_LABELS, s.lost_position_resets)],
        )?;
        encode_shards(&mut e, &s.shards)?;
        encode_flow_data(&mut e, &s.flows)?;
        encode_flow_states(&mut e, &s.flows)?;
        encode_verification(&mut e, &s.flows, s.settings.metrics_per_partition)?;
        encode_transactions(&mut e, &s.flows)?;
        encode_offsets(&mut e, &s.flows)?;
        encode_syncs(&mut e, &s.flows)?;
        encode_heartbeats(&mut e, s)?;
        if s.settings.metrics_per_partition {
            encode_partitions(&mut e, &s.flows, s.generated_at_ms)?;
        }
        Ok(())
    }
}

type Fmt = Result<(), std::fmt::Error>;

/// The label set of a series without labels.
const NO_LABELS: [(&str, &str); 0] = [];

/// A counter family (`name` without `_total`, which the encoder adds).
fn counters<L: EncodeLabelSet>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, u64)>,
) -> Fmt {
    let mut fam = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in samples {
        ConstCounter::new(v).encode(fam.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A gauge family.
fn gauges<L: EncodeLabelSet, V: prometheus_client::encoding::EncodeGaugeValue>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, V)>,
) -> Fmt {
    let mut fam = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in samples {
        ConstGauge::new(v).encode(fam.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A histogram family of millisecond histograms, exposed in seconds.
fn histograms<'a, L: EncodeLabelSet + 'a>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, &'a LatencyHistogram)>,
) -> Fmt {
    let mut fam = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in samples {
        let mut buckets: Vec<(f64, u64)> = BOUNDS_MS
            .iter()
            .zip(h.counts)
            .map(|(b, c)| (*b as f64 / 1000.0, c))
            .collect();
        buckets.push((f64::INFINITY, h.counts[BOUNDS_MS.len()]));
        fam.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
            h.sum_ms as f64 / 1000.0,
            h.count(),
            &buckets,
            None,
        )?;
    }
    Ok(())
}

/// A shard's counter: name (without `_total`), help, and its value in a shard's status.
type ShardCounter = (&'static str, &'static str, fn(&ShardStatus) -> u64);

/// The shards' counters.
const SHARD_COUNTERS: [ShardCounter; 19] = [
    ("strait_fetch_requests", "Fetch requests sent.", |x| {
        x.fetch_requests
    }),
    (
        "strait_fetch_bytes",
        "Fetch response bytes received.",
        |x| x.fetch_bytes,
    ),
    (
        "strait_full_fetches",
        "Fetch requests naming every partition of their fetch group.",
        |x| x.full_fetches,
    ),
    (
        "strait_incremental_fetches",
        "Fetch requests of a fetch session naming only the partitions changed (KIP-227).",
        |x| x.incremental_fetches,
    ),
    (
        "strait_fetch_session_resets",
        "Fetch sessions ended by an error, a lost request or a replaced partition state.",
        |x| x.fetch_session_resets,
    ),
    ("strait_produce_requests", "Produce requests sent.", |x| {
        x.produce_requests
    }),
    (
        "strait_produced_batches",
        "Batches acknowledged by the target.",
        |x| x.produced_batches,
    ),
    (
        "strait_produced_records",
        "Records acknowledged by the target.",
        |x| x.produced_records,
    ),
    (
        "strait_produced_bytes",
        "Batch bytes acknowledged by the target.",
        |x| x.produced_bytes,
    ),
    (
        "strait_fast_path_batches",
        "Batches forwarded with only the header rewritten.",
        |x| x.fast_batches,
    ),
    (
        "strait_slow_path_batches",
        "Batches rebuilt (decoded and re-encoded).",
        |x| x.slow_batches,
    ),
    (
        "strait_slow_path_bytes",
        "Source bytes of rebuilt batches.",
        |x| x.slow_bytes,
    ),
    (
        "strait_merged_batches",
        "Source batches under a sixteenth of batch.size merged into larger ones behind a full produce window.",
        |x| x.merged_batches,
    ),
    (
        "strait_merges",
        "Batches made by merging small source batches.",
        |x| x.merges,
    ),
    (
        "strait_dropped_control_batches",
        "Transaction markers not replicated.",
        |x| x.dropped_control,
    ),
    (
        "strait_dropped_aborted_batches",
        "Batches of aborted transactions not replicated.",
        |x| x.dropped_aborted,
    ),
    (
        "strait_produce_retries",
        "Batches resent after a retriable failure.",
        |x| x.produce_retries,
    ),
    (
        "strait_reconnects",
        "Broker connections lost and reopened.",
        |x| x.reconnects,
    ),
    (
        "strait_request_timeouts",
        "Requests abandoned after request.timeout.ms without an answer.",
        |x| x.request_timeouts,
    ),
];

fn encode_shards(e: &mut DescriptorEncoder, shards: &[ShardStatus]) -> Fmt {
    let label = |sh: &ShardStatus| [("shard", sh.shard.to_string())];
    for (name, help, get) in SHARD_COUNTERS {
        counters(e, name, help, shards.iter().map(|sh| (label(sh), get(sh))))?;
    }
    counters(
        e,
        "strait_slow_path_batches_by_reason",
        "Batches rebuilt, by why: old_format (pre-0.11 messages up-converted), not_dense, \
         starts_before_next_offset, log_append_time, too_large.",
        shards.iter().flat_map(|sh| {
            sh.slow_batches_by_reason.iter().map(|(reason, n)| {
                (
                    [("shard", sh.shard.to_string()), ("reason", reason.clone())],
                    *n,
                )
            })
        }),
    )?;
    gauges(
        e,
        "strait_buffered_bytes",
        "Fetched bytes held in memory (in flight to the target), per shard.",
        shards.iter().map(|sh| (label(sh), sh.buffered_bytes)),
    )?;
    gauges(
        e,
        "strait_memory_budget_bytes",
        "The shard's budget for fetched bytes (its share of strait.memory.bytes).",
        shards.iter().map(|sh| (label(sh), sh.memory_budget_bytes)),
    )?;
    gauges(
        e,
        "strait_shard_commands_waiting",
        "Commands of the control loop that the shard's channel has not taken yet.",
        shards.iter().map(|sh| (label(sh), sh.commands_waiting)),
    )
}

fn flow_label(f: &FlowStatus) -> [(&'static str, &str); 1] {
    [("flow", f.name.as_str())]
}

/// Per flow: timing histograms, records, bytes and lag.
fn encode_flow_data(e: &mut DescriptorEncoder, flows: &[FlowStatus]) -> Fmt {
    histograms(
        e,
        "strait_record_age_seconds",
        "Age of records when fetched from the source, from their batch timestamp \
         (MirrorMaker's record-age-ms).",
        flows.iter().map(|f| (flow_label(f), &f.record_age)),
    )?;
    histograms(
        e,
        "strait_replication_latency_seconds",
        "From a record's batch timestamp on the source to the target's acknowledgement \
         (MirrorMaker's replication-latency-ms).",
        flows
            .iter()
            .map(|f| (flow_label(f), &f.replication_latency)),
    )?;
    counters(
        e,
        "strait_flow_records_copied",
        "Records copied to the target (MirrorMaker's record-count).",
        flows.iter().map(|f| {
            let n = f.partitions.iter().map(|p| p.records_copied).sum();
            (flow_label(f), n)
        }),
    )?;
    counters(
        e,
        "strait_flow_bytes_copied",
        "Batch bytes copied to the target (MirrorMaker's byte-count).",
        flows.iter().map(|f| {
            let n = f.partitions.iter().map(|p| p.bytes_copied).sum();
            (flow_label(f), n)
        }),
    )?;
    gauges(
        e,
        "strait_flow_lag_records",
        "Records not yet replicated, all partitions of the flow together.",
        flows.iter().map(|f| {
            let n: i64 = f.partitions.iter().map(|p| p.lag).sum();
            (flow_label(f), n)
        }),
    )?;
    gauges(
        e,
        "strait_flow_lag_seconds",
        "The largest lag in time of the flow's partitions (see strait_partition_lag_seconds).",
        flows.iter().map(|f| {
            let ms = f.partitions.iter().map(|p| p.lag_ms).max().unwrap_or(0);
            (flow_label(f), ms as f64 / 1000.0)
        }),
    )
}

/// Per flow: partitions by state, and stalled ones by reason.
fn encode_flow_states(e: &mut DescriptorEncoder, flows: &[FlowStatus]) -> Fmt {
    gauges(
        e,
        "strait_flow_partitions",
        "Partitions of the flow by state (RUNNING, PAUSED, STOPPED, FAILED, NOT_ASSIGNED).",
        flows.iter().flat_map(|f| {
            let mut by: BTreeMap<&'static str, i64> =
                ApiState::ALL.iter().map(|s| (s.name(), 0)).collect();
            for p in &f.partitions {
                *by.entry(p.api_state.name()).or_default() += 1;
            }
            by.into_iter()
                .map(move |(state, n)| ([("flow", f.name.as_str()), ("state", state)], n))
        }),
    )?;
    gauges(
        e,
        "strait_flow_stalled_partitions",
        "Partitions that have lag and made no progress, by the shard's reason \
         (no_progress: no reason reported).",
        flows.iter().flat_map(|f| {
            let mut by: BTreeMap<&str, i64> = BTreeMap::new();
            for p in f.partitions.iter().filter(|p| is_stuck(p)) {
                let reason = p
                    .stall
                    .as_ref()
                    .map_or("no_progress", |s| s.reason.as_str());
                *by.entry(reason).or_default() += 1;
            }
            by.into_iter()
                .map(move |(reason, n)| ([("flow", f.name.as_str()), ("reason", reason)], n))
        }),
    )
}

/// Continuous verification (`strait.verify.enabled`): per flow, and per partition when
/// per-partition series are on; only partitions a round looked at (none when it is off).
fn encode_verification(
    e: &mut DescriptorEncoder,
    flows: &[FlowStatus],
    per_partition: bool,
) -> Fmt {
    fn verified(f: &FlowStatus) -> Vec<&PartitionVerification> {
        f.partitions
            .iter()
            .filter_map(|p| p.verification.as_ref())
            .collect()
    }
    let flows_verified: Vec<_> = flows
        .iter()
        .map(|f| (f, verified(f)))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    counters(
        e,
        "strait_flow_verified_records",
        "Source records continuous verification compared with their copies.",
        flows_verified
            .iter()
            .map(|(f, v)| (flow_label(f), v.iter().map(|v| v.records_verified).sum())),
    )?;
    counters(
        e,
        "strait_flow_verify_mismatches",
        "Records continuous verification found missing, extra or different on the target.",
        flows_verified
            .iter()
            .map(|(f, v)| (flow_label(f), v.iter().map(|v| v.mismatches).sum())),
    )?;
    if !per_partition {
        return Ok(());
    }
    let all = || {
        flows.iter().flat_map(|f| {
            f.partitions.iter().filter_map(move |p| {
                let labels = [
                    ("flow", f.name.clone()),
                    ("topic", p.topic.clone()),
                    ("partition", p.partition.to_string()),
                ];
                p.verification.as_ref().map(|v| (labels, v))
            })
        })
    };
    counters(
        e,
        "strait_partition_verified_records",
        "Source records continuous verification compared with their copies.",
        all().map(|(l, v)| (l, v.records_verified)),
    )?;
    counters(
        e,
        "strait_partition_verify_mismatches",
        "Records continuous verification found missing, extra or different on the target.",
        all().map(|(l, v)| (l, v.mismatches)),
    )?;
    gauges(
        e,
        "strait_partition_last_verified_offset",
        "The source offset continuous verification compared up to (exclusive).",
        all().map(|(l, v)| (l, v.last_verified_offset)),
    )
}

/// Whether a running partition has lag without progress (operator holds do not count).
fn is_stuck(p: &PartitionStatus) -> bool {
    p.api_state == ApiState::Running && p.stuck_since_ms.is_some()
}

/// A counter family of one flow duty's counter.
fn flow_counters(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    flows: &[FlowStatus],
    get: fn(&FlowStatus) -> u64,
) -> Fmt {
    counters(e, name, help, flows.iter().map(|f| (flow_label(f), get(f))))
}

/// A counter family of one flow duty's counters by reason.
fn reason_counters(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    flows: &[FlowStatus],
    get: fn(&FlowStatus) -> &BTreeMap<&'static str, u64>,
) -> Fmt {
    counters(
        e,
        name,
        help,
        flows.iter().flat_map(|f| {
            get(f)
                .iter()
                .map(move |(r, n)| ([("flow", f.name.as_str()), ("reason", *r)], *n))
        }),
    )
}

/// Each flow's delivery guarantee, and the transactions of the flows forwarded exactly-once.
fn encode_transactions(e: &mut DescriptorEncoder, flows: &[FlowStatus]) -> Fmt {
    gauges(
        e,
        "strait_flow_delivery",
        "1 for the flow's delivery guarantee (at_least_once, or exactly_once with \
         exactly.once.source.support = enabled).",
        flows.iter().map(|f| {
            (
                [("flow", f.name.as_str()), ("delivery", f.delivery.name())],
                1i64,
            )
        }),
    )?;
    let txn: Vec<(&FlowStatus, &TxnCounters)> = flows
        .iter()
        .filter_map(|f| f.transactions.as_ref().map(|t| (f, t)))
        .collect();
    type TxnCounter = (&'static str, &'static str, fn(&TxnCounters) -> u64);
    let simple: [TxnCounter; 3] = [
        (
            "strait_transactions_committed",
            "Transactions committed (a partition's batches and progress).",
            |t| t.committed,
        ),
        (
            "strait_transactions_aborted",
            "Transactions aborted (failed or revoked partitions, failed commits); their \
             records are copied again.",
            |t| t.aborted,
        ),
        (
            "strait_transactions_fenced",
            "Partitions stopped because another holder of their transactional id fenced this \
             one.",
            |t| t.fenced,
        ),
    ];
    for (name, help, get) in simple {
        counters(
            e,
            name,
            help,
            txn.iter().map(|(f, t)| (flow_label(f), get(t))),
        )?;
    }
    gauges(
        e,
        "strait_transaction_partitions",
        "Partitions holding a transactional producer.",
        txn.iter().map(|(f, t)| {
            (
                flow_label(f),
                i64::try_from(t.partitions).unwrap_or(i64::MAX),
            )
        }),
    )?;
    histograms(
        e,
        "strait_transaction_commit_latency_seconds",
        "From a partition's seal (its shard stops sending) to the coordinator's answer to \
         its commit.",
        txn.iter().map(|(f, t)| (flow_label(f), &t.commit_latency)),
    )
}

fn encode_offsets(e: &mut DescriptorEncoder, flows: &[FlowStatus]) -> Fmt {
    type FlowCounter = (&'static str, &'static str, fn(&FlowStatus) -> u64);
    let simple: [FlowCounter; 8] = [
        (
            "strait_offset_syncs_written",
            "OffsetSync records written.",
            |f| f.offsets.offset_syncs_written,
        ),
        (
            "strait_offset_sync_errors",
            "Offset-sync writes that failed.",
            |f| f.offsets.offset_sync_errors,
        ),
        ("strait_checkpoint_rounds", "Checkpoint rounds run.", |f| {
            f.offsets.checkpoint_rounds
        }),
        (
            "strait_checkpoints_written",
            "Checkpoint records written.",
            |f| f.offsets.checkpoints_written,
        ),
        (
            "strait_checkpoint_errors",
            "Groups whose checkpoints failed in a round, and rounds that timed out.",
            |f| f.offsets.checkpoint_errors,
        ),
        (
            "strait_group_sync_rounds",
            "Group-offset sync rounds run.",
            |f| f.offsets.group_sync_rounds,
        ),
        (
            "strait_groups_synced",
            "Groups whose translated offsets were committed on the target, per round.",
            |f| f.offsets.groups_synced,
        ),
        (
            "strait_group_sync_errors",
            "Group-offset sync rounds or groups that failed on a cluster error.",
            |f| f.offsets.group_sync_errors,
        ),
    ];
    for (name, help, get) in simple {
        flow_counters(e, name, help, flows, get)?;
    }
    reason_counters(
        e,
        "strait_checkpoint_skips",
        "Group partitions without a checkpoint in a round, by why.",
        flows,
        |f| &f.offsets.checkpoint_skips,
    )?;
    reason_counters(
        e,
        "strait_groups_skipped",
        "Groups not synced in a round, by why.",
        flows,
        |f| &f.offsets.groups_skipped,
    )?;
    histograms(
        e,
        "strait_checkpoint_latency_seconds",
        "From the start of a checkpoint round to the target's acknowledgement of its \
         checkpoints, per checkpoint (MirrorMaker's checkpoint-latency-ms).",
        flows
            .iter()
            .map(|f| (flow_label(f), &f.offsets.checkpoint_latency)),
    )
}

fn encode_syncs(e: &mut DescriptorEncoder, flows: &[FlowStatus]) -> Fmt {
    type Get = fn(&crate::model::counters::SyncCounters) -> u64;
    let families: [(&str, &str, Get); 3] = [
        (
            "strait_sync_rounds",
            "Topic (discovery and creation), config and ACL sync rounds, by kind.",
            |c| c.rounds,
        ),
        (
            "strait_sync_changes",
            "Changes made on the target: topics created or grown, configs altered, ACLs \
             created, by kind.",
            |c| c.changes,
        ),
        (
            "strait_sync_errors",
            "Sync rounds or items that failed, by kind.",
            |c| c.errors,
        ),
    ];
    for (name, help, get) in families {
        counters(
            e,
            name,
            help,
            flows.iter().flat_map(|f| {
                let t = &f.topic_sync;
                [
                    ("topics", &t.topics),
                    ("configs", &t.configs),
                    ("acls", &t.acls),
                ]
                .into_iter()
                .map(move |(kind, c)| ([("flow", f.name.as_str()), ("kind", kind)], get(c)))
            }),
        )?;
    }
    Ok(())
}

fn encode_heartbeats(e: &mut DescriptorEncoder, s: &Status) -> Fmt {
    let pair = |h: &crate::model::counters::HeartbeatCounters| {
        [("source", h.source.clone()), ("target", h.target.clone())]
    };
    counters(
        e,
        "strait_heartbeats_written",
        "Heartbeat records written to the target's heartbeats topic.",
        s.heartbeats.iter().map(|h| (pair(h), h.written)),
    )?;
    counters(
        e,
        "strait_heartbeat_errors",
        "Heartbeats that could not be written.",
        s.heartbeats.iter().map(|h| (pair(h), h.errors)),
    )?;
    gauges(
        e,
        "strait_heartbeat_read_back_age_seconds",
        "Age of the newest record read back from the heartbeats topic on the target \
         (read every 10 s); absent before the first read.",
        s.heartbeats
            .iter()
            .filter(|h| h.newest_read_back_ms >= 0)
            .map(|h| {
                let age = (s.generated_at_ms - h.newest_read_back_ms).max(0);
                (pair(h), age as f64 / 1000.0)
            }),
    )
}

fn encode_partitions(e: &mut DescriptorEncoder, flows: &[FlowStatus], now_ms: i64) -> Fmt {
    let all = || {
        flows.iter().flat_map(|f| {
            f.partitions.iter().map(move |p| {
                let labels = [
                    ("flow", f.name.clone()),
                    ("topic", p.topic.clone()),
                    ("partition", p.partition.to_string()),
                ];
                (labels, p)
            })
        })
    };
    type Get = fn(&PartitionStatus) -> i64;
    let int_gauges: [(&str, &str, Get); 4] = [
        (
            "strait_partition_next_offset",
            "Next source offset to replicate.",
            |p| p.next_offset,
        ),
        (
            "strait_partition_end_offset",
            "Source end offset at the last fetch.",
            |p| p.end_offset,
        ),
        (
            "strait_partition_lag_records",
            "Records not yet replicated.",
            |p| p.lag,
        ),
        (
            "strait_partition_failed",
            "1 when the partition stopped with an error.",
            |p| i64::from(p.state == "failed"),
        ),
    ];
    for (name, help, get) in int_gauges {
        gauges(e, name, help, all().map(|(l, p)| (l, get(p))))?;
    }
    gauges(
        e,
        "strait_partition_lag_seconds",
        "Lag in time: 0 without lag; else now minus the timestamp of the oldest fetched \
         record not yet acknowledged by the target or, when none is fetched, the time since \
         the partition last made progress.",
        all().map(|(l, p)| (l, p.lag_ms as f64 / 1000.0)),
    )?;
    counters(
        e,
        "strait_partition_records_copied",
        "Records copied to the target (MirrorMaker's record-count).",
        all().map(|(l, p)| (l, p.records_copied)),
    )?;
    counters(
        e,
        "strait_partition_bytes_copied",
        "Batch bytes copied to the target (MirrorMaker's byte-count).",
        all().map(|(l, p)| (l, p.bytes_copied)),
    )?;
    gauges(
        e,
        "strait_partition_stalled_seconds",
        "For partitions with lag and no progress only: for how long, with the shard's reason.",
        all().filter_map(|([flow, topic, partition], p)| {
            let since = p.stuck_since_ms.filter(|_| is_stuck(p))?;
            let reason = p
                .stall
                .as_ref()
                .map_or("no_progress".to_string(), |s| s.reason.clone());
            let secs = (now_ms - since).max(0) as f64 / 1000.0;
            Some(([flow, topic, partition, ("reason", reason)], secs))
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::status::sample;

    #[test]
    fn metrics_text_format() {
        let text = render_metrics(&sample(), 0.5);
        assert!(text.contains("# TYPE strait_produced_records_total counter\n"));
        assert!(text.contains("strait_produced_records_total{shard=\"1\"} 40\n"));
        assert!(text.contains(
            "strait_partition_lag_records{flow=\"A->B\",topic=\"orders\\\"x\",partition=\"3\"} 60\n"
        ));
        assert!(text.contains(
            "strait_partition_failed{flow=\"A->B\",topic=\"orders\\\"x\",partition=\"3\"} 1\n"
        ));
        assert!(text.contains(
            "strait_partition_lag_seconds{flow=\"A->B\",topic=\"orders\\\"x\",partition=\"3\"} 1.5\n"
        ));
        assert!(text.contains("strait_lost_position_resets_total 2\n"));
        assert!(text.contains("strait_status_age_seconds 0.5\n"));
        assert!(text.contains(
            "strait_slow_path_batches_by_reason_total{shard=\"1\",reason=\"old_format\"} 7\n"
        ));
        assert!(text.contains("strait_record_age_seconds_bucket{flow=\"A->B\",le=\"+Inf\"} 0\n"));
        assert!(text.contains("strait_flow_partitions{flow=\"A->B\",state=\"FAILED\"} 1\n"));
        // Every sample line belongs to a declared family, and every family is in FAMILIES.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .filter(|f| text.contains(&format!("# TYPE {f} histogram")))
                .unwrap_or(name);
            assert!(text.contains(&format!("# TYPE {family} ")), "{line}");
        }
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = line.split(' ').nth(2).unwrap();
            assert!(FAMILIES.contains(&name), "{name} is not in FAMILIES");
        }
    }

    #[test]
    fn per_partition_series_can_be_turned_off() {
        let mut s = sample();
        s.settings.metrics_per_partition = false;
        let text = render_metrics(&s, 0.0);
        assert!(!text.contains("\nstrait_partition_"), "{text}");
        assert!(!text.contains("# TYPE strait_partition_"), "{text}");
        assert!(text.contains("strait_flow_lag_records{flow=\"A->B\"} 60\n"));
    }

    #[test]
    fn each_flow_says_its_delivery_and_exactly_once_flows_their_transactions() {
        let mut s = sample();
        let text = render_metrics(&s, 0.0);
        assert!(
            text.contains("strait_flow_delivery{flow=\"A->B\",delivery=\"at_least_once\"} 1\n")
        );
        assert!(
            !text.contains("\nstrait_transactions_committed_total"),
            "{text}"
        );
        let mut t = TxnCounters {
            aborted: 2,
            fenced: 1,
            partitions: 3,
            ..TxnCounters::default()
        };
        t.committed_after(4);
        t.committed_after(300);
        s.flows[0].delivery = crate::api::Delivery::ExactlyOnce;
        s.flows[0].transactions = Some(t);
        let text = render_metrics(&s, 0.0);
        for line in [
            "strait_flow_delivery{flow=\"A->B\",delivery=\"exactly_once\"} 1\n",
            "strait_transactions_committed_total{flow=\"A->B\"} 2\n",
            "strait_transactions_aborted_total{flow=\"A->B\"} 2\n",
            "strait_transactions_fenced_total{flow=\"A->B\"} 1\n",
            "strait_transaction_partitions{flow=\"A->B\"} 3\n",
            "strait_transaction_commit_latency_seconds_bucket{flow=\"A->B\",le=\"0.005\"} 1\n",
            "strait_transaction_commit_latency_seconds_count{flow=\"A->B\"} 2\n",
            "strait_transaction_commit_latency_seconds_sum{flow=\"A->B\"} 0.304\n",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        let json = serde_json::to_value(&s.flows[0]).unwrap();
        assert_eq!(json["delivery"], "exactly_once");
        assert_eq!(json["transactions"]["commit_latency_avg_ms"], 152);
        assert_eq!(json["transactions"]["commit_latency_max_ms"], 300);
    }

    #[test]
    fn histograms_are_cumulative_and_in_seconds() {
        let mut s = sample();
        s.flows[0].replication_latency.observe(3, 2); // the 5 ms bucket
        s.flows[0].replication_latency.observe(400, 1); // the 500 ms bucket
        let text = render_metrics(&s, 0.0);
        let l = "strait_replication_latency_seconds";
        assert!(text.contains(&format!("{l}_bucket{{flow=\"A->B\",le=\"0.002\"}} 0\n")));
        assert!(text.contains(&format!("{l}_bucket{{flow=\"A->B\",le=\"0.005\"}} 2\n")));
        assert!(text.contains(&format!("{l}_bucket{{flow=\"A->B\",le=\"0.5\"}} 3\n")));
        assert!(text.contains(&format!("{l}_bucket{{flow=\"A->B\",le=\"+Inf\"}} 3\n")));
        assert!(text.contains(&format!("{l}_count{{flow=\"A->B\"}} 3\n")));
        assert!(text.contains(&format!("{l}_sum{{flow=\"A->B\"}} 0.406\n")));
    }
}
