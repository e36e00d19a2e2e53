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

use crate::cluster::{Cluster, ClusterError, IsolationLevel, OffsetSpec, TopicPartition};
use crate::store::progress::Entry;
use crate::store::records::{self, StoredRecord};

/// What recovery decided for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovered {
    /// Resume at the stored position (nothing beyond it on the target, or nothing known).
    AsStored,
    /// The target already holds `records` records past the stored position: resume at `to`.
    Advanced { to: i64, records: i64 },
    /// The target holds more than expected but it could not be matched to the source; resume
    /// at the stored position (those records will be copied again).
    Unverified { reason: String },
}

/// Decides where `source_tp` resumes, given its stored progress and the target partition.
/// `max_records` bounds how much source data recovery may read.
#[allow(clippy::too_many_lines)] // not split yet (issue 12: long functions left)
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
    let end = target
        .list_offsets(
            std::slice::from_ref(target_tp),
            OffsetSpec::Latest,
            IsolationLevel::ReadUncommitted,
        )
        .await
        .into_values()
        .next()
        .transpose()?
        .unwrap_or(-1);
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

    let source_end = source
        .list_offsets(
            std::slice::from_ref(source_tp),
            OffsetSpec::Latest,
            isolation,
        )
        .await
        .into_values()
        .next()
        .transpose()?
        .unwrap_or(-1);
    let mut counted = 0i64;
    let mut first: Option<StoredRecord> = None;
    let mut last: Option<StoredRecord> = None;
    records::read_range(
        source,
        source_tp,
        stored.next_offset,
        source_end,
        isolation,
        |r| {
            counted += 1;
            if first.is_none() {
                first = Some(r.clone());
            }
            let done = counted == beyond;
            last = Some(r);
            !done
        },
    )
    .await?;
    let (Some(first), Some(last), Some(tf), Some(tl)) = (first, last, target_first, target_last)
    else {
        return Ok(Recovered::Unverified {
            reason: "records needed for the comparison are missing".into(),
        });
    };
    if counted != beyond {
        return Ok(Recovered::Unverified {
            reason: format!(
                "the target holds {beyond} records past the stored progress but the source has only {counted} after it"
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
    })
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
