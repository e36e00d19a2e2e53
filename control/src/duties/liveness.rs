//! The liveness duty: every [`LIVENESS_INTERVAL_MS`] a running flow says so in its progress
//! topic, and says `stopped` once its final progress is written (the record format and what
//! reads it are in [`crate::store::liveness`]).

use std::time::Instant;

use bytes::Bytes;
use strait_dataplane::batch::Record;

use crate::cluster::{Cluster, ClusterError};
use crate::store::liveness::{
    LIVENESS_INTERVAL_MS, LivenessRecord, RunState, liveness_key, liveness_value,
};
use crate::store::records;
use crate::time::Every;

/// The liveness record writer of one flow in `strait run`.
#[derive(Debug)]
pub struct Liveness {
    source: String,
    target: String,
    topic: String,
    instance: String,
    every: Every,
}

impl Liveness {
    /// A writer for flow `source->target` into `progress_topic`, for instance `instance`.
    pub fn new(
        source: &str,
        target: &str,
        progress_topic: &str,
        instance: &str,
        now: Instant,
    ) -> Liveness {
        Liveness {
            source: source.to_string(),
            target: target.to_string(),
            topic: progress_topic.to_string(),
            instance: instance.to_string(),
            every: Every::from_millis(true, LIVENESS_INTERVAL_MS, now),
        }
    }

    fn record(&self, state: RunState, now_ms: i64) -> Record {
        Record::new(
            now_ms,
            Some(Bytes::from(liveness_key(&self.source, &self.target))),
            Some(Bytes::from(liveness_value(&LivenessRecord {
                instance: self.instance.clone(),
                state,
                time_ms: now_ms,
                interval_ms: LIVENESS_INTERVAL_MS,
            }))),
        )
    }

    /// Whether a beat is due at `now`; if so, the next one is scheduled.
    pub fn due(&mut self, now: Instant) -> bool {
        let due = self.every.due(now);
        if due {
            self.every.done(now);
        }
        due
    }

    /// Writes a `running` record when one is due. A failure is logged; the next beat retries.
    pub async fn beat_if_due(&mut self, target: &Cluster, now: Instant, now_ms: i64) {
        if !self.due(now) {
            return;
        }
        let r = self.record(RunState::Running, now_ms);
        if let Err(e) = records::produce(target, &self.topic, 0, &[r]).await {
            tracing::warn!(topic = %self.topic, "cannot write the liveness record: {e}");
        }
    }

    /// Writes the `stopped` record (after the final progress flush).
    pub async fn stopped(&mut self, target: &Cluster, now_ms: i64) -> Result<(), ClusterError> {
        let r = self.record(RunState::Stopped, now_ms);
        records::produce(target, &self.topic, 0, &[r])
            .await
            .map(|_| ())
    }
}
