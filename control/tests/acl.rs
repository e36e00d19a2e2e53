//! `strait run` as a least-privilege principal against clusters with a real authorizer
//! (StandardAuthorizer on the test bed's source and target): the seed-shaped SASL_SSL configs
//! (PLAIN with a JKS truststore and no host name check on the source, SCRAM-SHA-512 with a
//! PKCS#12 truststore on the target), ACL sync with MM2's rules checked by describing the
//! target's ACLs, and missing permissions that stop only what they concern, with messages that
//! say who may not do what where; a pre-flight (`strait check --connect`) that lists them
//! first; broken credentials and certificates failing fast. And `strait run` with every other
//! client security setting (mutual TLS with each key store type, SASL_PLAINTEXT with PLAIN and
//! unsecured OAUTHBEARER), each checking records, offset syncs, checkpoints and heartbeats.
//!
//! The principal is the test bed's `mirror` user; its ACLs are scoped to names (`acl-*` topics
//! and groups, flows `msrc*` -> `mdst*`, see `mirror_acls` in scripts/testbed). Tests take
//! aliases of their own and administer the clusters over PLAINTEXT, a super user.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use strait_control::cluster::{
    AclBinding, Cluster, CommittedOffset, IsolationLevel, NewTopic, RetryConfig, TopicPartition,
    acl,
};
use strait_control::offsets::{Checkpoint, Heartbeat, OffsetSync};
use strait_control::store::records::{self, StoredRecord};
use strait_dataplane::batch::Record;
use strait_dataplane::io::IoBackend;
use strait_tests::strait::Strait;
use strait_tests::{Testbed, setup, temp_file, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// A super-user admin client (PLAINTEXT) of one test-bed cluster on its own runtime.
struct Su {
    rt: tokio::runtime::Runtime,
    local: tokio::task::LocalSet,
    c: Cluster,
}

impl Su {
    fn new(addr: &str) -> Su {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let c = Cluster::new(
            "test-admin",
            vec![addr.to_string()],
            setup(Testbed::get().plaintext(), IoBackend::Epoll),
            RetryConfig::default(),
        );
        Su {
            rt,
            local: tokio::task::LocalSet::new(),
            c,
        }
    }

    fn block<F: std::future::Future>(&self, f: F) -> F::Output {
        self.local.block_on(&self.rt, f)
    }

    fn create(&self, topic: &str, partitions: i32) {
        self.block(
            self.c
                .create_topic(NewTopic::new(topic, partitions), 30_000),
        )
        .unwrap_or_else(|e| panic!("create {topic}: {e}"));
        // CreateTopics answers once the controller has the topic; a broker's metadata may
        // list it a moment later, and `strait check --connect` reads that metadata.
        self.block(self.c.wait_for_leaders(topic, 30_000))
            .unwrap_or_else(|e| panic!("{topic} has no leader: {e}"));
    }

    fn produce(&self, topic: &str, partition: i32, n: usize) {
        let records: Vec<Record> = (0..n)
            .map(|i| {
                Record::new(
                    now_ms(),
                    Some(Bytes::from(format!("k{i}"))),
                    Some(Bytes::from(format!("{topic}-{partition}-{i}"))),
                )
            })
            .collect();
        self.block(records::produce(&self.c, topic, partition, &records))
            .unwrap_or_else(|e| panic!("produce {topic}-{partition}: {e}"));
    }

    /// Every record of `topic`, all partitions, or `None` when the broker says the topic does
    /// not exist. Any other answer (an error of the metadata request, of the topic or of a
    /// partition, a failed fetch) fails the test: "nothing arrived" must never stand for "could
    /// not read".
    fn try_read(&self, topic: &str) -> Option<Vec<StoredRecord>> {
        let conn = self
            .block(self.c.any_conn())
            .unwrap_or_else(|e| panic!("a connection to read {topic}: {e}"));
        let req = MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
                TopicName(StrBytes::from_string(topic.to_string())),
            ))]));
        let md = self
            .block(conn.call(&req))
            .unwrap_or_else(|e| panic!("Metadata for {topic}: {e}"));
        let t = md
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))
            .unwrap_or_else(|| panic!("Metadata for {topic}: the topic is not in the answer"));
        match ResponseError::try_from_code(t.error_code) {
            None => {}
            Some(ResponseError::UnknownTopicOrPartition) => return None,
            Some(e) => panic!("Metadata for {topic}: {e:?}"),
        }
        assert!(!t.partitions.is_empty(), "{topic} has no partitions");
        let mut out = Vec::new();
        for p in &t.partitions {
            if let Some(e) = ResponseError::try_from_code(p.error_code) {
                panic!("Metadata for {topic}-{}: {e:?}", p.partition_index);
            }
            self.block(records::read_to_end(
                &self.c,
                topic,
                p.partition_index,
                IsolationLevel::ReadUncommitted,
                |r| out.push(r),
            ))
            .unwrap_or_else(|e| panic!("reading {topic}-{}: {e}", p.partition_index));
        }
        Some(out)
    }

    /// Every record of `topic`, which must exist (see [`Su::try_read`]).
    fn read(&self, topic: &str) -> Vec<StoredRecord> {
        self.try_read(topic)
            .unwrap_or_else(|| panic!("{topic} does not exist"))
    }

    /// Every record of `topic`; none while it does not exist yet (for polling).
    fn read_or_empty(&self, topic: &str) -> Vec<StoredRecord> {
        self.try_read(topic).unwrap_or_default()
    }

    fn acls(&self) -> Vec<AclBinding> {
        self.block(self.c.describe_topic_acls())
            .expect("DescribeAcls")
            .expect("the test bed's clusters run an authorizer")
    }

    fn add_acls(&self, bindings: &[AclBinding]) {
        for r in self
            .block(self.c.create_acls(bindings))
            .expect("CreateAcls")
        {
            r.expect("ACL created");
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn topic_acl(name: &str, pattern: i8, principal: &str, op: i8, perm: i8) -> AclBinding {
    AclBinding {
        resource_type: acl::RESOURCE_TOPIC,
        resource_name: name.to_string(),
        pattern_type: pattern,
        principal: principal.to_string(),
        host: "*".to_string(),
        operation: op,
        permission_type: perm,
    }
}

fn wait_for(what: &str, s: &Strait, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}; strait's log:\n{}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Aliases inside the principal's ACLs (`msrc*`, `mdst*`) that no other test uses.
fn aliases() -> (String, String) {
    let tb = Testbed::get();
    let id = &unique("x")[2..10];
    (
        format!("{}{id}", tb.var("STRAIT_MIRROR_SOURCE_ALIAS")),
        format!("{}{id}", tb.var("STRAIT_MIRROR_TARGET_ALIAS")),
    )
}

/// A topic and group name prefix inside the principal's ACLs (`acl-*`) that no other test uses.
fn tag() -> String {
    unique(
        Testbed::get()
            .var("STRAIT_MIRROR_TOPIC_PREFIX")
            .trim_end_matches('-'),
    )
}

/// The seed-shaped security settings, as `mirror`: the source on SASL_SSL with PLAIN, a JKS
/// truststore and no host name check; the target on SASL_SSL with SCRAM-SHA-512 and a PKCS#12
/// truststore.
fn security(s: &str, t: &str, password: &str) -> String {
    let tb = Testbed::get();
    let user = tb.var("STRAIT_SASL_MIRROR_USER");
    let ts_pw = tb.var("STRAIT_TLS_TRUSTSTORE_PASSWORD");
    format!(
        "{s}.bootstrap.servers = {}\n\
         {s}.security.protocol = SASL_SSL\n\
         {s}.sasl.mechanism = PLAIN\n\
         {s}.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"{user}\" password=\"{password}\";\n\
         {s}.ssl.truststore.location = {}\n\
         {s}.ssl.truststore.password = {ts_pw}\n\
         {s}.ssl.endpoint.identification.algorithm =\n\
         {t}.bootstrap.servers = {}\n\
         {t}.security.protocol = SASL_SSL\n\
         {t}.sasl.mechanism = SCRAM-SHA-512\n\
         {t}.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{user}\" password=\"{password}\";\n\
         {t}.ssl.truststore.type = PKCS12\n\
         {t}.ssl.truststore.location = {}\n\
         {t}.ssl.truststore.password = {ts_pw}\n",
        tb.source_sasl_ssl(),
        tb.var("STRAIT_TLS_TRUSTSTORE_JKS"),
        tb.target_sasl_ssl(),
        tb.var("STRAIT_TLS_TRUSTSTORE_P12"),
    )
}

/// A one-way flow `s->t` for the topics and groups matching `tag`, as `mirror`, with every
/// duty on and short intervals.
fn config(s: &str, t: &str, tag: &str, extra: &str) -> PathBuf {
    let password = Testbed::get().var("STRAIT_SASL_MIRROR_PASSWORD");
    flow_config(s, t, tag, &security(s, t, password), extra)
}

/// A one-way flow `s->t` for the topics and groups matching `tag`, with the clusters' lines
/// `clusters` (bootstrap and security), every duty on and short intervals.
fn flow_config(s: &str, t: &str, tag: &str, clusters: &str, extra: &str) -> PathBuf {
    temp_file(&format!(
        "clusters = {s}, {t}\n{}\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         strait.progress.topic.replication.factor = 1\n\
         strait.api.listen =\n\
         {s}->{t}.enabled = true\n\
         {s}->{t}.topics = {tag}.*\n\
         {s}->{t}.groups = {tag}.*\n\
         # mirror may write heartbeats to the target only.\n\
         {t}->{s}.emit.heartbeats.enabled = false\n\
         heartbeats.replication.enabled = false\n\
         emit.heartbeats.interval.seconds = 1\n\
         emit.checkpoints.interval.seconds = 1\n\
         sync.group.offsets.enabled = true\n\
         sync.group.offsets.interval.seconds = 1\n\
         refresh.groups.interval.seconds = 1\n\
         refresh.topics.interval.seconds = 1\n\
         sync.topic.acls.interval.seconds = 1\n\
         {extra}\n",
        clusters
    ))
}

/// Every secret the test bed uses that such a run could show.
fn assert_no_secret(what: &str, text: &str) {
    let tb = Testbed::get();
    for secret in [
        tb.var("STRAIT_SASL_MIRROR_PASSWORD"),
        tb.var("STRAIT_TLS_TRUSTSTORE_PASSWORD"),
        tb.password(),
        tb.var("STRAIT_SASL_ADMIN_PASSWORD"),
        tb.var("STRAIT_TLS_CLIENT_KEY_PASSWORD"),
        OIDC_SECRET,
    ] {
        assert!(!text.contains(secret), "{what} shows a secret:\n{text}");
    }
}

/// What the assertions on the target read cannot be read without it: a read that fails (here,
/// no broker answers) fails the test instead of reading as "nothing arrived".
#[test]
#[should_panic(expected = "a connection to read")]
fn a_read_that_fails_is_never_taken_for_an_empty_topic() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    Su::new(&closed.to_string()).read_or_empty("acl-anything");
}

/// The checkpoints of `group` in `topic` (none while the topic does not exist).
fn checkpoints_of(su: &Su, topic: &str, group: &str) -> BTreeMap<(String, i32), i64> {
    su.read_or_empty(topic)
        .iter()
        .filter_map(|r| Checkpoint::decode(r.key.as_deref()?, r.value.as_deref()?).ok())
        .filter(|c| c.group == group)
        .map(|c| ((c.topic, c.partition), c.upstream_offset))
        .collect()
}

#[test]
fn least_privilege_principal_replicates_everything_and_syncs_acls() {
    let (src, tgt) = (
        Su::new(Testbed::get().source()),
        Su::new(Testbed::get().target()),
    );
    let (s, t) = aliases();
    let tag = tag();
    let (a, b, group) = (format!("{tag}-a"), format!("{tag}-b"), format!("{tag}-g"));
    src.create(&a, 2);
    src.create(&b, 1);
    src.produce(&a, 0, 30);
    src.produce(&a, 1, 20);
    src.produce(&b, 0, 10);
    // The group has read 10 records of a-0 and all of a-1.
    let mut committed = BTreeMap::new();
    for (p, o) in [(0, 10), (1, 20)] {
        let offset = CommittedOffset {
            offset: o,
            metadata: String::new(),
        };
        committed.insert(TopicPartition::new(&a, p), offset);
    }
    for r in src
        .block(src.c.offset_commit(&group, &committed))
        .expect("commit")
        .into_values()
    {
        r.expect("committed");
    }
    // Source ACLs: what MM2 copies (LITERAL, ALL as READ, DENY WRITE) and what it does not
    // (ALLOW WRITE, PREFIXED).
    let (allow, deny) = (acl::PERMISSION_ALLOW, acl::PERMISSION_DENY);
    let lit = acl::PATTERN_LITERAL;
    src.add_acls(&[
        topic_acl(&a, lit, "User:bob", acl::OPERATION_ALL, allow),
        topic_acl(&a, lit, "User:bob", acl::OPERATION_WRITE, allow),
        topic_acl(&a, lit, "User:carol", acl::OPERATION_WRITE, deny),
        topic_acl(&b, lit, "User:carol", acl::OPERATION_DESCRIBE, allow),
        topic_acl(
            &tag,
            acl::PATTERN_PREFIXED,
            "User:dave",
            acl::OPERATION_READ,
            allow,
        ),
    ]);
    let started_ms = now_ms();

    let run = Strait::start(Path::new(STRAIT), &config(&s, &t, &tag, ""), &[]);
    let (ra, rb) = (format!("{s}.{a}"), format!("{s}.{b}"));
    wait_for(
        "every record on the target",
        &run,
        Duration::from_secs(90),
        || tgt.read_or_empty(&ra).len() == 50 && tgt.read_or_empty(&rb).len() == 10,
    );
    let remote_acls = |name: &str| -> Vec<AclBinding> {
        let mut v: Vec<_> = tgt
            .acls()
            .into_iter()
            .filter(|b| b.resource_name.starts_with(name))
            .collect();
        v.sort();
        v
    };
    let mut want_acls = vec![
        topic_acl(&ra, lit, "User:bob", acl::OPERATION_READ, allow),
        topic_acl(&ra, lit, "User:carol", acl::OPERATION_WRITE, deny),
        topic_acl(&rb, lit, "User:carol", acl::OPERATION_DESCRIBE, allow),
    ];
    want_acls.sort();
    wait_for("the synced ACLs", &run, Duration::from_secs(30), || {
        remote_acls(&format!("{s}.{tag}")) == want_acls
    });
    let checkpoints = format!("{s}.checkpoints.internal");
    // MM2's checkpoints name the remote topic.
    let want_cp = BTreeMap::from([((ra.clone(), 0), 10), ((ra.clone(), 1), 20)]);
    wait_for(
        "checkpoints of the group",
        &run,
        Duration::from_secs(60),
        || checkpoints_of(&tgt, &checkpoints, &group) == want_cp,
    );
    wait_for(
        "the group synced to the target",
        &run,
        Duration::from_secs(60),
        || {
            tgt.block(tgt.c.offset_fetch(&group)).is_ok_and(|o| {
                o.get(&TopicPartition::new(&ra, 0)).map(|c| c.offset) == Some(10)
                    && o.get(&TopicPartition::new(&ra, 1)).map(|c| c.offset) == Some(20)
            })
        },
    );
    wait_for(
        "a heartbeat on the target",
        &run,
        Duration::from_secs(30),
        || {
            tgt.read_or_empty("heartbeats").iter().any(|r| {
                let (Some(k), Some(v)) = (r.key.as_deref(), r.value.as_deref()) else {
                    return false;
                };
                Heartbeat::decode(k, v).is_ok_and(|h| {
                    h.source_alias == s && h.target_alias == t && h.timestamp_ms >= started_ms
                })
            })
        },
    );
    let syncs: Vec<OffsetSync> = src
        .read(&format!("mm2-offset-syncs.{t}.internal"))
        .iter()
        .filter_map(|r| OffsetSync::decode(r.key.as_deref()?, r.value.as_deref()?).ok())
        .collect();
    for p in 0..2 {
        assert!(
            syncs.iter().any(|o| o.topic == a && o.partition == p),
            "no offset sync for {a}-{p}: {syncs:?}"
        );
    }
    run.signal("TERM");
    let exit = run.wait(Duration::from_secs(60));
    exit.expect_code(0);
    // Copied in order, record for record.
    let values = |su: &Su, topic: &str| -> Vec<Option<Bytes>> {
        su.read(topic).into_iter().map(|r| r.value).collect()
    };
    assert_eq!(values(&tgt, &ra), values(&src, &a));
    assert_eq!(values(&tgt, &rb), values(&src, &b));
    assert!(!exit.stderr.contains("Authorization"), "{}", exit.stderr);
    assert_no_secret("strait run", &exit.stderr);
}

#[test]
fn a_missing_write_or_create_stops_only_that_topic_and_says_who_may_not_do_what() {
    let (src, tgt) = (
        Su::new(Testbed::get().source()),
        Su::new(Testbed::get().target()),
    );
    let (s, t) = aliases();
    let tag = tag();
    let [ok, nowrite, nocreate] = ["ok", "nowrite", "nocreate"].map(|n| format!("{tag}-{n}"));
    for topic in [&ok, &nowrite, &nocreate] {
        src.create(topic, 1);
        src.produce(topic, 0, 25);
    }
    let (r_ok, r_nowrite, r_nocreate) = (
        format!("{s}.{ok}"),
        format!("{s}.{nowrite}"),
        format!("{s}.{nocreate}"),
    );
    // DENY wins over the principal's PREFIXED ALLOW.
    let mirror = format!("User:{}", Testbed::get().var("STRAIT_SASL_MIRROR_USER"));
    let (lit, deny) = (acl::PATTERN_LITERAL, acl::PERMISSION_DENY);
    tgt.add_acls(&[
        topic_acl(&r_nowrite, lit, &mirror, acl::OPERATION_WRITE, deny),
        topic_acl(&r_nocreate, lit, &mirror, acl::OPERATION_CREATE, deny),
    ]);
    // A group has read the topic that is copied, but the principal may not see the groups.
    let group = format!("{tag}-g");
    let offset = CommittedOffset {
        offset: 5,
        metadata: String::new(),
    };
    let commit = BTreeMap::from([(TopicPartition::new(&ok, 0), offset)]);
    for r in src
        .block(src.c.offset_commit(&group, &commit))
        .expect("commit")
        .into_values()
    {
        r.expect("committed");
    }
    src.add_acls(&[AclBinding {
        resource_type: acl::RESOURCE_GROUP,
        ..topic_acl(
            &tag,
            acl::PATTERN_PREFIXED,
            &mirror,
            acl::OPERATION_DESCRIBE,
            deny,
        )
    }]);
    let run = Strait::start(Path::new(STRAIT), &config(&s, &t, &tag, ""), &[]);
    let says = |text: &str| run.stderr().contains(text);
    let write_refused = format!("{mirror} may not WRITE topic {r_nowrite} on cluster {t}");
    let create_refused = format!("{mirror} may not CREATE topic {r_nocreate} on cluster {t}");
    let groups_refused = format!("{mirror} may not DESCRIBE group {tag} on cluster {s}");
    wait_for(
        "the other topic copied and every refusal explained",
        &run,
        Duration::from_secs(90),
        || {
            tgt.read_or_empty(&r_ok).len() == 25
                && says(&write_refused)
                && says(&create_refused)
                && says(&groups_refused)
        },
    );
    // A shard with a refused partition stops at once (nothing of it is on the wire).
    run.signal("TERM");
    let exit = run.wait(Duration::from_secs(30));
    let log = &exit.stderr;
    assert!(!log.contains("did not stop"), "{log}");
    // Read strictly: the remote topic exists (creating it is allowed) and holds nothing; the
    // other one was never created (the broker says so, rather than a read failing).
    assert!(tgt.read(&r_nowrite).is_empty(), "{log}");
    assert!(
        tgt.try_read(&r_nocreate).is_none(),
        "{r_nocreate} exists\n{log}"
    );
    assert!(
        log.contains(
            "no consumer group is visible, so checkpoints and group offset sync have nothing to do"
        ),
        "{log}"
    );
    assert!(checkpoints_of(&tgt, &format!("{s}.checkpoints.internal"), &group).is_empty());
    // The refused partition stopped with one error (it does not retry), which the closing
    // summary repeats; the creation is retried at each discovery (ACLs may be granted while
    // strait runs), without a storm.
    assert_eq!(log.matches(&write_refused).count(), 2, "{log}");
    let line = format!("strait: partition {nowrite}-0 stopped: ");
    assert!(log.contains(&line), "no `{line}` in:\n{log}");
    // The partition whose remote topic cannot be created is not started (its unit joins the
    // group's work once the topic exists), so nothing of it is copied or stopped.
    assert!(
        !log.contains(&format!("strait: partition {nocreate}-0 stopped: ")),
        "{log}"
    );
    let creations = log.matches(&create_refused).count();
    assert!(
        creations <= 15,
        "{creations} creation refusals logged:\n{log}"
    );
    assert_no_secret("strait run", log);
}

/// `strait check --config CONFIG --connect`: exit code and stdout.
fn check_connect(config: &Path) -> (Option<i32>, String) {
    let out = std::process::Command::new(STRAIT)
        .args(["check", "--connect", "--config"])
        .arg(config)
        .env("NO_COLOR", "1")
        .output()
        .expect("strait runs");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_secret("strait check --connect", &all);
    (out.status.code(), all)
}

#[test]
fn preflight_lists_each_permission_and_whether_the_principal_has_it() {
    let (src, tgt) = (
        Su::new(Testbed::get().source()),
        Su::new(Testbed::get().target()),
    );
    let (s, t) = aliases();
    let tag = tag();
    let a = format!("{tag}-a");
    let ra = format!("{s}.{a}");
    src.create(&a, 1);
    let cfg = config(&s, &t, &tag, "");
    let (code, out) = check_connect(&cfg);
    assert_eq!(code, Some(0), "{out}");
    for line in [
        format!("cluster {s} (as User:mirror):"),
        format!("ok      READ, DESCRIBE, DESCRIBE_CONFIGS on topic {a} "),
        format!("ok      CREATE on topic {ra} "),
        format!("unknown WRITE, DESCRIBE, READ, ALTER_CONFIGS on topic {ra} "),
        format!("ok      DESCRIBE on group {tag} "),
        format!("ok      CREATE on topic mm2-offset-syncs.{t}.internal "),
        "ok      ALTER on the cluster ".to_string(),
        "on group strait-".to_string(),
        format!("DESCRIBE on group {s}-mm2 "),
        "0 problem(s)".to_string(),
    ] {
        assert!(out.contains(&line), "no `{line}` in:\n{out}");
    }
    // The remote topic exists and the principal may not write it; it may not describe the
    // source's groups either.
    tgt.create(&ra, 1);
    let mirror = format!("User:{}", Testbed::get().var("STRAIT_SASL_MIRROR_USER"));
    tgt.add_acls(&[topic_acl(
        &ra,
        acl::PATTERN_LITERAL,
        &mirror,
        acl::OPERATION_WRITE,
        acl::PERMISSION_DENY,
    )]);
    src.add_acls(&[AclBinding {
        resource_type: acl::RESOURCE_GROUP,
        ..topic_acl(
            &tag,
            acl::PATTERN_PREFIXED,
            &mirror,
            acl::OPERATION_DESCRIBE,
            acl::PERMISSION_DENY,
        )
    }]);
    let (code, out) = check_connect(&cfg);
    assert_eq!(code, Some(1), "{out}");
    for line in [
        format!("ok      DESCRIBE, READ, ALTER_CONFIGS on topic {ra} "),
        format!("MISSING WRITE on topic {ra} (remote topic"),
        format!("MISSING DESCRIBE on group {tag} (checkpoints"),
        format!("principal User:mirror may not DESCRIBE group {tag} on cluster {s}"),
        "2 problem(s)".to_string(),
    ] {
        assert!(out.contains(&line), "no `{line}` in:\n{out}");
    }
}

/// Exactly-once needs WRITE (and so DESCRIBE) on the flow's transactional ids, which no
/// authorized-operations field reports: `strait check --connect` says it is missing and what
/// to grant, `strait run` stops the partition naming the transactional id and the permission,
/// and once the prefix is granted both pass and the records arrive, committed.
#[test]
fn exactly_once_needs_write_on_the_flows_transactional_ids() {
    let (src, tgt) = (
        Su::new(Testbed::get().source()),
        Su::new(Testbed::get().target()),
    );
    let (s, t) = aliases();
    let tag = tag();
    let topic = format!("{tag}-eos");
    let remote = format!("{s}.{topic}");
    src.create(&topic, 1);
    src.produce(&topic, 0, 25);
    let cfg = config(
        &s,
        &t,
        &tag,
        &format!("{t}.exactly.once.source.support = enabled\n"),
    );
    let prefix = format!("strait-eos:{s}->{t}:");
    let (code, out) = check_connect(&cfg);
    assert_eq!(code, Some(1), "{out}");
    for line in [
        format!("MISSING WRITE, DESCRIBE on transactional ids with prefix {prefix} (exactly-once"),
        "2 problem(s)".to_string(),
    ] {
        assert!(out.contains(&line), "no `{line}` in:\n{out}");
    }

    let mirror = format!("User:{}", Testbed::get().var("STRAIT_SASL_MIRROR_USER"));
    let run = Strait::start(Path::new(STRAIT), &cfg, &[]);
    let refused =
        format!("{mirror} may not DESCRIBE transactional id {prefix}{topic}:0 on cluster {t}");
    wait_for(
        "the take-over refused, naming the id",
        &run,
        Duration::from_secs(60),
        || run.stderr().contains(&refused),
    );
    run.signal("TERM");
    let exit = run.wait(Duration::from_secs(30));
    assert!(
        exit.stderr
            .contains(&format!("strait: partition {topic}-0 stopped: ")),
        "{}",
        exit.stderr
    );
    assert!(tgt.read_or_empty(&remote).is_empty(), "{}", exit.stderr);

    // Granted as `strait check` says: WRITE on the prefix.
    tgt.add_acls(&[AclBinding {
        resource_type: acl::RESOURCE_TRANSACTIONAL_ID,
        ..topic_acl(
            &prefix,
            acl::PATTERN_PREFIXED,
            &mirror,
            acl::OPERATION_WRITE,
            acl::PERMISSION_ALLOW,
        )
    }]);
    let (code, out) = check_connect(&cfg);
    assert_eq!(code, Some(0), "{out}");
    let line = format!("ok      WRITE, DESCRIBE on transactional ids with prefix {prefix} ");
    assert!(out.contains(&line), "no `{line}` in:\n{out}");
    strait_tests::strait::run_strait(
        Path::new(STRAIT),
        &cfg,
        &["--until-caught-up"],
        Duration::from_secs(90),
    )
    .expect_code(0);
    assert_eq!(tgt.read(&remote).len(), 25);
}

/// A name that resolves to 127.0.0.1 but is not in the brokers' certificate (which names
/// `localhost` and `127.0.0.1`): the machine's own names from /etc/hosts.
fn other_loopback_name() -> String {
    use std::net::ToSocketAddrs;
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    hosts
        .lines()
        .filter(|l| l.starts_with("127.0.0.1"))
        .flat_map(|l| {
            l.split_whitespace()
                .skip(1)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .find(|n| {
            n != "localhost"
                && (n.as_str(), 1)
                    .to_socket_addrs()
                    .is_ok_and(|mut a| a.all(|a| a.ip().to_string() == "127.0.0.1"))
        })
        .expect("/etc/hosts names 127.0.0.1 by a name other than localhost (the test needs one)")
}

#[test]
fn wrong_password_untrusted_certificate_and_wrong_host_fail_fast_naming_the_cluster() {
    let tb = Testbed::get();
    let (s, t) = aliases();
    let tag = tag();
    // Every connection attempt (TCP, TLS, SASL) is bounded by this; the failures below are
    // the broker's or the handshake's answer, so each run must end before one attempt could
    // have timed out.
    let setup_timeout = Duration::from_secs(20);
    let good = std::fs::read_to_string(config(
        &s,
        &t,
        &tag,
        &format!(
            "{s}.socket.connection.setup.timeout.ms = {ms}\n{t}.socket.connection.setup.timeout.ms = {ms}",
            ms = setup_timeout.as_millis()
        ),
    ))
    .expect("config");
    let port = tb.source_sasl_ssl().rsplit(':').next().expect("port");
    let ts_pw = tb.var("STRAIT_TLS_TRUSTSTORE_PASSWORD");
    let cases = [
        (
            "wrong password",
            good.replacen("password=\"mirror-secret\"", "password=\"not-it-4711\"", 1),
            "Authentication failed",
        ),
        (
            "untrusted certificate",
            good.replace(
                &format!(
                    "{s}.ssl.truststore.location = {}",
                    tb.var("STRAIT_TLS_TRUSTSTORE_JKS")
                ),
                &format!(
                    "{s}.ssl.truststore.type = PEM\n{s}.ssl.truststore.location = {}",
                    tb.other_ca_pem().display()
                ),
            )
            .replace(&format!("{s}.ssl.truststore.password = {ts_pw}\n"), ""),
            "truststore",
        ),
        (
            "wrong host name",
            good.replace(
                &format!("{s}.ssl.endpoint.identification.algorithm =\n"),
                "",
            )
            .replace(
                tb.source_sasl_ssl(),
                &format!("{}:{port}", other_loopback_name()),
            ),
            "certificate",
        ),
    ];
    for (what, text, says) in cases {
        assert_ne!(text, good, "{what}: the config did not change");
        let cfg = temp_file(&text);
        let exit =
            Strait::start(Path::new(STRAIT), &cfg, &["--until-caught-up"]).wait(3 * setup_timeout);
        let log = &exit.stderr;
        assert_ne!(exit.code, Some(0), "{what}:\n{log}");
        let named = format!("cluster {s}");
        assert!(
            log.lines().any(|l| l.contains(says) && l.contains(&named)),
            "{what}: no line with `{says}` naming {named}:\n{log}"
        );
        // Ended by the answer, not by a timer (within one attempt's setup timeout), and no
        // retry storm.
        assert!(
            exit.elapsed < setup_timeout,
            "{what}: took {:?}, not within one connection setup timeout ({setup_timeout:?}):\n{log}",
            exit.elapsed
        );
        assert!(
            log.lines().count() < 40,
            "{what}: {} lines:\n{log}",
            log.lines().count()
        );
        assert_no_secret(what, log);
        assert!(!log.contains("not-it-4711"), "{what}:\n{log}");
    }
}

/// The client security settings of issue 13 other than SASL_SSL, for alias `a` on the listener
/// they need: mutual TLS with each key store type, SASL_PLAINTEXT with PLAIN, and unsecured
/// OAUTHBEARER. The principals are super users of the test bed (the client certificate's
/// subject, alice).
/// The OIDC client secret of the client-credentials variant (never shown).
const OIDC_SECRET: &str = "oidc-client-secret-Q7x";

/// One token endpoint for the whole test binary; its tokens name the test bed's super user.
fn oidc_endpoint() -> &'static strait_tests::oauth::TokenEndpoint {
    static ENDPOINT: std::sync::OnceLock<strait_tests::oauth::TokenEndpoint> =
        std::sync::OnceLock::new();
    ENDPOINT.get_or_init(|| strait_tests::oauth::token_endpoint(Testbed::get().user(), None))
}

fn variants(a: &str, source: bool) -> Vec<(&'static str, String)> {
    let tb = Testbed::get();
    let side = if source { "SOURCE" } else { "TARGET" };
    let ssl = tb.var(&format!("STRAIT_{side}_SSL_BOOTSTRAP"));
    let saslpt = tb.var(&format!("STRAIT_{side}_SASL_PLAINTEXT_BOOTSTRAP"));
    let v = |k: &str| tb.var(k).to_string();
    let tls = format!(
        "{a}.bootstrap.servers = {ssl}\n{a}.security.protocol = SSL\n\
         {a}.ssl.truststore.type = PEM\n{a}.ssl.truststore.location = {}\n",
        tb.ca_pem().display()
    );
    let (store_pw, key_pw) = (
        v("STRAIT_TLS_CLIENT_P12_PASSWORD"),
        v("STRAIT_TLS_CLIENT_KEY_PASSWORD"),
    );
    let (user, pw) = (tb.user(), tb.password());
    vec![
        (
            "mutual TLS, PEM",
            format!(
                "{tls}{a}.ssl.keystore.type = PEM\n{a}.ssl.keystore.location = {}\n",
                v("STRAIT_TLS_CLIENT_PEM")
            ),
        ),
        (
            "mutual TLS, encrypted PEM",
            format!(
                "{tls}{a}.ssl.keystore.type = PEM\n{a}.ssl.keystore.location = {}\n{a}.ssl.key.password = {key_pw}\n",
                v("STRAIT_TLS_CLIENT_ENC_PEM")
            ),
        ),
        (
            "mutual TLS, PKCS12",
            format!(
                "{tls}{a}.ssl.keystore.type = PKCS12\n{a}.ssl.keystore.location = {}\n{a}.ssl.keystore.password = {store_pw}\n",
                v("STRAIT_TLS_CLIENT_P12")
            ),
        ),
        (
            "mutual TLS, JKS",
            format!(
                "{tls}{a}.ssl.keystore.location = {}\n{a}.ssl.keystore.password = {store_pw}\n{a}.ssl.key.password = {key_pw}\n",
                v("STRAIT_TLS_CLIENT_JKS")
            ),
        ),
        (
            "SASL_PLAINTEXT, PLAIN",
            format!(
                "{a}.bootstrap.servers = {saslpt}\n{a}.security.protocol = SASL_PLAINTEXT\n{a}.sasl.mechanism = PLAIN\n\
             {a}.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"{user}\" password=\"{pw}\";\n"
            ),
        ),
        (
            "SASL_SSL, OAUTHBEARER with OIDC client credentials",
            format!(
                "{a}.bootstrap.servers = {}\n{a}.security.protocol = SASL_SSL\n\
             {a}.ssl.truststore.type = PEM\n{a}.ssl.truststore.location = {}\n\
             {a}.sasl.mechanism = OAUTHBEARER\n\
             {a}.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
             {a}.sasl.oauthbearer.token.endpoint.url = {}\n\
             {a}.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId=\"strait\" clientSecret=\"{OIDC_SECRET}\" scope=\"kafka\";\n",
                tb.var(&format!("STRAIT_{side}_OAUTH_SASL_SSL_BOOTSTRAP")),
                tb.ca_pem().display(),
                oidc_endpoint().url,
            ),
        ),
        (
            "SASL_PLAINTEXT, unsecured OAUTHBEARER",
            format!(
                "{a}.bootstrap.servers = {saslpt}\n{a}.security.protocol = SASL_PLAINTEXT\n{a}.sasl.mechanism = OAUTHBEARER\n\
             {a}.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"{user}\";\n"
            ),
        ),
    ]
}

#[test]
fn every_other_security_setting_replicates_end_to_end() {
    let (src, tgt) = (
        Su::new(Testbed::get().source()),
        Su::new(Testbed::get().target()),
    );
    for i in 0..variants("x", true).len() {
        let (s, t) = aliases();
        let (what, source) = variants(&s, true).swap_remove(i);
        let (_, target) = variants(&t, false).swap_remove(i);
        let tag = tag();
        let (topic, group) = (format!("{tag}-a"), format!("{tag}-g"));
        src.create(&topic, 1);
        src.produce(&topic, 0, 20);
        let offset = CommittedOffset {
            offset: 10,
            metadata: String::new(),
        };
        let commit = BTreeMap::from([(TopicPartition::new(&topic, 0), offset)]);
        for r in src
            .block(src.c.offset_commit(&group, &commit))
            .expect("commit")
            .into_values()
        {
            r.expect("committed");
        }
        let started_ms = now_ms();
        let cfg = flow_config(&s, &t, &tag, &format!("{source}{target}"), "");
        let exit = Strait::start(Path::new(STRAIT), &cfg, &["--until-caught-up"])
            .wait(Duration::from_secs(90));
        let log = &exit.stderr;
        exit.expect_code(0);
        let remote = format!("{s}.{topic}");
        assert_eq!(tgt.read(&remote).len(), 20, "{what}:\n{log}");
        let cp = checkpoints_of(&tgt, &format!("{s}.checkpoints.internal"), &group);
        assert_eq!(
            cp,
            BTreeMap::from([((remote.clone(), 0), 10)]),
            "{what}:\n{log}"
        );
        let synced = src
            .read(&format!("mm2-offset-syncs.{t}.internal"))
            .iter()
            .filter_map(|r| OffsetSync::decode(r.key.as_deref()?, r.value.as_deref()?).ok())
            .any(|o| o.topic == topic);
        assert!(synced, "{what}: no offset sync:\n{log}");
        let heartbeat = tgt.read("heartbeats").iter().any(|r| {
            let (Some(k), Some(v)) = (r.key.as_deref(), r.value.as_deref()) else {
                return false;
            };
            Heartbeat::decode(k, v).is_ok_and(|h| {
                h.source_alias == s && h.target_alias == t && h.timestamp_ms >= started_ms
            })
        });
        assert!(heartbeat, "{what}: no heartbeat:\n{log}");
        assert_no_secret(what, log);
    }
    // The OIDC variant got its tokens from the endpoint.
    let requests = oidc_endpoint()
        .requests
        .lock()
        .expect("not poisoned")
        .clone();
    assert!(
        requests.iter().any(|r| r.starts_with("POST /token")),
        "{requests:?}"
    );
}
