//! The load's reader of the remote topic: one task per partition, each with its own client
//! (its own connection: a broker serves one connection's requests one at a time, so long polls
//! of several partitions on one connection would wait for each other and add to the latency
//! measured), polling from the end the partition had before production started.
//!
//! A record's arrival time is when the fetch response that carried it was decoded, on the same
//! clock as the stamp (this process), so no clock skew enters the latency.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use strait_control::cluster::{Cluster, IsolationLevel, TopicPartition};
use strait_control::store::records::{self, StoredRecord};

use super::state::Run;
use crate::kafka::now_us;

/// What one fetch asks at most (a broker returns a larger first batch whole).
const FETCH_MAX_BYTES: i32 = 4 << 20;
/// Pause after a failed fetch (the client already retried retriable errors).
const ERROR_BACKOFF: Duration = Duration::from_millis(500);

/// Key, value and header bytes of a record.
pub fn record_bytes(r: &StoredRecord) -> u64 {
    let len = |b: &Option<bytes::Bytes>| b.as_ref().map_or(0, |b| b.len());
    let headers: usize = r.headers.iter().map(|(k, v)| k.len() + len(v)).sum();
    (len(&r.key) + len(&r.value) + headers) as u64
}

/// Reads `tp` from `from` until the run says reading is done (`drain_us` after production).
pub async fn consume_partition(
    cluster: Rc<Cluster>,
    tp: TopicPartition,
    from: i64,
    run: Rc<RefCell<Run>>,
    drain_us: u64,
) {
    let mut pos = from;
    while !run.borrow().reading_done(now_us(), drain_us) {
        match records::fetch_once(
            &cluster,
            &tp,
            pos,
            IsolationLevel::ReadCommitted,
            FETCH_MAX_BYTES,
        )
        .await
        {
            Ok((recs, next)) => {
                let t = now_us();
                let mut r = run.borrow_mut();
                for rec in recs.iter().filter(|rec| rec.offset >= pos) {
                    r.on_record(rec.value.as_deref(), record_bytes(rec), tp.partition, t);
                }
                pos = pos.max(next);
            }
            Err(e) => {
                {
                    let mut r = run.borrow_mut();
                    r.fetch_errors += 1;
                    r.last_fetch_error = Some(format!("{tp}: {e}"));
                }
                tracing::warn!(partition = %tp, error = %e, "load: reading the target failed; retrying");
                tokio::time::sleep(ERROR_BACKOFF).await;
            }
        }
    }
}
