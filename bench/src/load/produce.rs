//! The load's producer: one task per source partition, each sending one batch at a time with
//! an idempotent producer id, through strait's own admin client (so with the flow's TLS and
//! SASL settings) and [`records::produce_batch`].
//!
//! One batch in flight per partition keeps the source's order the send order and lets a resend
//! after a retriable error be deduplicated by the broker (same producer id and sequence), so
//! every duplicate or reordering the target shows was made on the replication path, not here.
//! Records that come due while a batch is in flight go into the next one: a fixed rate is kept
//! by batching, as a real producer would, and each record is stamped when its batch is built.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use strait_control::cluster::Cluster;
use strait_control::store::records;
use strait_dataplane::batch::{BatchBuilder, Compression, Record};

use super::stamp::{self, LoadStamp};
use super::state::Run;
use crate::kafka::now_us;
use crate::payload::RecordShape;
use crate::stats::Pacer;

/// What every producer task sends.
#[derive(Debug, Clone)]
pub struct ProducePlan {
    pub topic: String,
    /// Source partitions, by task index.
    pub partitions: Vec<i32>,
    /// Records per second, all partitions together; `None` = flat out.
    pub rate_per_s: Option<f64>,
    /// Records in all (`--records`), or `None` to run until `end_us`.
    pub records: Option<u64>,
    /// Stop producing at this time, µs since the epoch.
    pub end_us: Option<u64>,
    pub record_size: usize,
    pub shape: RecordShape,
    pub codec: Compression,
    /// A batch holds at most this many uncompressed bytes of records (at least one record).
    pub batch_bytes: usize,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl ProducePlan {
    /// Records task `index` sends in all, when the run is bounded by a count: the count split
    /// evenly, the first partitions taking the remainder.
    pub fn quota(&self, index: usize) -> Option<u64> {
        let n = self.partitions.len().max(1) as u64;
        self.records
            .map(|r| r / n + u64::from((index as u64) < r % n))
    }

    fn records_per_batch(&self) -> u64 {
        (self.batch_bytes / self.shape.record_bytes().max(1)).max(1) as u64
    }

    /// The batch of records `first..first + n` of task `index`, stamped `now`.
    fn batch(
        &self,
        run_id: u64,
        index: usize,
        first: u64,
        n: u64,
        now: u64,
    ) -> Result<bytes::Bytes> {
        // Kafka's sequence numbers wrap from i32::MAX to 0.
        let base_sequence = (first % (i32::MAX as u64 + 1)) as i32;
        let mut b = BatchBuilder::new(self.codec).producer(
            self.producer_id,
            self.producer_epoch,
            base_sequence,
        );
        for seq in first..first + n {
            let s = LoadStamp {
                run_id,
                partition: index as u32,
                seq,
                send_us: now,
            };
            let mut rec = Record::new(
                (now / 1000) as i64,
                self.shape.key(seq),
                Some(stamp::value(&s, self.record_size, &self.shape)),
            );
            rec.headers = self.shape.headers(seq);
            b.push(&rec).map_err(|e| anyhow!("building a batch: {e}"))?;
        }
        b.build().map_err(|e| anyhow!("building a batch: {e}"))
    }
}

/// Sends task `index`'s share until the plan's end, its quota, or `run.stop`.
pub async fn produce_partition(
    cluster: Rc<Cluster>,
    plan: Rc<ProducePlan>,
    index: usize,
    run: Rc<RefCell<Run>>,
) -> Result<()> {
    let partition = plan.partitions[index];
    let quota = plan.quota(index);
    let per_batch = plan.records_per_batch();
    let (run_id, start_us) = {
        let r = run.borrow();
        (r.run_id, r.start_us)
    };
    let share = plan.partitions.len().max(1) as f64;
    let pacer = Pacer::new(start_us, plan.rate_per_s.map(|r| r / share));
    let mut sent = 0u64;
    loop {
        let now = now_us();
        let ended = plan.end_us.is_some_and(|e| now >= e) || quota.is_some_and(|q| sent >= q);
        if ended || run.borrow().stop {
            return Ok(());
        }
        let due = quota.map_or(pacer.due(now), |q| pacer.due(now).min(q));
        let behind = due.saturating_sub(sent);
        if behind == 0 {
            let wake = pacer.time_of(sent + 1).unwrap_or(now);
            let wait_us = wake.saturating_sub(now).clamp(200, 10_000);
            tokio::time::sleep(Duration::from_micros(wait_us)).await;
            continue;
        }
        let n = behind.min(per_batch);
        let first = {
            let mut r = run.borrow_mut();
            if plan.rate_per_s.is_some() {
                r.max_behind_records = r.max_behind_records.max(behind);
            }
            if !r.tracker.may_send(n) {
                r.stop = true;
                r.stop_reason = Some("the most records one run tracks were sent".into());
                return Ok(());
            }
            r.tracker.sent(index, n)
        };
        let batch = plan.batch(run_id, index, first, n, now)?;
        records::produce_batch(&cluster, &plan.topic, partition, &batch)
            .await
            .with_context(|| format!("producing to {}-{partition} on the source", plan.topic))?;
        sent += n;
        let bytes = n * plan.shape.record_bytes() as u64;
        run.borrow_mut().produced(now, n, bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(records: Option<u64>, partitions: usize) -> ProducePlan {
        ProducePlan {
            topic: "t".into(),
            partitions: (0..partitions as i32).collect(),
            rate_per_s: None,
            records,
            end_us: None,
            record_size: 100,
            shape: RecordShape::new(100, 0, 0, 2),
            codec: Compression::Zstd,
            batch_bytes: 1000,
            producer_id: 5,
            producer_epoch: 0,
        }
    }

    #[test]
    fn quotas_add_up_to_the_records_asked() {
        let p = plan(Some(10), 3);
        assert_eq!(
            (0..3).map(|i| p.quota(i).unwrap()).collect::<Vec<_>>(),
            vec![4, 3, 3]
        );
        assert_eq!(plan(None, 3).quota(0), None);
    }

    #[test]
    fn batches_carry_stamps_the_reader_understands() {
        let p = plan(None, 2);
        // 100-byte values and two 10-byte headers: 8 records fit 1000 bytes.
        assert_eq!(p.records_per_batch(), 8);
        let b = p.batch(42, 1, 3, 4, 1_000_000).expect("batch");
        let walked = strait_dataplane::batch::BatchWalker::new(b)
            .next()
            .expect("one batch")
            .expect("valid batch");
        let recs = strait_dataplane::batch::decode_records(&walked, 1 << 20).expect("records");
        let stamps: Vec<LoadStamp> = recs
            .iter()
            .map(|r| LoadStamp::read(r.value.as_deref().unwrap()).unwrap())
            .collect();
        assert_eq!(stamps.len(), 4);
        assert!(stamps.iter().all(|s| s.run_id == 42 && s.partition == 1));
        assert_eq!(
            stamps.iter().map(|s| s.seq).collect::<Vec<_>>(),
            vec![3, 4, 5, 6]
        );
        assert_eq!(recs[0].headers.len(), 2);
    }
}
