//! Reading MM2's offset-syncs topic (`mm2-offset-syncs.<alias>.internal`) into the sync store.

use std::collections::BTreeMap;

use crate::cluster::{Cluster, ClusterError, IsolationLevel};
use crate::model::TopicPartition;
use crate::offsets::{OffsetSync, OffsetSyncStore};
use crate::store::records;

/// Reads the whole offset-syncs topic (partition 0) into `store`. Returns (records, bad
/// records).
pub async fn load_syncs(
    consumer: &Cluster,
    topic: &str,
    store: &mut OffsetSyncStore,
) -> Result<(usize, usize), ClusterError> {
    let mut records = 0usize;
    let mut bad = 0usize;
    records::read_to_end(consumer, topic, 0, IsolationLevel::ReadUncommitted, |r| {
        records += 1;
        match (r.key.as_deref(), r.value.as_deref()) {
            (Some(k), Some(v)) => {
                if store.handle_record(k, v).is_err() {
                    bad += 1;
                }
            }
            _ => bad += 1,
        }
    })
    .await?;
    Ok((records, bad))
}

/// Every offset sync of the topic as written (not thinned as the sync store keeps them), per
/// source partition: `upstream -> downstream`, the later sync winning for an upstream offset
/// synced twice. Returns them and the count of records that are not offset syncs.
pub async fn read_all_syncs(
    consumer: &Cluster,
    topic: &str,
) -> Result<(BTreeMap<TopicPartition, BTreeMap<i64, i64>>, usize), ClusterError> {
    let mut syncs: BTreeMap<TopicPartition, BTreeMap<i64, i64>> = BTreeMap::new();
    let mut bad = 0usize;
    records::read_to_end(
        consumer,
        topic,
        0,
        IsolationLevel::ReadUncommitted,
        |r| match (r.key.as_deref(), r.value.as_deref()) {
            (Some(k), Some(v)) => match OffsetSync::decode(k, v) {
                Ok(s) => {
                    syncs
                        .entry(TopicPartition::new(s.topic, s.partition))
                        .or_default()
                        .insert(s.upstream_offset, s.downstream_offset);
                }
                Err(_) => bad += 1,
            },
            _ => bad += 1,
        },
    )
    .await?;
    Ok((syncs, bad))
}
