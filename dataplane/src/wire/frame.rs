//! Kafka framing: every request and response is a big-endian `int32` size followed by that many
//! bytes. Responses are cut out of the receive buffer as frozen [`Bytes`], so that everything a
//! decoder slices out of them (above all, fetched record sets) stays a zero-copy view.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The size prefix of every frame.
pub const SIZE_PREFIX_LEN: usize = 4;

/// Why a frame could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame size {size} is negative")]
    NegativeSize { size: i32 },
    #[error("frame of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge { size: usize, max: usize },
}

/// Cuts complete frames out of a byte stream.
///
/// The driver reads socket bytes straight into [`FrameDecoder::buffer_mut`]'s spare capacity
/// (see [`FrameDecoder::reserve_for_read`]), so a response crosses user space exactly once: from
/// the kernel into this buffer. Each frame is then `split_to().freeze()`n off, which is a
/// reference-count operation, not a copy.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    max_frame_bytes: usize,
}

/// Spare room below which a new receive chunk is allocated. Small responses (produce answers)
/// then share one chunk instead of costing an allocation each.
const MIN_SPARE_BYTES: usize = 4 * 1024;
/// Size of a new receive chunk when no large frame is pending.
const READ_CHUNK_BYTES: usize = 64 * 1024;

impl FrameDecoder {
    /// `max_frame_bytes` bounds both a single frame and the memory this decoder holds.
    pub fn new(max_frame_bytes: usize) -> Self {
        FrameDecoder {
            buf: BytesMut::with_capacity(READ_CHUNK_BYTES),
            max_frame_bytes,
        }
    }

    pub fn max_frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }

    /// The buffer socket bytes are appended to.
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Bytes buffered but not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Makes room for the next read. When the size of the frame being received is known, the
    /// room covers the whole frame, so a large fetch response lands in one allocation without
    /// being moved again; otherwise a fresh chunk is taken only when the current one is nearly
    /// full, so that many small responses share it.
    pub fn reserve_for_read(&mut self) {
        let spare = self.buf.capacity() - self.buf.len();
        match self.pending_frame_len() {
            Some(total) if total <= self.max_frame_bytes + SIZE_PREFIX_LEN => {
                let missing = total.saturating_sub(self.buf.len());
                if spare < missing.max(MIN_SPARE_BYTES) {
                    self.buf.reserve(missing.max(MIN_SPARE_BYTES));
                }
            }
            _ if spare < MIN_SPARE_BYTES => self.buf.reserve(READ_CHUNK_BYTES),
            _ => {}
        }
    }

    /// Total length (prefix included) of the frame at the head of the buffer, if its prefix has
    /// arrived and is sane.
    fn pending_frame_len(&self) -> Option<usize> {
        if self.buf.len() < SIZE_PREFIX_LEN {
            return None;
        }
        let size = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        usize::try_from(size).ok().map(|s| s + SIZE_PREFIX_LEN)
    }

    /// The next complete frame (without its size prefix), `Ok(None)` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buf.len() < SIZE_PREFIX_LEN {
            return Ok(None);
        }
        let size = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        let size = usize::try_from(size).map_err(|_| FrameError::NegativeSize { size })?;
        if size > self.max_frame_bytes {
            return Err(FrameError::TooLarge {
                size,
                max: self.max_frame_bytes,
            });
        }
        if self.buf.len() < SIZE_PREFIX_LEN + size {
            return Ok(None);
        }
        self.buf.advance(SIZE_PREFIX_LEN);
        Ok(Some(self.buf.split_to(size).freeze()))
    }
}

/// An outgoing frame as a list of segments for one vectored write. Small encoded pieces are
/// gathered into shared buffers; large payloads (record batches) are separate segments that
/// point at the fetched bytes, so they are never copied in user space.
#[derive(Debug, Default, Clone)]
pub struct Segments {
    segs: Vec<Bytes>,
    len: usize,
}

impl Segments {
    pub fn new() -> Self {
        Segments::default()
    }

    pub fn single(b: Bytes) -> Self {
        let len = b.len();
        Segments { segs: vec![b], len }
    }

    pub fn push(&mut self, b: Bytes) {
        if !b.is_empty() {
            self.len += b.len();
            self.segs.push(b);
        }
    }

    pub fn extend(&mut self, other: Segments) {
        self.len += other.len;
        self.segs.extend(other.segs);
    }

    /// Total bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[Bytes] {
        &self.segs
    }

    pub fn into_vec(self) -> Vec<Bytes> {
        self.segs
    }

    /// Concatenates the segments. A copy: only for tests, TLS (which must copy into the
    /// encryptor anyway) and diagnostics.
    pub fn to_contiguous(&self) -> BytesMut {
        let mut out = BytesMut::with_capacity(self.len);
        for s in &self.segs {
            out.put_slice(s);
        }
        out
    }
}

/// Builds one frame out of small encoded pieces and large zero-copy payloads, then fills in the
/// size prefix.
#[derive(Debug)]
pub struct FrameBuilder {
    /// The first piece, which holds the size prefix; kept mutable until [`FrameBuilder::finish`].
    head: Option<BytesMut>,
    cur: BytesMut,
    segs: Segments,
}

impl Default for FrameBuilder {
    fn default() -> Self {
        FrameBuilder::new()
    }
}

impl FrameBuilder {
    pub fn new() -> Self {
        let mut cur = BytesMut::with_capacity(256);
        cur.put_i32(0); // size, patched in finish()
        FrameBuilder {
            head: None,
            cur,
            segs: Segments::new(),
        }
    }

    /// The buffer small pieces are encoded into.
    pub fn small(&mut self) -> &mut BytesMut {
        &mut self.cur
    }

    /// Appends a payload by reference.
    pub fn push_payload(&mut self, payload: Bytes) {
        if payload.is_empty() {
            return;
        }
        self.flush_small();
        self.segs.push(payload);
    }

    fn flush_small(&mut self) {
        let piece = self.cur.split();
        if self.head.is_none() {
            self.head = Some(piece);
        } else {
            self.segs.push(piece.freeze());
        }
    }

    /// The finished frame. Fails only if it would exceed `i32::MAX` bytes.
    pub fn finish(mut self) -> Result<Segments, FrameError> {
        self.flush_small();
        let mut head = self.head.take().expect("flush_small always sets head");
        let total = head.len() + self.segs.len();
        let size = total - SIZE_PREFIX_LEN;
        let size_i32 = i32::try_from(size).map_err(|_| FrameError::TooLarge {
            size,
            max: i32::MAX as usize,
        })?;
        head[..SIZE_PREFIX_LEN].copy_from_slice(&size_i32.to_be_bytes());
        let mut out = Segments::single(head.freeze());
        out.extend(self.segs);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn partial_frames_wait_for_more_bytes() {
        let mut d = FrameDecoder::new(1024);
        let f = frame(b"hello");
        d.buffer_mut().extend_from_slice(&f[..3]);
        assert_eq!(d.next_frame(), Ok(None));
        d.buffer_mut().extend_from_slice(&f[3..7]);
        assert_eq!(d.next_frame(), Ok(None));
        d.buffer_mut().extend_from_slice(&f[7..]);
        assert_eq!(d.next_frame(), Ok(Some(Bytes::from_static(b"hello"))));
        assert_eq!(d.next_frame(), Ok(None));
    }

    #[test]
    fn hostile_sizes_are_errors_not_allocations() {
        let mut d = FrameDecoder::new(1024);
        d.buffer_mut().extend_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(d.next_frame(), Err(FrameError::NegativeSize { size: -5 }));

        let mut d = FrameDecoder::new(1024);
        d.buffer_mut().extend_from_slice(&i32::MAX.to_be_bytes());
        d.reserve_for_read();
        assert!(
            d.buffer_mut().capacity() < 1 << 20,
            "reserved by a hostile size"
        );
        assert_eq!(
            d.next_frame(),
            Err(FrameError::TooLarge {
                size: i32::MAX as usize,
                max: 1024
            })
        );
    }

    #[test]
    fn frames_are_views_of_the_receive_buffer() {
        let mut d = FrameDecoder::new(1 << 20);
        let body = vec![7u8; 100_000];
        d.buffer_mut().extend_from_slice(&frame(&body));
        let base = d.buffer_mut().as_ptr() as usize;
        let f = d.next_frame().unwrap().unwrap();
        assert_eq!(f.as_ptr() as usize, base + SIZE_PREFIX_LEN);
    }

    #[test]
    fn small_frames_share_receive_chunks() {
        let mut d = FrameDecoder::new(1 << 20);
        let mut held = Vec::new();
        let mut chunks = std::collections::HashSet::new();
        for i in 0..200u8 {
            d.reserve_for_read();
            // Where a read would land: the start of the spare capacity.
            let spare_at = d.buffer_mut().as_ptr() as usize + d.buffered();
            d.buffer_mut().extend_from_slice(&frame(&[i; 100]));
            let f = d.next_frame().unwrap().unwrap();
            chunks.insert(spare_at & !0xffff);
            // Responses are still in use when the next read starts.
            held.push(f);
        }
        // 200 responses of 104 bytes fit a few 64 KiB chunks, not 200 allocations.
        assert!(chunks.len() <= 4, "{} chunks", chunks.len());
        assert!(
            held.iter()
                .enumerate()
                .all(|(i, f)| f[..] == [i as u8; 100])
        );
    }

    #[test]
    fn builder_keeps_payloads_as_their_own_segments() {
        let payload = Bytes::from(vec![1u8; 4096]);
        let mut b = FrameBuilder::new();
        b.small().put_slice(b"head");
        b.push_payload(payload.clone());
        b.small().put_slice(b"mid");
        b.push_payload(payload.clone());
        b.small().put_slice(b"tail");
        let segs = b.finish().unwrap();
        assert_eq!(segs.as_slice().len(), 5);
        assert_eq!(segs.as_slice()[1].as_ptr(), payload.as_ptr());
        assert_eq!(segs.as_slice()[3].as_ptr(), payload.as_ptr());
        let flat = segs.to_contiguous();
        assert_eq!(segs.len(), flat.len());
        let mut d = FrameDecoder::new(1 << 20);
        d.buffer_mut().extend_from_slice(&flat);
        let body = d.next_frame().unwrap().unwrap();
        assert_eq!(body.len(), 4 + 4096 + 3 + 4096 + 4);
        assert_eq!(&body[..4], b"head");
        assert_eq!(&body[body.len() - 4..], b"tail");
    }

    proptest! {
        /// Any sequence of frames, delivered in arbitrary chunks, comes out whole and in order.
        #[test]
        fn framing_round_trips_across_arbitrary_chunking(
            bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..3000), 0..20),
            cuts in proptest::collection::vec(1usize..5000, 0..40),
        ) {
            let mut stream = Vec::new();
            for body in &bodies {
                let mut b = FrameBuilder::new();
                // Split each body into a small piece and a payload piece at an arbitrary point.
                let mid = body.len() / 3;
                b.small().put_slice(&body[..mid]);
                b.push_payload(Bytes::copy_from_slice(&body[mid..]));
                stream.extend_from_slice(&b.finish().unwrap().to_contiguous());
            }
            let mut d = FrameDecoder::new(1 << 20);
            let mut out = Vec::new();
            let mut pos = 0;
            let mut cut_iter = cuts.into_iter().cycle();
            while pos < stream.len() {
                let n = cut_iter.next().unwrap_or(stream.len()).min(stream.len() - pos);
                d.reserve_for_read();
                d.buffer_mut().extend_from_slice(&stream[pos..pos + n]);
                pos += n;
                while let Some(f) = d.next_frame().unwrap() {
                    out.push(f.to_vec());
                }
            }
            prop_assert_eq!(out, bodies);
            prop_assert_eq!(d.buffered(), 0);
        }

        /// Garbage never panics: it yields frames, waits, or errors.
        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut d = FrameDecoder::new(64);
            d.buffer_mut().extend_from_slice(&data);
            for _ in 0..100 {
                match d.next_frame() {
                    Ok(Some(_)) => continue,
                    Ok(None) | Err(_) => break,
                }
            }
        }
    }
}
