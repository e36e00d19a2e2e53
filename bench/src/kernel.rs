//! The two system calls the relay floor (relay.rs) needs beyond std, through rustix's safe
//! wrappers (so the crate keeps `forbid(unsafe_code)`): splice(2) and the calling thread's CPU
//! clock.
#![forbid(unsafe_code)]

use std::net::TcpStream;

use anyhow::{Context, Result, bail};
use rustix::pipe::{PipeFlags, SpliceFlags, fcntl_setpipe_size, pipe_with, splice};
use rustix::time::{ClockId, clock_gettime};

/// The calling thread's user + system CPU, seconds (CLOCK_THREAD_CPUTIME_ID: nanoseconds, the
/// same account as getrusage(RUSAGE_THREAD), without /proc's 10 ms ticks).
pub fn thread_cpu_s() -> f64 {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// Moves everything `inbound` delivers into `outbound` through a pipe of `pipe_bytes` capacity,
/// `pipe_bytes` at most per call, until `inbound` ends; returns the count. The payload stays in
/// kernel pages: the pipe holds references to the received socket buffers.
pub fn splice_all(inbound: &TcpStream, outbound: &TcpStream, pipe_bytes: usize) -> Result<u64> {
    let (pipe_read, pipe_write) = pipe_with(PipeFlags::CLOEXEC).context("pipe2")?;
    // The kernel rounds the capacity up to a power of two pages; above
    // /proc/sys/fs/pipe-max-size (1 MiB) only a privileged process may go.
    fcntl_setpipe_size(&pipe_write, pipe_bytes)
        .with_context(|| format!("F_SETPIPE_SZ {pipe_bytes}"))?;
    let flags = SpliceFlags::MOVE | SpliceFlags::MORE;
    let mut forwarded_bytes = 0u64;
    loop {
        let in_bytes = splice(inbound, None, &pipe_write, None, pipe_bytes, flags)
            .context("splice socket → pipe")?;
        if in_bytes == 0 {
            return Ok(forwarded_bytes);
        }
        // Drain the pipe whole before the next fill: the next fill then always has room.
        let mut left_bytes = in_bytes;
        while left_bytes > 0 {
            let out_bytes = splice(&pipe_read, None, outbound, None, left_bytes, flags)
                .context("splice pipe → socket")?;
            if out_bytes == 0 {
                bail!("splice pipe → socket moved nothing with {left_bytes} bytes in the pipe");
            }
            left_bytes -= out_bytes;
        }
        forwarded_bytes += in_bytes as u64;
    }
}
