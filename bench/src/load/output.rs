//! What `strait-bench load` reports: the JSON result, the summary printed at the end, and the
//! series as CSV and two self-contained SVG plots (latency and throughput over time), written
//! next to the JSON.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::series::{IntervalPoint, Percentiles};
use super::track::Counts;
use crate::stats::MIB;

/// What was asked.
#[derive(Debug, Clone, Serialize)]
pub struct Setup {
    pub flow: String,
    pub topic: String,
    pub remote_topic: String,
    /// The test topic was created by this run (and removed at the end unless `kept`).
    pub created_topic: bool,
    pub kept: bool,
    pub partitions: usize,
    /// Records per second asked, all partitions; 0 = flat out.
    pub rate: f64,
    pub record_size_bytes: usize,
    pub key_size_bytes: usize,
    pub headers: usize,
    pub compression: String,
    pub batch_bytes: usize,
    pub drain_timeout_s: u64,
    pub interval_s: f64,
}

/// Records and bytes over a span.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Throughput {
    pub records: u64,
    /// Key + value + header bytes.
    pub bytes: u64,
    pub secs: f64,
    pub records_per_s: f64,
    pub mib_per_s: f64,
}

impl Throughput {
    pub fn new(records: u64, bytes: u64, secs: f64) -> Throughput {
        let per = |v: f64| if secs > 0.0 { v / secs } else { 0.0 };
        Throughput {
            records,
            bytes,
            secs,
            records_per_s: per(records as f64),
            mib_per_s: per(bytes as f64 / MIB),
        }
    }
}

/// The result of one run (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct LoadResult {
    /// Run id (hex): every record's stamp carries it.
    pub run_id: String,
    /// When production started, ms since the Unix epoch.
    pub started_ms: u64,
    pub setup: Setup,
    /// Acknowledged by the source, from the start to the end of production.
    pub produced: Throughput,
    /// First copies read on the target, from the start to the last first copy.
    pub received: Throughput,
    /// Sent, received, lost, duplicated, out of order, misplaced: all partitions.
    pub counts: Counts,
    pub per_partition: Vec<Counts>,
    /// Records stamped with this run's id but a partition or sequence it never sent.
    pub unexpected: u64,
    /// Records on the remote topic this run did not write.
    pub foreign: u64,
    /// End-to-end latency (stamp to read on the target) of every first copy; `None` when
    /// nothing arrived.
    pub latency: Option<Percentiles>,
    /// Most records due by the rate but not yet sent at any moment (the source or this process
    /// could not keep the rate when it is large).
    pub max_behind_records: u64,
    /// Seconds from the end of production until the last record arrived, or the drain timeout.
    pub drain_s: f64,
    pub fetch_errors: u64,
    pub last_fetch_error: Option<String>,
    /// Why production stopped early.
    pub stop_reason: Option<String>,
    pub intervals: Vec<IntervalPoint>,
    /// The checks that failed, in words; empty when the run passed.
    pub problems: Vec<String>,
}

impl LoadResult {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The verdict: lost records always fail; duplicates unless allowed.
pub fn problems(c: &Counts, allow_duplicates: bool, drain_timeout_s: u64) -> Vec<String> {
    let mut out = Vec::new();
    if c.lost > 0 {
        out.push(format!(
            "{} of {} records sent never arrived within {drain_timeout_s} s after production ended",
            c.lost, c.sent
        ));
    }
    if c.duplicated > 0 && !allow_duplicates {
        out.push(format!(
            "{} duplicate copies arrived (--allow-duplicates accepts them)",
            c.duplicated
        ));
    }
    out
}

/// The summary printed at the end.
pub fn summary(r: &LoadResult) -> String {
    let s = &r.setup;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "flow {}: {} ({} partitions) -> {}, run {}",
        s.flow, s.topic, s.partitions, s.remote_topic, r.run_id
    );
    let _ = writeln!(
        out,
        "  produced   {} records in {:.1} s: {:.0} records/s, {:.2} MiB/s ({} B values, {} B keys, {} headers, {})",
        r.produced.records,
        r.produced.secs,
        r.produced.records_per_s,
        r.produced.mib_per_s,
        s.record_size_bytes,
        s.key_size_bytes,
        s.headers,
        s.compression
    );
    let _ = writeln!(
        out,
        "  received   {} records: {:.0} records/s, {:.2} MiB/s",
        r.received.records, r.received.records_per_s, r.received.mib_per_s
    );
    let _ = match &r.latency {
        Some(l) => writeln!(
            out,
            "  latency    p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms, max {:.1} ms",
            l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms
        ),
        None => writeln!(out, "  latency    - (nothing arrived)"),
    };
    let c = &r.counts;
    let _ = writeln!(
        out,
        "  lost {}, duplicated {}, out of order {}, misplaced {} (of {} sent); other records on the topic {}",
        c.lost, c.duplicated, c.out_of_order, c.misplaced, c.sent, r.foreign
    );
    let _ = if r.ok() {
        writeln!(out, "OK: every record sent arrived, once")
    } else {
        writeln!(out, "FAILED: {}", r.problems.join("; "))
    };
    out
}

/// Writes `json`, and next to it `<stem>.csv`, `<stem>-latency.svg` and
/// `<stem>-throughput.svg`. Returns the paths written.
pub fn write_files(json: &Path, r: &LoadResult) -> Result<Vec<PathBuf>> {
    if let Some(dir) = json.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let stem = json.with_extension("");
    let side = |suffix: &str| PathBuf::from(format!("{}{suffix}", stem.display()));
    let files = [
        (json.to_path_buf(), serde_json::to_string_pretty(r)? + "\n"),
        (side(".csv"), csv(r)),
        (side("-latency.svg"), latency_svg(r)),
        (side("-throughput.svg"), throughput_svg(r)),
    ];
    let mut written = Vec::new();
    for (path, text) in files {
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// One row per interval.
pub fn csv(r: &LoadResult) -> String {
    let mut out = String::from(
        "start_s,produced_records_per_s,produced_mib_per_s,received_records_per_s,received_mib_per_s,duplicates,latency_count,p50_ms,p90_ms,p99_ms,p999_ms,max_ms\n",
    );
    let secs = r.setup.interval_s.max(1e-3);
    for p in &r.intervals {
        let lat = p.latency.map_or_else(
            || "0,,,,,".to_string(),
            |l| {
                format!(
                    "{},{:.3},{:.3},{:.3},{:.3},{:.3}",
                    l.count, l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms
                )
            },
        );
        let _ = writeln!(
            out,
            "{:.3},{:.1},{:.4},{:.1},{:.4},{},{lat}",
            p.start_s,
            p.produced as f64 / secs,
            p.produced_bytes as f64 / MIB / secs,
            p.received as f64 / secs,
            p.received_bytes as f64 / MIB / secs,
            p.duplicates,
        );
    }
    out
}

fn latency_svg(r: &LoadResult) -> String {
    let pick = |f: fn(&Percentiles) -> f64| -> Vec<Option<(f64, f64)>> {
        r.intervals
            .iter()
            .map(|p| p.latency.as_ref().map(|l| (p.start_s, f(l))))
            .collect()
    };
    line_chart(
        &format!(
            "End-to-end latency, {} -> {} ({})",
            r.setup.topic, r.setup.remote_topic, r.setup.flow
        ),
        "ms",
        &[
            Line {
                name: "p50",
                color: "#1f77b4",
                points: pick(|l| l.p50_ms),
            },
            Line {
                name: "p99",
                color: "#ff7f0e",
                points: pick(|l| l.p99_ms),
            },
            Line {
                name: "max",
                color: "#d62728",
                points: pick(|l| l.max_ms),
            },
        ],
    )
}

fn throughput_svg(r: &LoadResult) -> String {
    let secs = r.setup.interval_s.max(1e-3);
    let pick = |f: fn(&IntervalPoint) -> u64| -> Vec<Option<(f64, f64)>> {
        r.intervals
            .iter()
            .map(|p| Some((p.start_s, f(p) as f64 / secs)))
            .collect()
    };
    line_chart(
        &format!("Throughput, {} ({})", r.setup.topic, r.setup.flow),
        "records/s",
        &[
            Line {
                name: "produced",
                color: "#1f77b4",
                points: pick(|p| p.produced),
            },
            Line {
                name: "received",
                color: "#2ca02c",
                points: pick(|p| p.received),
            },
        ],
    )
}

const W: f64 = 900.0;
const H: f64 = 360.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 130.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 45.0;

/// A round step for about five ticks up to `max`.
fn tick_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One line of a chart: its legend, colour and points (`None`: a gap).
#[derive(Debug, Clone)]
pub struct Line<'a> {
    pub name: &'a str,
    pub color: &'a str,
    pub points: Vec<Option<(f64, f64)>>,
}

/// Plot coordinates: data ranges and the plot area.
struct Frame {
    x_max: f64,
    y_max: f64,
    pw: f64,
    ph: f64,
}

impl Frame {
    fn sx(&self, x: f64) -> f64 {
        LEFT + x / self.x_max * self.pw
    }
    fn sy(&self, y: f64) -> f64 {
        TOP + self.ph - y / self.y_max * self.ph
    }
}

/// A line chart: x in seconds, one line per series, gaps where a point is `None`.
pub fn line_chart(title: &str, y_unit: &str, lines: &[Line<'_>]) -> String {
    let pts = || lines.iter().flat_map(|l| l.points.iter().flatten());
    let x_max = pts().map(|p| p.0).fold(0.0, f64::max).max(1.0);
    let y_top = pts().map(|p| p.1).fold(0.0, f64::max);
    let y_step = tick_step(if y_top > 0.0 { y_top } else { 1.0 });
    let f = Frame {
        x_max,
        y_max: (y_top / y_step).ceil().max(1.0) * y_step,
        pw: W - LEFT - RIGHT,
        ph: H - TOP - BOTTOM,
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" font-size="14" text-anchor="middle">{}</text>"#,
        W / 2.0,
        esc(title)
    );
    axes(&mut o, &f, y_step, y_unit);
    for (i, l) in lines.iter().enumerate() {
        line(&mut o, &f, i, l);
    }
    o.push_str("</svg>\n");
    o
}

/// Grid lines, tick labels and axis titles.
fn axes(o: &mut String, f: &Frame, y_step: f64, y_unit: &str) {
    let mut y = 0.0;
    while y <= f.y_max + y_step * 1e-9 {
        let (x2, yy, lx, ly, label) = (LEFT + f.pw, f.sy(y), LEFT - 6.0, f.sy(y) + 4.0, trim(y));
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" x2="{x2}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{lx}" y="{ly:.1}" text-anchor="end">{label}</text>"##
        );
        y += y_step;
    }
    let x_step = tick_step(f.x_max);
    let mut x = 0.0;
    while x <= f.x_max + x_step * 1e-9 {
        let (xx, y2, ly, label) = (f.sx(x), TOP + f.ph, TOP + f.ph + 16.0, trim(x));
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{TOP}" y2="{y2}" stroke="#eee"/><text x="{xx:.1}" y="{ly}" text-anchor="middle">{label}</text>"##
        );
        x += x_step;
    }
    let (cx, by, my) = (LEFT + f.pw / 2.0, H - 8.0, TOP + f.ph / 2.0);
    let unit = esc(y_unit);
    let _ = writeln!(
        o,
        r#"<text x="{cx}" y="{by}" text-anchor="middle">seconds since the start</text><text x="16" y="{my}" transform="rotate(-90 16 {my})" text-anchor="middle">{unit}</text>"#
    );
}

/// Line `i` and its legend entry.
fn line(o: &mut String, f: &Frame, i: usize, l: &Line<'_>) {
    let mut d = String::new();
    let mut pen_down = false;
    for p in &l.points {
        match p {
            Some((x, y)) => {
                let pen = if pen_down { "L" } else { "M" };
                let _ = write!(d, "{pen}{:.1},{:.1} ", f.sx(*x), f.sy(*y));
                pen_down = true;
            }
            None => pen_down = false,
        }
    }
    let (color, d) = (l.color, d.trim_end());
    let _ = writeln!(
        o,
        r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.5"/>"#
    );
    let ly = TOP + 10.0 + 18.0 * i as f64;
    let (x1, x2, tx, ty, name) = (
        W - RIGHT + 15.0,
        W - RIGHT + 35.0,
        W - RIGHT + 40.0,
        ly + 4.0,
        esc(l.name),
    );
    let _ = writeln!(
        o,
        r#"<line x1="{x1}" x2="{x2}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{tx}" y="{ty}">{name}</text>"#
    );
}

/// A tick label without float noise.
fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(10.0), 2.0);
        assert_eq!(tick_step(1000.0), 200.0);
        assert_eq!(tick_step(7.3), 2.0);
        assert_eq!(tick_step(0.04), 0.01);
        assert_eq!(trim(0.30000000000000004), "0.3");
    }

    #[test]
    fn charts_have_a_line_per_series_with_gaps() {
        let svg = line_chart(
            "t <1>",
            "ms",
            &[
                Line {
                    name: "a",
                    color: "#000",
                    points: vec![Some((0.0, 1.0)), None, Some((2.0, 3.0))],
                },
                Line {
                    name: "b",
                    color: "#111",
                    points: vec![Some((0.0, 2.0)), Some((1.0, 2.5))],
                },
            ],
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<path").count(), 2);
        // The gap lifts the pen: two M in the first path.
        let first = svg.split("<path d=\"").nth(1).unwrap();
        assert_eq!(first.split('"').next().unwrap().matches('M').count(), 2);
        assert!(svg.contains("t &lt;1&gt;"));
    }

    #[test]
    fn the_verdict_fails_on_loss_and_on_duplicates_unless_allowed() {
        let c = Counts {
            sent: 10,
            received: 9,
            lost: 1,
            duplicated: 2,
            ..Counts::default()
        };
        assert_eq!(problems(&c, false, 5).len(), 2);
        assert_eq!(problems(&c, true, 5).len(), 1);
        assert!(problems(&Counts::default(), false, 5).is_empty());
    }
}
