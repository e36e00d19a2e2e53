//! Writes seed inputs for the fuzz targets: valid record sets the fuzzer can mutate from, so it
//! starts deep inside the decoders instead of rediscovering the framing and the codecs.

use std::fs;
use std::path::Path;

use bytes::Bytes;
use strait_dataplane::batch::{
    BatchBuilder, Compression, ControlType, HEADER_LEN, Record, end_txn_marker,
};

fn record(i: usize) -> Record {
    let mut r = Record::new(
        1_700_000_000_000 + i as i64,
        if i.is_multiple_of(3) {
            None
        } else {
            Some(Bytes::from(format!("key-{i}")))
        },
        if i % 5 == 4 {
            None
        } else {
            Some(Bytes::from(format!("value {i} ").repeat(i % 7)))
        },
    );
    if i % 2 == 1 {
        r.headers.push((
            Bytes::from_static(b"h"),
            if i % 4 == 1 {
                None
            } else {
                Some(Bytes::from_static(b"v"))
            },
        ));
    }
    r
}

fn main() -> std::io::Result<()> {
    let out = Path::new("corpus");
    fs::create_dir_all(out.join("walker"))?;
    fs::create_dir_all(out.join("records"))?;
    for codec in Compression::ALL {
        let mut set = Vec::new();
        let mut dense = BatchBuilder::new(codec)
            .base_offset(0)
            .producer(1, 0, 0)
            .transactional(true);
        let mut gappy = BatchBuilder::new(codec)
            .base_offset(4)
            .log_append_time(1_700_000_999_999);
        for i in 0..4 {
            dense.push(&record(i)).expect("small records fit");
            gappy
                .push_at(i as i32 * 2, &record(i + 4))
                .expect("small records fit");
        }
        let dense = dense.build().expect("builds");
        set.extend_from_slice(&dense);
        set.extend_from_slice(&end_txn_marker(ControlType::Abort, 4, 1, 0, 3));
        set.extend_from_slice(&gappy.build().expect("builds"));
        set.extend_from_slice(&dense[..dense.len() / 2]);
        fs::write(out.join("walker").join(format!("set-{codec}")), &set)?;

        // records target: selector, count, payload.
        let mut input = vec![codec.id()];
        input.extend_from_slice(&dense[57..HEADER_LEN]);
        input.extend_from_slice(&dense[HEADER_LEN..]);
        fs::write(out.join("records").join(format!("payload-{codec}")), &input)?;
    }
    Ok(())
}
