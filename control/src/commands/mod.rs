//! The CLI commands besides `run` (the binary parses arguments and maps results to exit codes):
//!
//! - [`migrate`]: `strait offsets import-mm2` and `export-mm2`.
//! - [`translate`]: `strait offsets translate`.
//! - [`verify`]: `strait verify`, record-level proof of the copy.
//! - [`smoke`]: `strait smoke`, one stamped record through the flow, checked on the target.
//! - [`drill`]: `strait drill`, the failover rehearsal for one group.
//! - [`failback`]: `strait failback`, what the old source holds beyond the copy.
//! - [`failover`]: `strait failover`, the planned cutover of a flow's topics and groups.
//! - [`ctl`]: `strait ctl`, the REST API's client.
//! - [`preflight`]: `strait check --connect`, the permissions each flow needs on its clusters.
//!
//! `strait check` is [`crate::config::check()`]: it is the config's own report.

pub mod ctl;
pub mod drill;
pub mod failback;
pub mod failover;
pub mod migrate;
pub mod preflight;
pub mod resume;
pub mod smoke;
pub mod translate;
pub mod verify;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::cluster::{Cluster, ClusterError, IsolationLevel, OffsetSpec, TopicPartition};

/// The end offsets of `tps` on `cluster` under `isolation` (the high watermark, or the last
/// stable offset under read_committed); the first partition that fails fails the call.
pub(crate) async fn end_offsets(
    cluster: &Cluster,
    tps: &[TopicPartition],
    isolation: IsolationLevel,
) -> Result<BTreeMap<TopicPartition, i64>, ClusterError> {
    let mut out = BTreeMap::new();
    for (tp, end) in cluster
        .list_offsets(tps, OffsetSpec::Latest, isolation)
        .await
    {
        out.insert(tp, end?);
    }
    Ok(out)
}

/// A table: a header row and rows, columns padded to their widest cell.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.len());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<String>| {
        let l: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        let _ = writeln!(out, "{}", l.join("  ").trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(r.clone());
    }
    out
}
