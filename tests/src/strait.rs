//! Running the `strait` binary from tests: with a deadline, stderr kept in a file (a pipe nobody
//! reads would block it), and its closing summary line parsed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `strait` process.
#[derive(Debug)]
pub struct Strait {
    child: Child,
    stderr_path: PathBuf,
    what: String,
}

/// How a `strait` process ended.
#[derive(Debug, Clone)]
pub struct StraitExit {
    /// The exit code, `None` when a signal ended it.
    pub code: Option<i32>,
    pub stderr: String,
    pub elapsed: Duration,
}

/// The closing line `strait: N partitions; R records in B batches (F fast, S rebuilt, M merged),
/// X bytes`: B batches produced, of F source batches forwarded and S rebuilt, M of which (small
/// ones queued behind a full produce window) were merged into others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub partitions: u64,
    pub records: u64,
    pub batches: u64,
    pub fast: u64,
    pub rebuilt: u64,
    pub merged: u64,
}

impl StraitExit {
    /// The run's summary line; panics (with stderr) when there is none.
    pub fn summary(&self) -> Summary {
        self.stderr
            .lines()
            .rev()
            .find_map(parse_summary)
            .unwrap_or_else(|| panic!("strait printed no summary line; stderr:\n{}", self.stderr))
    }

    /// Panics with stderr unless the exit code is `code`.
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "strait exited with {:?}, expected {code}; stderr:\n{}",
            self.code,
            self.stderr
        );
        self
    }
}

fn parse_summary(line: &str) -> Option<Summary> {
    let rest = line.strip_prefix("strait: ")?;
    let (partitions, rest) = rest.split_once(" partitions; ")?;
    let (records, rest) = rest.split_once(" records in ")?;
    let (batches, rest) = rest.split_once(" batches (")?;
    let (fast, rest) = rest.split_once(" fast, ")?;
    let (rebuilt, rest) = rest.split_once(" rebuilt")?;
    let merged = match rest.strip_prefix(", ") {
        Some(rest) => rest.split_once(" merged)")?.0.parse().ok()?,
        None => 0,
    };
    Some(Summary {
        merged,
        partitions: partitions.parse().ok()?,
        records: records.parse().ok()?,
        batches: batches.parse().ok()?,
        fast: fast.parse().ok()?,
        rebuilt: rebuilt.parse().ok()?,
    })
}

impl Strait {
    /// Waits until the log says exactly-once took `partitions` partitions over (it copies from
    /// then on); panics after 60 s with the end of the log.
    pub fn wait_taken_over(&self, partitions: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let log = self.stderr();
            if log.matches("exactly-once: partition taken over").count() >= partitions {
                return;
            }
            if std::time::Instant::now() >= deadline {
                let lines: Vec<&str> = log.lines().collect();
                let tail = lines[lines.len().saturating_sub(60)..].join("\n");
                panic!("strait took no partition over within 60 s; the end of its log:\n{tail}");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Starts `bin run --config CONFIG ARGS...`.
    pub fn start(bin: &Path, config: &Path, args: &[&str]) -> Strait {
        Strait::start_with_env(bin, config, args, &[])
    }

    /// Like [`Strait::start`], with `env` set in the process's environment too.
    pub fn start_with_env(
        bin: &Path,
        config: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Strait {
        let stderr_path = tempfile::Builder::new()
            .prefix("strait-stderr-")
            .tempfile()
            .expect("temp file")
            .into_temp_path()
            .keep()
            .expect("keep temp file");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut cmd = Command::new(bin);
        cmd.arg("run")
            .arg("--config")
            .arg(config)
            .args(args)
            .env("NO_COLOR", "1")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or("info".into()),
            )
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let what = format!(
            "strait run --config {} {}",
            config.display(),
            args.join(" ")
        );
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        Strait {
            child,
            stderr_path,
            what,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has ended (it is reaped; [`Strait::wait`] then returns at once).
    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// What was written to stderr so far.
    pub fn stderr(&self) -> String {
        match std::fs::read(&self.stderr_path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => format!("(cannot read {}: {e})", self.stderr_path.display()),
        }
    }

    /// The address its REST API bound (from the log line `REST API and /metrics listening
    /// address=...`), once it is logged.
    pub fn api_address(&self) -> Option<String> {
        let log = self.stderr();
        let line = log
            .lines()
            .find(|l| l.contains("REST API and /metrics listening"))?;
        let (_, rest) = line.split_once("address=")?;
        rest.split_whitespace().next().map(str::to_string)
    }

    /// Sends `signal` (e.g. "TERM", "KILL") to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} {} failed", self.pid());
    }

    /// Waits for the process to end. After `timeout` it is killed and the test fails with its
    /// stderr.
    pub fn wait(mut self, timeout: Duration) -> StraitExit {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return StraitExit {
                    code: status.code(),
                    stderr: self.stderr(),
                    elapsed: start.elapsed(),
                };
            }
            if start.elapsed() > timeout {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{} did not finish within {timeout:?}; stderr:\n{}",
                    self.what,
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Strait {
    fn drop(&mut self) {
        // A failing test must not leave a replicator running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.stderr_path);
    }
}

/// Runs `bin run --config CONFIG ARGS...` to its end (at most `timeout`).
pub fn run_strait(bin: &Path, config: &Path, args: &[&str], timeout: Duration) -> StraitExit {
    Strait::start(bin, config, args).wait(timeout)
}

/// `strait verify --json` on `config` with `args`: its exit code, the report and its stderr.
/// Fails the test when it prints no JSON report.
pub fn verify_json(bin: &Path, config: &Path, args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = Command::new(bin)
        .args(["verify", "--config"])
        .arg(config)
        .args(["--json"])
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("strait verify runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("verify printed no JSON ({e}):\n{stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), report, stderr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_summary_line() {
        let s = parse_summary(
            "strait: 3 partitions; 1200 records in 40 batches (38 fast, 2 rebuilt), 99999 bytes",
        )
        .unwrap();
        assert_eq!(
            s,
            Summary {
                partitions: 3,
                records: 1200,
                batches: 40,
                fast: 38,
                rebuilt: 2,
                merged: 0,
            }
        );
        assert_eq!(parse_summary("strait: partition t-0 stopped: x"), None);
        let s = parse_summary(
            "strait: 1 partitions; 900 records in 3 batches (300 fast, 0 rebuilt, 298 merged), 9 bytes",
        )
        .unwrap();
        assert_eq!((s.batches, s.fast, s.merged), (3, 300, 298));
    }
}
