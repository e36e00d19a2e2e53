//! One transport trait, two drivers: tokio-uring (io_uring) and tokio on epoll.
//!
//! Buffers are passed by ownership and come back with the result, the io_uring way, so the same
//! caller code runs on both. Both drivers read into a buffer's spare capacity (after its current
//! length) and write a list of segments with vectored writes, so forwarded record batches reach
//! the kernel straight from the fetched response buffer.
//!
//! Futures are `!Send`: every shard runs a single-threaded runtime.

use std::io;
use std::net::{Shutdown, SocketAddr};

use bytes::{Buf, Bytes, BytesMut};

/// Segments handed to one vectored write call. Linux caps iovecs at 1024 (IOV_MAX); staying
/// well below it keeps each call cheap.
const MAX_IOVECS_PER_WRITE: usize = 256;

/// A connected byte stream.
#[allow(async_fn_in_trait)] // shards are single-threaded: these futures are !Send by design
pub trait Transport: Sized + 'static {
    /// Opens a TCP connection with Nagle's algorithm off (Kafka requests are latency-bound).
    async fn connect(addr: SocketAddr) -> io::Result<Self>;

    /// Reads into `buf`'s spare capacity, appending after its current length. `Ok(0)` is EOF.
    /// The caller reserves capacity first.
    async fn read(&self, buf: BytesMut) -> (io::Result<usize>, BytesMut);

    /// Writes every byte of every segment, in order.
    async fn write_all(&self, segs: Vec<Bytes>) -> io::Result<()>;

    /// Shuts both directions down, waking a pending read. Idempotent; errors are ignored.
    fn shutdown(&self);
}

/// tokio `current_thread` runtime on epoll.
#[derive(Debug)]
pub struct EpollTcp(tokio::net::TcpStream);

impl Transport for EpollTcp {
    async fn connect(addr: SocketAddr) -> io::Result<Self> {
        let s = tokio::net::TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        Ok(EpollTcp(s))
    }

    async fn read(&self, mut buf: BytesMut) -> (io::Result<usize>, BytesMut) {
        loop {
            if let Err(e) = self.0.readable().await {
                return (Err(e), buf);
            }
            match self.0.try_read_buf(&mut buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                res => return (res, buf),
            }
        }
    }

    async fn write_all(&self, mut segs: Vec<Bytes>) -> io::Result<()> {
        let mut first = 0;
        while first < segs.len() {
            self.0.writable().await?;
            let end = (first + MAX_IOVECS_PER_WRITE).min(segs.len());
            let slices: Vec<io::IoSlice<'_>> = segs[first..end]
                .iter()
                .map(|s| io::IoSlice::new(s))
                .collect();
            let written = match self.0.try_write_vectored(&slices) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            };
            drop(slices);
            first = advance(&mut segs, first, written);
        }
        Ok(())
    }

    fn shutdown(&self) {
        let _ = socket2::SockRef::from(&self.0).shutdown(Shutdown::Both);
    }
}

/// tokio-uring (io_uring).
pub struct UringTcp(tokio_uring::net::TcpStream);

impl std::fmt::Debug for UringTcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UringTcp")
    }
}

impl Transport for UringTcp {
    async fn connect(addr: SocketAddr) -> io::Result<Self> {
        let s = tokio_uring::net::TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        Ok(UringTcp(s))
    }

    async fn read(&self, buf: BytesMut) -> (io::Result<usize>, BytesMut) {
        use tokio_uring::buf::BoundedBuf;
        // io_uring reads at the start of the buffer it is given, so give it the spare capacity
        // as a slice; the kernel owns that memory until the completion arrives.
        let (len, cap) = (buf.len(), buf.capacity());
        if len == cap {
            return (
                Err(io::Error::other("read buffer has no spare capacity")),
                buf,
            );
        }
        let (res, slice) = self.0.read(buf.slice(len..cap)).await;
        (res, slice.into_inner())
    }

    async fn write_all(&self, mut segs: Vec<Bytes>) -> io::Result<()> {
        let mut first = 0;
        while first < segs.len() {
            let end = (first + MAX_IOVECS_PER_WRITE).min(segs.len());
            // The kernel borrows the segments until completion; Bytes clones are reference
            // counts, not copies.
            let batch: Vec<Bytes> = segs[first..end].to_vec();
            let (res, _batch) = self.0.writev(batch).await;
            let written = match res {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            first = advance(&mut segs, first, written);
        }
        Ok(())
    }

    fn shutdown(&self) {
        let _ = self.0.shutdown(Shutdown::Both);
    }
}

/// Consumes `written` bytes from `segs[first..]`; returns the index of the first segment that
/// still has bytes to send.
fn advance(segs: &mut [Bytes], mut first: usize, mut written: usize) -> usize {
    while written > 0 && first < segs.len() {
        let len = segs[first].len();
        if written >= len {
            written -= len;
            first += 1;
        } else {
            segs[first].advance(written);
            written = 0;
        }
    }
    while first < segs.len() && segs[first].is_empty() {
        first += 1;
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_handles_partial_writes() {
        let mut segs = vec![
            Bytes::from_static(b"abc"),
            Bytes::from_static(b""),
            Bytes::from_static(b"defg"),
        ];
        let first = advance(&mut segs, 0, 2);
        assert_eq!((first, &segs[0][..]), (0, &b"c"[..]));
        let first = advance(&mut segs, first, 3);
        assert_eq!((first, &segs[2][..]), (2, &b"fg"[..]));
        assert_eq!(advance(&mut segs, first, 2), 3);
    }
}
