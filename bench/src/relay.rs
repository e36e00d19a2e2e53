//! The CPU floor of a forwarder (issue 27, item 4): what moving bytes from one TCP connection to
//! another costs on this machine when nothing else is done to them. Three threads on loopback:
//! a sender writes N bytes into a connection, a relay accepts it and forwards every byte to a
//! second connection, a sink reads and checks them. Only the relay thread's CPU is the figure.
//!
//! Two relays: `read-write` reads into a user-space buffer and writes it out (the floor of any
//! forwarder that sees the bytes, strait included); `splice` moves them socket → pipe → socket
//! with splice(2), so payload never enters user space (what "keep the bytes in the kernel"
//! could at best reach).
//!
//! On loopback a write also runs the receiving socket's protocol work in the writer's thread
//! (softirq on the same CPU), so the relay's CPU includes the sink side's TCP receive, as a
//! replicator's CPU on the loopback test bed includes its brokers' sockets' receive. The relay
//! is not cheating: the sink checks every byte against the sender's pattern.
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use serde::Serialize;

use crate::stats::{GIB, MIB};

/// How the relay thread moves bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// read() into a user-space buffer, write_all() out.
    ReadWrite,
    /// splice(2) socket → pipe → socket, SPLICE_F_MOVE | SPLICE_F_MORE.
    Splice,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::ReadWrite => "read-write",
            Mode::Splice => "splice",
        }
    }

    /// `read-write`, `splice` or `both` (in that order).
    pub fn parse_list(text: &str) -> Result<Vec<Mode>> {
        match text {
            "read-write" => Ok(vec![Mode::ReadWrite]),
            "splice" => Ok(vec![Mode::Splice]),
            "both" => Ok(vec![Mode::ReadWrite, Mode::Splice]),
            other => bail!("unknown relay mode '{other}' (read-write, splice, both)"),
        }
    }
}

/// One relay's run.
#[derive(Debug, Clone, Serialize)]
pub struct RelayRun {
    pub mode: Mode,
    pub round: usize,
    /// Bytes the sink received and checked (always the requested count: else the run fails).
    pub bytes: u64,
    /// From the relay's first read to its last byte written out.
    pub wall_s: f64,
    /// The relay thread's user + system CPU over the same window (CLOCK_THREAD_CPUTIME_ID).
    pub relay_cpu_s: f64,
    /// The split of that CPU, from /proc/thread-self/stat (clock ticks, so coarse: 10 ms).
    pub relay_user_s: f64,
    pub relay_sys_s: f64,
    pub cpu_s_per_gib: f64,
    pub mib_per_s: f64,
}

/// What every relay is given.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RelayParams {
    pub bytes: u64,
    /// The read-write relay's buffer, the splice relay's pipe capacity and bytes per splice
    /// call, and the sender's write size.
    pub buffer_bytes: usize,
}

/// Median, smallest and largest of one figure over the rounds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// `None` for no values. The median of an even count is the mean of the middle two.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => return None,
            _ if n % 2 == 1 => v[n / 2],
            _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// One mode over all rounds.
#[derive(Debug, Clone, Serialize)]
pub struct ModeSummary {
    pub mode: Mode,
    pub rounds: usize,
    pub bytes: u64,
    pub wall_s: Spread,
    pub relay_cpu_s: Spread,
    pub cpu_s_per_gib: Spread,
    pub mib_per_s: Spread,
}

/// Runs `rounds` rounds; each round runs every mode once, in the given order (so that modes
/// alternate and a burst of other load on the machine falls on both).
pub fn run_rounds(params: RelayParams, modes: &[Mode], rounds: usize) -> Result<Vec<RelayRun>> {
    let mut runs = Vec::new();
    for round in 1..=rounds {
        for &mode in modes {
            let run = run_once(params, mode, round)
                .with_context(|| format!("{} relay, round {round}", mode.name()))?;
            eprintln!("strait-bench: relay {}", line(&run));
            runs.push(run);
        }
    }
    Ok(runs)
}

/// Per mode, in the order of `modes`: the spread of each figure over the rounds.
pub fn summarize(runs: &[RelayRun], modes: &[Mode]) -> Vec<ModeSummary> {
    modes
        .iter()
        .filter_map(|&mode| {
            let of = |f: fn(&RelayRun) -> f64| {
                let v: Vec<f64> = runs.iter().filter(|r| r.mode == mode).map(f).collect();
                Spread::of(&v)
            };
            Some(ModeSummary {
                mode,
                rounds: runs.iter().filter(|r| r.mode == mode).count(),
                bytes: runs.iter().find(|r| r.mode == mode)?.bytes,
                wall_s: of(|r| r.wall_s)?,
                relay_cpu_s: of(|r| r.relay_cpu_s)?,
                cpu_s_per_gib: of(|r| r.cpu_s_per_gib)?,
                mib_per_s: of(|r| r.mib_per_s)?,
            })
        })
        .collect()
}

/// One run, as a human reads it.
pub fn line(r: &RelayRun) -> String {
    format!(
        "{:<10} round {}: {:.0} MiB in {:.2} s ({:.0} MiB/s), relay CPU {:.3} s \
         (user {:.2}, sys {:.2}) = {:.3} CPU s/GiB",
        r.mode.name(),
        r.round,
        r.bytes as f64 / MIB,
        r.wall_s,
        r.mib_per_s,
        r.relay_cpu_s,
        r.relay_user_s,
        r.relay_sys_s,
        r.cpu_s_per_gib,
    )
}

/// One mode's summary, as a human reads it.
pub fn summary_line(s: &ModeSummary) -> String {
    format!(
        "{:<10} {} rounds of {:.0} MiB: {:.3} CPU s/GiB (median; {:.3}-{:.3}), \
         {:.0} MiB/s ({:.0}-{:.0})",
        s.mode.name(),
        s.rounds,
        s.bytes as f64 / MIB,
        s.cpu_s_per_gib.median,
        s.cpu_s_per_gib.min,
        s.cpu_s_per_gib.max,
        s.mib_per_s.median,
        s.mib_per_s.min,
        s.mib_per_s.max,
    )
}

/// The relay's own measurement, taken inside its thread.
struct RelayCost {
    forwarded_bytes: u64,
    wall_s: f64,
    cpu_s: f64,
    user_s: f64,
    sys_s: f64,
}

/// Sender → relay → sink over loopback, once.
pub fn run_once(params: RelayParams, mode: Mode, round: usize) -> Result<RelayRun> {
    ensure!(
        params.buffer_bytes > 0,
        "the buffer must hold at least a byte"
    );
    let relay_listener = TcpListener::bind("127.0.0.1:0").context("binding the relay")?;
    let sink_listener = TcpListener::bind("127.0.0.1:0").context("binding the sink")?;
    let relay_addr = relay_listener.local_addr()?;
    let sink_addr = sink_listener.local_addr()?;
    let pattern = Pattern::new(params.buffer_bytes);
    let (cost, received_bytes) = thread::scope(|scope| {
        let sink = scope.spawn(|| sink(&sink_listener, &pattern, params.buffer_bytes));
        let relay = scope.spawn(|| {
            let (inbound, _) = relay_listener.accept().context("accepting the sender")?;
            let outbound = TcpStream::connect(sink_addr).context("connecting to the sink")?;
            relay(mode, inbound, outbound, params.buffer_bytes)
        });
        let sender = scope.spawn(|| send(relay_addr, &pattern, params));
        let sent = join(sender, "sender");
        let cost = join(relay, "relay");
        let received = join(sink, "sink");
        sent?;
        anyhow::Ok((cost?, received?))
    })?;
    ensure!(
        cost.forwarded_bytes == params.bytes && received_bytes == params.bytes,
        "sent {} bytes, the relay forwarded {}, the sink received {}",
        params.bytes,
        cost.forwarded_bytes,
        received_bytes
    );
    let gib = params.bytes as f64 / GIB;
    Ok(RelayRun {
        mode,
        round,
        bytes: params.bytes,
        wall_s: cost.wall_s,
        relay_cpu_s: cost.cpu_s,
        relay_user_s: cost.user_s,
        relay_sys_s: cost.sys_s,
        cpu_s_per_gib: cost.cpu_s / gib,
        mib_per_s: params.bytes as f64 / MIB / cost.wall_s.max(1e-9),
    })
}

fn join<T>(handle: thread::ScopedJoinHandle<'_, Result<T>>, who: &str) -> Result<T> {
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("the {who} thread panicked"))?
        .with_context(|| format!("the {who}"))
}

/// The bytes sent: a pseudo-random block whose length is a prime (65 521), repeated. Byte `i`
/// of the stream is `block[i % PERIOD]`, so a lost, repeated or reordered piece shows unless it
/// is a whole number of periods long, and then the byte count shows it.
struct Pattern {
    /// The block twice over and then some, so that any `buffer_bytes` long piece starting
    /// inside the first block is one contiguous slice.
    bytes: Vec<u8>,
}

const PERIOD: usize = 65_521;

impl Pattern {
    fn new(buffer_bytes: usize) -> Pattern {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let block: Vec<u8> = (0..PERIOD)
            .map(|_| {
                // xorshift64: cheap, and no byte value or short run is favoured.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let len = PERIOD + buffer_bytes;
        let bytes = block.iter().copied().cycle().take(len).collect();
        Pattern { bytes }
    }

    /// The `len` bytes of the stream from offset `at`.
    fn at(&self, at: u64, len: usize) -> &[u8] {
        let start = (at % PERIOD as u64) as usize;
        &self.bytes[start..start + len]
    }
}

fn send(relay: std::net::SocketAddr, pattern: &Pattern, params: RelayParams) -> Result<()> {
    let mut out = TcpStream::connect(relay).context("connecting to the relay")?;
    let mut sent_bytes = 0u64;
    while sent_bytes < params.bytes {
        let n = (params.bytes - sent_bytes).min(params.buffer_bytes as u64) as usize;
        out.write_all(pattern.at(sent_bytes, n))?;
        sent_bytes += n as u64;
    }
    out.shutdown(Shutdown::Write)?;
    Ok(())
}

/// Reads to the end, checking every byte; returns the count.
fn sink(listener: &TcpListener, pattern: &Pattern, buffer_bytes: usize) -> Result<u64> {
    let (mut inbound, _) = listener.accept().context("accepting the relay")?;
    let mut buf = vec![0u8; buffer_bytes];
    let mut received_bytes = 0u64;
    loop {
        let n = inbound.read(&mut buf)?;
        if n == 0 {
            return Ok(received_bytes);
        }
        if buf[..n] != *pattern.at(received_bytes, n) {
            bail!("the bytes at offset {received_bytes} are not the ones sent");
        }
        received_bytes += n as u64;
    }
}

/// Forwards until the sender closes; measures its own thread only.
fn relay(
    mode: Mode,
    inbound: TcpStream,
    outbound: TcpStream,
    buffer_bytes: usize,
) -> Result<RelayCost> {
    let ticks_per_s = crate::procfs::clock_ticks_per_second() as f64;
    let stat_before = thread_stat();
    let cpu_before_s = crate::kernel::thread_cpu_s();
    let started = Instant::now();
    let forwarded_bytes = match mode {
        Mode::ReadWrite => read_write(&inbound, &outbound, buffer_bytes)?,
        Mode::Splice => crate::kernel::splice_all(&inbound, &outbound, buffer_bytes)?,
    };
    outbound.shutdown(Shutdown::Write)?;
    let wall_s = started.elapsed().as_secs_f64();
    let cpu_s = crate::kernel::thread_cpu_s() - cpu_before_s;
    let stat_after = thread_stat();
    let ticks_s = |f: fn(&crate::procfs::ProcStat) -> u64| match (stat_before, stat_after) {
        (Some(a), Some(b)) => f(&b).saturating_sub(f(&a)) as f64 / ticks_per_s,
        _ => f64::NAN,
    };
    Ok(RelayCost {
        forwarded_bytes,
        wall_s,
        cpu_s,
        user_s: ticks_s(|s| s.utime),
        sys_s: ticks_s(|s| s.stime),
    })
}

fn thread_stat() -> Option<crate::procfs::ProcStat> {
    crate::procfs::parse_stat(&std::fs::read_to_string("/proc/thread-self/stat").ok()?)
}

fn read_write(
    mut inbound: &TcpStream,
    mut outbound: &TcpStream,
    buffer_bytes: usize,
) -> Result<u64> {
    let mut buf = vec![0u8; buffer_bytes];
    let mut forwarded_bytes = 0u64;
    loop {
        let n = inbound.read(&mut buf)?;
        if n == 0 {
            return Ok(forwarded_bytes);
        }
        outbound.write_all(&buf[..n])?;
        forwarded_bytes += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_relays_forward_every_byte_and_cost_cpu() {
        let params = RelayParams {
            bytes: 8 << 20,
            buffer_bytes: 64 << 10,
        };
        let modes = Mode::parse_list("both").unwrap();
        let runs = run_rounds(params, &modes, 1).unwrap();
        assert_eq!(runs.len(), 2);
        for r in &runs {
            assert_eq!(r.bytes, 8 << 20);
            assert!(r.relay_cpu_s.is_finite() && r.relay_cpu_s > 0.0, "{r:?}");
            assert!(
                r.cpu_s_per_gib.is_finite() && r.cpu_s_per_gib > 0.0,
                "{r:?}"
            );
            assert!(r.wall_s.is_finite() && r.wall_s > 0.0, "{r:?}");
        }
        let summary = summarize(&runs, &modes);
        assert_eq!(summary.len(), 2);
        assert_eq!(summary[1].mode, Mode::Splice);
    }

    #[test]
    fn an_odd_total_and_a_small_buffer_still_arrive_whole() {
        let params = RelayParams {
            bytes: 1_000_003,
            buffer_bytes: 4096,
        };
        for mode in [Mode::ReadWrite, Mode::Splice] {
            assert_eq!(run_once(params, mode, 1).unwrap().bytes, 1_000_003);
        }
    }

    #[test]
    fn the_pattern_is_the_stream() {
        let p = Pattern::new(16);
        assert_eq!(p.at(0, 16), p.at(PERIOD as u64, 16));
        assert_eq!(p.at(3, 4), &p.at(0, 16)[3..7]);
        assert_ne!(p.at(0, 16), p.at(1, 16));
    }

    #[test]
    fn spreads() {
        let s = Spread::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 10.0));
        assert_eq!(Spread::of(&[4.0]).unwrap().median, 4.0);
        assert!(Spread::of(&[]).is_none());
    }

    #[test]
    fn modes_parse() {
        assert_eq!(Mode::parse_list("splice").unwrap(), vec![Mode::Splice]);
        assert!(Mode::parse_list("sendfile").is_err());
    }
}
