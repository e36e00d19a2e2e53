//! CI smoke test: the `smoke` scenario against strait on the real test bed, end to end through
//! the `strait-bench` binary, and the JSON it writes has every field the results table and
//! plots read. It measures nothing: speed is never asserted in a test.
//!
//! Needs the test bed (`scripts/testbed up`; `STRAIT_TESTBED_DIR` says where) and the `strait`
//! binary next to `strait-bench` (`cargo test --workspace` builds it, because strait-control
//! has integration tests). Fails, never skips, when either is missing.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn testbed_dir() -> PathBuf {
    std::env::var_os("STRAIT_TESTBED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.testbed"))
}

fn require_testbed() {
    let env_file = testbed_dir().join("testbed.env");
    let text = std::fs::read_to_string(&env_file).unwrap_or_else(|e| {
        panic!(
            "the Kafka test bed is not set up ({}: {e}); run `scripts/testbed up` or `scripts/test.sh`",
            env_file.display()
        )
    });
    for var in ["STRAIT_SOURCE_BOOTSTRAP", "STRAIT_TARGET_BOOTSTRAP"] {
        let addr = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("export {var}=")))
            .unwrap_or_else(|| panic!("{} has no {var}", env_file.display()));
        if std::net::TcpStream::connect(addr.trim_matches('\'')).is_err() {
            panic!(
                "the Kafka test bed is not running ({addr} refuses connections); run `scripts/testbed up`"
            );
        }
    }
}

#[test]
fn smoke_scenario_against_strait_writes_a_complete_result() {
    require_testbed();
    let bench = Path::new(env!("CARGO_BIN_EXE_strait-bench"));
    let strait = bench.with_file_name("strait");
    assert!(
        strait.exists(),
        "{} is missing: build it with `cargo build -p strait-control --bin strait` (cargo test --workspace builds it)",
        strait.display()
    );
    let dir = std::env::temp_dir().join(format!("strait-bench-smoke-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("smoke.json");
    let run = Command::new(bench)
        .args([
            "run",
            "--scenario",
            "smoke",
            "--replicator",
            "strait",
            "--timeout-s",
            "120",
        ])
        .arg("--out")
        .arg(&out)
        .arg("--work-dir")
        .arg(dir.join("work"))
        .env("STRAIT_TESTBED_DIR", testbed_dir())
        .output()
        .expect("strait-bench runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "strait-bench run failed ({}):\n{stdout}\n{stderr}",
        run.status
    );

    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    for k in [
        "scenario", "date", "commit", "command", "machine", "params", "entries",
    ] {
        assert!(!doc[k].is_null(), "result has no {k}: {doc}");
    }
    assert_eq!(doc["scenario"], "smoke");
    for k in ["nproc", "cpu_model", "mem_total_mib", "kernel"] {
        assert!(!doc["machine"][k].is_null(), "machine has no {k}");
    }
    let entries = doc["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    let e = &entries[0];
    assert_eq!(e["tool"], "strait");
    assert_eq!(e["complete"], true, "{}", e["error"]);
    let expected = doc["params"]["records"].as_u64().unwrap();
    assert_eq!(e["records"].as_u64(), Some(expected));
    for k in [
        "gib",
        "wall_s",
        "cpu_s",
        "peak_rss_mib",
        "p50_ms",
        "p99_ms",
        "p999_ms",
        "max_ms",
        "startup_s",
        "copy_s",
        "cpu_copy_s",
        "cpu_s_per_gib",
        "mib_per_s",
        "records_per_s",
    ] {
        let v = e[k]
            .as_f64()
            .unwrap_or_else(|| panic!("entry field {k} is missing or not a number: {e}"));
        assert!(v.is_finite() && v >= 0.0, "{k} = {v}");
    }
    // What the run must have observed for the numbers to mean anything.
    assert!(e["gib"].as_f64().unwrap() > 0.0);
    assert!(
        e["peak_rss_mib"].as_f64().unwrap() > 0.0,
        "no memory sampled"
    );
    assert!(e["p50_ms"].as_f64().unwrap() <= e["p99_ms"].as_f64().unwrap());
    assert!(e["p99_ms"].as_f64().unwrap() <= e["p999_ms"].as_f64().unwrap());
    assert!(
        !e["series"].as_array().unwrap().is_empty(),
        "no per-second series"
    );
    assert!(
        !e["latency_cdf"].as_array().unwrap().is_empty(),
        "no latency CDF"
    );
    assert!(e["cpu_breakdown"]["window_s"].as_f64().unwrap() > 0.0);
    assert!(
        e["replicator"]["config"]
            .as_str()
            .unwrap()
            .contains("bootstrap.servers")
    );
    assert!(stdout.contains("strait [none] ok"), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}
