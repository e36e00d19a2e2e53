//! REST API v1 of a running `strait run` against the real test bed: flows and partitions,
//! stop/resume at flow, topic and partition scope, offsets (rewind, skip, 409 while running),
//! the bearer token from a config provider, JSON errors.
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use strait_tests::api::{api_addr, call, eventually, produce_round_robin as produce};
use strait_tests::log::{create_topic, offsets, read_records};
use strait_tests::strait::Strait;
use strait_tests::{Testbed, temp_file, testbed_mm2_config, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");
const TOKEN: &str = "tok-3f9a1c77e2";

fn values(addr: &str, topic: &str, p: i32) -> Vec<String> {
    read_records(addr, topic, p)
        .iter()
        .map(|r| r.value_str())
        .collect()
}

/// The partitions of flow A->B, by partition number, once `pred` holds for all of them.
fn partitions_when(addr: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (code, v) = call(addr, "GET", "/flows/A-%3EB/partitions", None, "");
        let mut ps = v["partitions"].as_array().cloned().unwrap_or_default();
        ps.sort_by_key(|p| p["partition"].as_i64());
        if code == 200 && !ps.is_empty() && ps.iter().all(&pred) {
            return ps;
        }
        // The last answer says which partition is not there yet, and why.
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; last answer {code}: {v}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn patch(
    addr: &str,
    topic: &str,
    partition: i32,
    offset: i64,
    token: Option<&str>,
) -> (u16, Value) {
    let body = format!(
        r#"{{"offsets":[{{"partition":{{"cluster":"A","topic":"{topic}","partition":{partition}}},"offset":{{"offset":{offset}}}}}]}}"#
    );
    call(addr, "PATCH", "/flows/A-%3EB/offsets", token, &body)
}

#[test]
fn flows_stop_resume_and_offsets() {
    let tb = Testbed::get();
    let topic = unique("apiv1");
    let remote = format!("A.{topic}");
    create_topic(tb.source(), &topic, 3, &[]);
    produce(&topic, "a", 90);
    let ends: Vec<i64> = offsets(tb.source(), &topic).iter().map(|o| o.1).collect();
    assert!(ends.iter().all(|&e| e >= 3), "{ends:?}");

    // The token comes through Kafka's FileConfigProvider syntax.
    let secrets = temp_file(&format!("token={TOKEN}\n"));
    let cfg = testbed_mm2_config(
        &topic,
        &format!(
            "strait.api.listen = 127.0.0.1:0\nstrait.api.token = ${{file:{}:token}}\n",
            secrets.display()
        ),
    );
    let strait = Strait::start(Path::new(STRAIT), &cfg, &[]);
    let addr = api_addr(&strait);
    let tok = Some(TOKEN);

    // Everything copied; states, counts and since.
    let ps = partitions_when(&addr, "every partition caught up", |p| {
        p["lag_records"] == 0 && p["source_end_offset"].as_i64() > Some(0)
    });
    assert_eq!(ps.len(), 3);
    for (p, end) in ps.iter().zip(&ends) {
        assert_eq!(p["state"], "RUNNING", "{p}");
        assert_eq!(p["next_offset"].as_i64(), Some(*end), "{p}");
        assert_eq!(p["records_copied"].as_i64(), Some(*end), "{p}");
        assert_eq!(p["lag_seconds"].as_f64(), Some(0.0), "caught up: {p}");
        // The console producer writes plain dense batches: every one is forwarded as it came.
        assert!(p["bytes_copied"].as_u64() > Some(0), "{p}");
        let fast = p["fast_batches"].as_i64().unwrap_or(0);
        assert!((1..=*end).contains(&fast), "{p}");
        assert_eq!(p["slow_batches"].as_i64(), Some(0), "{p}");
        assert_eq!(p["remote_topic"], remote.as_str());
        assert!(p["since_ms"].as_i64().unwrap() > 1_600_000_000_000, "{p}");
    }
    let (code, flows) = call(&addr, "GET", "/flows", None, "");
    assert_eq!(code, 200);
    assert_eq!(flows["flows"][0]["name"], "A->B");
    assert_eq!(flows["flows"][0]["state"], "RUNNING");
    assert_eq!(
        flows["flows"][0]["records_copied"].as_i64(),
        Some(ends.iter().sum())
    );
    assert_eq!(
        flows["flows"][0]["bytes_copied"].as_u64(),
        Some(ps.iter().filter_map(|p| p["bytes_copied"].as_u64()).sum()),
        "{flows}"
    );
    assert_eq!(flows["flows"][0]["lag_seconds"].as_f64(), Some(0.0));
    assert!(
        flows["shards"][0]["produced_bytes"].as_u64() > Some(0),
        "{flows}"
    );
    let (code, flow) = call(&addr, "GET", "/flows/A-%3EB", None, "");
    assert_eq!(
        (code, flow["partitions"].as_u64()),
        (200, Some(3)),
        "{flow}"
    );

    // Errors: unknown things are 404, never 202; a missing or wrong token is 401; changing
    // offsets while running is 409; malformed input is 400.
    for (method, path, token, want, code_name) in [
        ("GET", "/flows/A-%3EC", None, 404, "unknown_flow"),
        ("PUT", "/flows/A-%3EC/stop", tok, 404, "unknown_flow"),
        (
            "PUT",
            "/flows/A-%3EB/topics/nope/stop",
            tok,
            404,
            "unknown_topic",
        ),
        (
            "PUT",
            &format!("/flows/A-%3EB/topics/{topic}/partitions/7/stop") as &str,
            tok,
            404,
            "unknown_partition",
        ),
        ("PUT", "/flows/A-%3EB/stop", None, 401, "unauthorized"),
        (
            "PUT",
            "/flows/A-%3EB/stop",
            Some("wrong"),
            401,
            "unauthorized",
        ),
        ("PUT", "/flows/A-%3EB/explode", tok, 404, "unknown_action"),
        (
            "POST",
            "/partitions/A-%3EB/nope/0/pause",
            tok,
            404,
            "unknown_topic",
        ),
    ] {
        let (code, body) = call(&addr, method, path, token, "");
        assert_eq!(code, want, "{method} {path}: {body}");
        assert_eq!(body["error_code"], code_name, "{method} {path}: {body}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let (code, body) = patch(&addr, &topic, 0, 2, tok);
    assert_eq!(code, 409, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("STOPPED"),
        "{body}"
    );
    let (code, body) = call(
        &addr,
        "PATCH",
        "/flows/A-%3EB/offsets",
        tok,
        "{\"offsets\": 3",
    );
    assert_eq!(
        (code, body["error_code"].as_str()),
        (400, Some("bad_request"))
    );

    // Stored offsets in Connect's shape.
    let (code, stored) = call(&addr, "GET", "/flows/A-%3EB/offsets", None, "");
    assert_eq!(code, 200);
    let p0 = stored["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["partition"]["topic"] == topic.as_str() && o["partition"]["partition"] == 0)
        .unwrap_or_else(|| panic!("no stored offset for {topic}-0: {stored}"));
    assert_eq!(p0["partition"]["cluster"], "A");
    assert_eq!(p0["offset"]["offset"].as_i64(), Some(ends[0]));

    // Rewind: stop the flow, set partition 0 to 2, resume: partition 0's records from 2 come
    // again; the other partitions do not move.
    let (code, body) = call(&addr, "PUT", "/flows/A-%3EB/stop", tok, "");
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["partitions"].as_array().map(Vec::len),
        Some(3),
        "{body}"
    );
    partitions_when(&addr, "every partition STOPPED", |p| {
        p["state"] == "STOPPED"
    });
    let (_, flow) = call(&addr, "GET", "/flows/A-%3EB", None, "");
    assert_eq!(flow["state"], "STOPPED", "{flow}");
    let (code, body) = patch(&addr, &topic, 0, 2, tok);
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["changes"][0]["before"].as_i64(),
        Some(ends[0]),
        "{body}"
    );
    assert_eq!(body["changes"][0]["after"].as_i64(), Some(2), "{body}");
    let (_, stored) = call(&addr, "GET", "/flows/A-%3EB/offsets", None, "");
    assert!(
        stored["offsets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["partition"]["partition"] == 0
                && o["partition"]["topic"] == topic.as_str()
                && o["offset"]["offset"] == 2),
        "{stored}"
    );
    let target_before: Vec<usize> = (0..3)
        .map(|p| values(tb.target(), &remote, p).len())
        .collect();
    let (code, body) = call(&addr, "PUT", "/flows/A-%3EB/resume", tok, "");
    assert_eq!(code, 200, "{body}");
    let source0 = values(tb.source(), &topic, 0);
    let again = source0.len() - 2;
    eventually(60, "partition 0 copied again from offset 2", || {
        (values(tb.target(), &remote, 0).len() == target_before[0] + again).then_some(())
    });
    let t0 = values(tb.target(), &remote, 0);
    assert_eq!(
        &t0[target_before[0]..],
        &source0[2..],
        "partition 0 from offset 2 again"
    );
    partitions_when(&addr, "RUNNING and caught up again", |p| {
        p["state"] == "RUNNING" && p["lag_records"] == 0
    });
    for p in 1..3 {
        assert_eq!(
            values(tb.target(), &remote, p).len(),
            target_before[p as usize],
            "partition {p} must not move"
        );
    }

    // Skip: stop partition 1 alone, produce, set it one past the first new record, resume:
    // that record never reaches the target.
    let path1 = format!("/flows/A-%3EB/topics/{topic}/partitions/1/stop");
    let (code, body) = call(&addr, "PUT", &path1, tok, "");
    assert_eq!(code, 200, "{body}");
    let end1 = offsets(tb.source(), &topic)[1].1;
    produce(&topic, "b", 30);
    let new_end1 = offsets(tb.source(), &topic)[1].1;
    assert!(new_end1 >= end1 + 2, "{end1} {new_end1}");
    let ps = partitions_when(&addr, "partition 1 stopped, the others caught up", |p| {
        if p["partition"] == 1 {
            p["state"] == "STOPPED"
        } else {
            p["lag_records"] == 0 && p["source_end_offset"].as_i64() > Some(0)
        }
    });
    assert_eq!(
        ps[1]["next_offset"].as_i64(),
        Some(end1),
        "a stopped partition must not move"
    );
    // Partition 0 is running: changing its offset is refused, and nothing is applied.
    let body = format!(
        r#"{{"offsets":[{{"partition":{{"cluster":"A","topic":"{topic}","partition":1}},"offset":{{"offset":{}}}}},{{"partition":{{"cluster":"A","topic":"{topic}","partition":0}},"offset":{{"offset":0}}}}]}}"#,
        end1 + 1
    );
    let (code, _) = call(&addr, "PATCH", "/flows/A-%3EB/offsets", tok, &body);
    assert_eq!(code, 409);
    let (code, body) = patch(&addr, &topic, 1, new_end1 + 100, tok);
    assert_eq!(
        (code, body["error_code"].as_str()),
        (400, Some("bad_request")),
        "{body}"
    );
    let (code, body) = patch(&addr, &topic, 1, end1 + 1, tok);
    assert_eq!(code, 200, "{body}");
    let source1 = values(tb.source(), &topic, 1);
    let skipped = source1[end1 as usize].clone();
    let (code, _) = call(
        &addr,
        "PUT",
        &format!("/flows/A-%3EB/topics/{topic}/resume"),
        tok,
        "",
    );
    assert_eq!(code, 200);
    let want1 = target_before[1] + (new_end1 - end1 - 1) as usize;
    eventually(60, "partition 1 resumed past the skipped record", || {
        (values(tb.target(), &remote, 1).len() == want1).then_some(())
    });
    let t1 = values(tb.target(), &remote, 1);
    assert!(
        !t1.contains(&skipped),
        "the skipped record {skipped} reached the target"
    );
    assert_eq!(&t1[target_before[1]..], &source1[end1 as usize + 1..]);

    // The same through `strait ctl`.
    let ctl = |args: &[&str], token: Option<&str>| {
        let mut cmd = std::process::Command::new(STRAIT);
        cmd.arg("ctl")
            .arg("--api")
            .arg(&addr)
            .args(args)
            .env_remove("STRAIT_API_TOKEN");
        if let Some(t) = token {
            cmd.env("STRAIT_API_TOKEN", t);
        }
        let out = cmd.output().expect("strait ctl runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = ctl(&["status"], None);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("A->B") && out.contains("RUNNING") && out.contains(&topic),
        "{out}"
    );
    let (code, out, _) = ctl(&["--json", "status", "A->B"], None);
    assert_eq!(code, Some(0));
    let v: Value = serde_json::from_str(&out).expect("--json prints JSON");
    assert_eq!(
        v["flows"][0]["partition_list"].as_array().map(Vec::len),
        Some(3),
        "{v}"
    );
    // Partition 2 caught up first, so that its stored position is the source's end when it
    // stops (records still in flight would land after the stop and leave it behind): on the
    // target, and acknowledged to strait (the target can hold the last batch before strait
    // has its answer, and the stop keeps the acknowledged position).
    eventually(60, "partition 2 caught up and acknowledged", || {
        let end = offsets(tb.source(), &topic)[2].1;
        let (_, v) = call(&addr, "GET", "/flows/A-%3EB/partitions", None, "");
        let next = v["partitions"]
            .as_array()?
            .iter()
            .find(|p| p["topic"] == topic.as_str() && p["partition"] == 2)?["next_offset"]
            .as_i64()?;
        (values(tb.target(), &remote, 2).len() == values(tb.source(), &topic, 2).len()
            && next == end)
            .then_some(())
    });
    let (code, _, err) = ctl(
        &["stop", "A->B", "--topic", &topic, "--partition", "2"],
        None,
    );
    assert_eq!(code, Some(1), "no token: refused");
    assert!(err.contains("401"), "{err}");
    let (code, out, err) = ctl(
        &["stop", "A->B", "--topic", &topic, "--partition", "2"],
        tok,
    );
    assert_eq!(
        (code, out.trim()),
        (Some(0), "stop: 1 partition(s)"),
        "{err}"
    );
    let end2 = offsets(tb.source(), &topic)[2].1;
    let (code, out, err) = ctl(
        &[
            "offsets",
            "set",
            "A->B",
            "--topic",
            &topic,
            "--partition",
            "2",
            "--offset",
            "1",
        ],
        tok,
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("{topic}-2: {end2} -> 1")), "{out}");
    let (code, out, _) = ctl(&["offsets", "get", "A->B"], None);
    assert_eq!(code, Some(0));
    assert!(out.contains("NEXT OFFSET") && out.contains(&topic), "{out}");
    let (code, _, err) = ctl(&["stop", "A->C"], tok);
    assert_eq!(code, Some(1));
    assert!(err.contains("404 unknown_flow"), "{err}");
    let (code, _, err) = ctl(&["resume", "A->B"], tok);
    assert_eq!(code, Some(0), "{err}");
    let t2 = values(tb.target(), &remote, 2).len();
    eventually(60, "partition 2 copied again from offset 1", || {
        (values(tb.target(), &remote, 2).len() == t2 + (end2 - 1) as usize).then_some(())
    });

    strait.signal("TERM");
    let log = strait.stderr();
    strait.wait(Duration::from_secs(30)).expect_code(0);
    assert!(!log.contains(TOKEN), "the token appears in the log");
    assert!(log.contains("offset changed through the REST API"), "{log}");
}

/// `strait ctl` against a running strait as in the test above.
fn ctl_at(addr: &str, args: &[&str], token: Option<&str>) -> (Option<i32>, String, String) {
    let mut cmd = std::process::Command::new(STRAIT);
    cmd.arg("ctl")
        .arg("--api")
        .arg(addr)
        .args(args)
        .env_remove("STRAIT_API_TOKEN");
    if let Some(t) = token {
        cmd.env("STRAIT_API_TOKEN", t);
    }
    let out = cmd.output().expect("strait ctl runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// With `strait.api.ssl.keystore.location`, the API serves HTTPS only: `strait ctl --tls-ca`
/// reads and changes through it; plain HTTP, an untrusted CA and a missing `--tls-ca` fail.
#[test]
fn api_over_tls() {
    let tb = Testbed::get();
    let topic = unique("apitls");
    create_topic(tb.source(), &topic, 1, &[]);
    produce(&topic, "t", 5);
    let cfg = testbed_mm2_config(
        &topic,
        &format!(
            "strait.api.listen = 127.0.0.1:0\nstrait.api.token = {TOKEN}\nstrait.api.ssl.keystore.location = {}\n",
            tb.var("STRAIT_TLS_SERVER_KEYSTORE_PEM")
        ),
    );
    let strait = Strait::start(Path::new(STRAIT), &cfg, &[]);
    let line = eventually(60, "the API address in the log", || {
        let log = strait.stderr();
        log.lines()
            .find(|l| l.contains("REST API and /metrics listening"))
            .map(str::to_string)
    });
    assert!(
        line.contains("scheme=\"https\"") || line.contains("scheme=https"),
        "{line}"
    );
    let addr = line
        .split("address=")
        .nth(1)
        .and_then(|a| a.split_whitespace().next())
        .expect("address in the line")
        .to_string();
    let ca = tb.var("STRAIT_TLS_CA_PEM").to_string();

    let (code, out, err) = eventually(60, "the topic's partition RUNNING over HTTPS", || {
        let r = ctl_at(&addr, &["--tls-ca", &ca, "status"], None);
        (r.0 == Some(0) && r.1.contains("RUNNING") && r.1.contains(&topic)).then_some(r)
    });
    assert_eq!(code, Some(0), "{out} {err}");
    // Changes need the token over TLS too.
    let (code, _, err) = ctl_at(&addr, &["--tls-ca", &ca, "stop", "A->B"], None);
    assert_eq!(code, Some(1), "refused without the token: {err}");
    let (code, _, err) = ctl_at(&addr, &["--tls-ca", &ca, "stop", "A->B"], Some(TOKEN));
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = ctl_at(&addr, &["--tls-ca", &ca, "resume", "A->B"], Some(TOKEN));
    assert_eq!(code, Some(0), "{err}");

    // Plain HTTP gets no HTTP answer; ctl without --tls-ca, or trusting another CA, fails.
    let mut s = TcpStream::connect(&addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    write!(
        s,
        "GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert!(
        !answer.starts_with(b"HTTP/"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    let (code, _, err) = ctl_at(&addr, &["status"], None);
    assert_eq!(code, Some(3), "plain HTTP to an HTTPS API: {err}");
    let other = tb.var("STRAIT_TLS_OTHER_CA_PEM").to_string();
    let (code, _, err) = ctl_at(&addr, &["--tls-ca", &other, "status"], None);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("cannot reach") && err.to_lowercase().contains("certificate"),
        "{err}"
    );

    strait.signal("TERM");
    let exit = strait.wait(Duration::from_secs(60));
    assert!(
        !exit.stderr.contains(TOKEN),
        "the token leaked into the log"
    );
}
