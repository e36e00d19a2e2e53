//! Reading MM2's offset-syncs topic (`mm2-offset-syncs.<alias>.internal`) into the sync store.

use crate::cluster::{Cluster, ClusterError, IsolationLevel};
use crate::offsets::OffsetSyncStore;
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
