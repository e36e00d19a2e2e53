//! Reading MM2's checkpoints topic (`<source>.checkpoints.internal` on the target) back at start.

use crate::cluster::{Cluster, IsolationLevel};
use crate::config::FlowConfig;
use crate::offsets::CheckpointStore;
use crate::store::records;

/// Loads the checkpoints topic into `store` (groups the filter selects). Returns (records
/// loaded, whether the read succeeded).
pub async fn load_checkpoints(
    flow: &FlowConfig,
    consumer: &Cluster,
    store: &mut CheckpointStore,
) -> (usize, bool) {
    let topic = flow.checkpoints_topic();
    let mut loaded = 0usize;
    let mut bad = 0usize;
    let read = records::read_to_end(consumer, &topic, 0, IsolationLevel::ReadUncommitted, |r| {
        let Some(key) = r.key.as_deref() else {
            bad += 1;
            return;
        };
        match store.load_record(key, r.value.as_deref(), |g| {
            flow.group_filter.should_replicate_group(g)
        }) {
            Ok(true) => loaded += 1,
            Ok(false) => {}
            Err(_) => bad += 1,
        }
    })
    .await;
    if bad > 0 {
        tracing::warn!(flow = %flow.name(), topic = %topic, records = bad, "skipped undecodable checkpoint records");
    }
    match read {
        Ok(_) => (loaded, true),
        Err(e) => {
            tracing::warn!(flow = %flow.name(), topic = %topic, error = %e, "cannot read the checkpoints; offset syncs load with only the latest per partition (as MM2)");
            (0, false)
        }
    }
}
