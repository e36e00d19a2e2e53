//! Crash recovery: after an unclean stop, the target may hold records written after the last
//! progress store. Progress keeps the target's log end that matched it (`target_offset`), so at
//! start strait counts how many records the target holds beyond it, walks the source from the
//! stored position over exactly that many replicable records, and resumes after them. Two record
//! comparisons (the first and the last of the stretch) guard against anything else having written
//! to the target partition; on any doubt strait resumes from the stored position instead, which
//! duplicates but never skips.
//!
//! This relies on how the data plane writes: one idempotent producer per partition, in order, so
//! the target log past `target_offset` is exactly a prefix of what followed the stored position.

use strait_dataplane::shard::MappingSegment;

use crate::cluster::{Cluster, ClusterError, IsolationLevel, OffsetSpec, TopicPartition};
use crate::store::progress::Entry;
use crate::store::records::{self, StoredRecord};

/// What recovery decided for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovered {
    /// Resume at the stored position (nothing beyond it on the target, or nothing known).
    AsStored,
    /// The target already holds `records` records past the stored position: resume at `to`.
    /// `segments` map them exactly (they follow the stored target offset one to one, in
    /// source order: the data plane's producer writes in order).
    Advanced {
        to: i64,
        records: i64,
        segments: Vec<MappingSegment>,
    },
    /// The target holds more than expected but it could not be matched to the source; resume
    /// at the stored position (those records will be copied again).
    Unverified { reason: String },
}

/// Decides where `source_tp` resumes, given its stored progress and the target partition.
/// `max_records` bounds how much source data recovery may read.
pub async fn recover(
    source: &Cluster,
    target: &Cluster,
    source_tp: &TopicPartition,
    target_tp: &TopicPartition,
    stored: &Entry,
    isolation: IsolationLevel,
    max_records: i64,
) -> Result<Recovered, ClusterError> {
    if stored.target_offset < 0 {
        return Ok(Recovered::AsStored);
    }
    let end = log_end(target, target_tp, IsolationLevel::ReadUncommitted).await?;
    let beyond = end - stored.target_offset;
    if beyond <= 0 {
        return Ok(Recovered::AsStored);
    }
    if beyond > max_records {
        return Ok(Recovered::Unverified {
            reason: format!(
                "the target holds {beyond} records past the stored progress, more than the {max_records} recovery reads"
            ),
        });
    }
    let target_first = read_one(target, target_tp, stored.target_offset).await?;
    let target_last = read_one(target, target_tp, end - 1).await?;
    let source_end = log_end(source, source_tp, isolation).await?;
    let stretch = Stretch::read(
        source,
        source_tp,
        stored.next_offset,
        source_end,
        beyond,
        stored.target_offset,
        isolation,
    )
    .await?;
    let (Some(first), Some(last), Some(tf), Some(tl)) =
        (stretch.first, stretch.last, target_first, target_last)
    else {
        return Ok(Recovered::Unverified {
            reason: "records needed for the comparison are missing".into(),
        });
    };
    if stretch.counted != beyond {
        return Ok(Recovered::Unverified {
            reason: format!(
                "the target holds {beyond} records past the stored progress but the source has only {} after it",
                stretch.counted
            ),
        });
    }
    if !same_record(&first, &tf) || !same_record(&last, &tl) {
        return Ok(Recovered::Unverified {
            reason: "the target's records past the stored progress do not match the source's"
                .into(),
        });
    }
    Ok(Recovered::Advanced {
        to: last.offset + 1,
        records: beyond,
        segments: stretch.segments,
    })
}

/// The log end of `tp` (-1 when the broker does not say).
async fn log_end(
    cluster: &Cluster,
    tp: &TopicPartition,
    isolation: IsolationLevel,
) -> Result<i64, ClusterError> {
    Ok(cluster
        .list_offsets(std::slice::from_ref(tp), OffsetSpec::Latest, isolation)
        .await
        .into_values()
        .next()
        .transpose()?
        .unwrap_or(-1))
}

/// The first `wanted` replicable source records from an offset: how many there were, the first
/// and the last.
struct Stretch {
    counted: i64,
    first: Option<StoredRecord>,
    last: Option<StoredRecord>,
    /// Where the counted records are on the target, from `target_start` on, as runs of
    /// consecutive source offsets.
    segments: Vec<MappingSegment>,
}

impl Stretch {
    async fn read(
        cluster: &Cluster,
        tp: &TopicPartition,
        from: i64,
        end: i64,
        wanted: i64,
        target_start: i64,
        isolation: IsolationLevel,
    ) -> Result<Stretch, ClusterError> {
        let mut s = Stretch {
            counted: 0,
            first: None,
            last: None,
            segments: Vec::new(),
        };
        records::read_range(cluster, tp, from, end, isolation, |r| {
            let downstream = target_start + s.counted;
            match s.segments.last_mut() {
                Some(seg)
                    if seg.upstream + i64::from(seg.count) == r.offset && seg.count < u32::MAX =>
                {
                    seg.count += 1;
                }
                _ => s.segments.push(MappingSegment {
                    upstream: r.offset,
                    downstream,
                    count: 1,
                }),
            }
            s.counted += 1;
            if s.first.is_none() {
                s.first = Some(r.clone());
            }
            s.last = Some(r);
            s.counted != wanted
        })
        .await?;
        Ok(s)
    }
}

/// The record at `offset` of `tp`, if there is one there.
async fn read_one(
    cluster: &Cluster,
    tp: &TopicPartition,
    offset: i64,
) -> Result<Option<StoredRecord>, ClusterError> {
    let mut found = None;
    records::read_range(
        cluster,
        tp,
        offset,
        offset + 1,
        IsolationLevel::ReadUncommitted,
        |r| {
            found = Some(r);
            false
        },
    )
    .await?;
    Ok(found.filter(|r| r.offset == offset))
}

/// What replication preserves: key, value, headers and timestamp.
fn same_record(a: &StoredRecord, b: &StoredRecord) -> bool {
    a.key == b.key && a.value == b.value && a.headers == b.headers && a.timestamp == b.timestamp
}
