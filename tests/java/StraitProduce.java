// Writes test data with Kafka's own Java producer, so that strait forwards bytes it did not
// write. Topics must exist (the Rust tests create them). One program, several modes:
//
//   mixed   BOOTSTRAP COUNT SEED TOPIC:PARTITIONS:CODEC:IDEMPOTENT...
//           COUNT records per topic with keys, null and empty keys, null and empty values,
//           headers (repeated keys, null values), explicit and producer-assigned timestamps,
//           spread over the partitions in multi-record batches.
//   txn     BOOTSTRAP TOPIC PARTITIONS ROUNDS PER_TXN
//           two transactional producers with interleaved transactions, some committed and some
//           aborted, plus a plain idempotent producer in between. Values end in "-commit",
//           "-abort" or "-plain". Prints "committed N aborted M plain P".
//   compact BOOTSTRAP TOPIC PARTITIONS KEYS ROUNDS SLEEP_MS
//           all keys, then ROUNDS-1 rounds each rewriting a random half of them, with a pause
//           between rounds so that segments roll; the last round but one turns every tenth
//           key it writes into a tombstone; then a second producer rewrites the keys of the
//           last round (emptying the first producer's last batches), and one "roll" record
//           per partition closes the last segment. Prints "written N".
//   bulk    BOOTSTRAP TOPIC PARTITIONS COUNT VALUE_BYTES [RATE]
//           COUNT records, values unique ("p<partition>-<index>-" padded), round robin; at most
//           RATE records a second when given.
//   big     BOOTSTRAP TOPIC PARTITIONS BIG_PARTITION BIG_BYTES SMALL_PER_PARTITION
//           small records everywhere, and in BIG_PARTITION one record of BIG_BYTES after the
//           first half of its small ones.
//   lockstep BOOTSTRAP TOPIC PARTITIONS BATCHES CODEC TARGET_BOOTSTRAP REMOTE_TOPIC
//           BATCHES batches, round robin over the partitions, of 1 to 7 records each (keys,
//           headers, some null values), each sent alone (flush) and written only once the
//           previous one is on the target: REMOTE_TOPIC's end offsets on TARGET_BOOTSTRAP
//           equal TOPIC's (60 s at most per batch), so the replicator always keeps up.
//           Prints "batches N records M".

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class StraitProduce {
    static Properties props(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("acks", "all");
        p.put("linger.ms", "50");
        p.put("batch.size", "16384");
        return p;
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static void waitAll(List<Future<RecordMetadata>> sent) throws Exception {
        for (Future<RecordMetadata> f : sent) {
            f.get();
        }
        sent.clear();
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "mixed": mixed(args); break;
            case "txn": txn(args); break;
            case "compact": compact(args); break;
            case "bulk": bulk(args); break;
            case "big": big(args); break;
            case "lockstep": lockstep(args); break;
            default: throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    static void mixed(String[] args) throws Exception {
        String bootstrap = args[1];
        int count = Integer.parseInt(args[2]);
        long seed = Long.parseLong(args[3]);
        long now = System.currentTimeMillis();
        for (int t = 4; t < args.length; t++) {
            String[] spec = args[t].split(":");
            String topic = spec[0];
            int partitions = Integer.parseInt(spec[1]);
            Properties p = props(bootstrap);
            p.put("compression.type", spec[2]);
            p.put("enable.idempotence", spec[3]);
            Random rnd = new Random(seed ^ topic.hashCode());
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                for (int i = 0; i < count; i++) {
                    int partition = i % partitions;
                    byte[] key = i % 7 == 0 ? null : i % 11 == 0 ? new byte[0] : utf8("key-" + i);
                    byte[] value;
                    if (i % 5 == 0) {
                        value = null;
                    } else if (i % 13 == 0) {
                        value = new byte[0];
                    } else {
                        int len = i % 97 == 0 ? 20000 + rnd.nextInt(5000) : rnd.nextInt(400);
                        value = new byte[len];
                        for (int j = 0; j < len; j++) {
                            // Half text (compressible), half noise.
                            value[j] = j % 2 == 0 ? (byte) ('a' + (i + j) % 26) : (byte) rnd.nextInt(256);
                        }
                    }
                    // Explicit timestamps within the last ten minutes, out of order within a
                    // batch (negative deltas); every ninth is left to the producer.
                    Long ts = i % 9 == 0 ? null : now - 60_000 - rnd.nextInt(600_000);
                    List<Header> headers = new ArrayList<>();
                    for (int h = 0; h < i % 4; h++) {
                        byte[] hv = h == 2 ? null : utf8("hv-" + i + "-" + h);
                        headers.add(new RecordHeader("h" + (h % 2), hv));
                    }
                    sent.add(producer.send(new ProducerRecord<>(topic, partition, ts, key, value, headers)));
                    if (i % 97 == 50) {
                        Thread.sleep(5); // vary batch sizes a little
                    }
                }
                producer.flush();
                waitAll(sent);
            }
        }
    }

    static void txn(String[] args) throws Exception {
        String bootstrap = args[1];
        String topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        int rounds = Integer.parseInt(args[4]);
        int perTxn = Integer.parseInt(args[5]);
        Properties p1 = props(bootstrap);
        p1.put("transactional.id", topic + "-t1");
        p1.put("compression.type", "lz4");
        Properties p2 = props(bootstrap);
        p2.put("transactional.id", topic + "-t2");
        Properties p3 = props(bootstrap);
        p3.put("compression.type", "gzip");
        int committed = 0, aborted = 0, plain = 0;
        try (KafkaProducer<byte[], byte[]> t1 = new KafkaProducer<>(p1);
             KafkaProducer<byte[], byte[]> t2 = new KafkaProducer<>(p2);
             KafkaProducer<byte[], byte[]> pl = new KafkaProducer<>(p3)) {
            t1.initTransactions();
            t2.initTransactions();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int r = 0; r < rounds; r++) {
                boolean commit1 = r % 3 != 1;
                boolean commit2 = r % 2 == 0;
                t1.beginTransaction();
                t2.beginTransaction();
                for (int j = 0; j < perTxn; j++) {
                    int partition = (r + j) % partitions;
                    String s1 = "t1-" + r + "-" + j + (commit1 ? "-commit" : "-abort");
                    String s2 = "t2-" + r + "-" + j + (commit2 ? "-commit" : "-abort");
                    t1.send(new ProducerRecord<>(topic, partition, utf8("k1-" + j), utf8(s1)));
                    t2.send(new ProducerRecord<>(topic, (partition + 1) % partitions, utf8("k2-" + j), utf8(s2)));
                    if (j % 5 == 0) {
                        sent.add(pl.send(new ProducerRecord<>(topic, partition, null, utf8("p-" + r + "-" + j + "-plain"))));
                        plain++;
                    }
                    if (j == perTxn / 2) {
                        // Interleave the two transactions' batches in the log.
                        t1.flush();
                        t2.flush();
                        pl.flush();
                    }
                }
                if (r % 2 == 0) {
                    if (commit1) t1.commitTransaction(); else t1.abortTransaction();
                    if (commit2) t2.commitTransaction(); else t2.abortTransaction();
                } else {
                    if (commit2) t2.commitTransaction(); else t2.abortTransaction();
                    if (commit1) t1.commitTransaction(); else t1.abortTransaction();
                }
                committed += (commit1 ? perTxn : 0) + (commit2 ? perTxn : 0);
                aborted += (commit1 ? 0 : perTxn) + (commit2 ? 0 : perTxn);
            }
            pl.flush();
            waitAll(sent);
        }
        System.out.println("committed " + committed + " aborted " + aborted + " plain " + plain);
    }

    static void compact(String[] args) throws Exception {
        String bootstrap = args[1];
        String topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        int keys = Integer.parseInt(args[4]);
        int rounds = Integer.parseInt(args[5]);
        long sleepMs = Long.parseLong(args[6]);
        Properties p = props(bootstrap);
        p.put("compression.type", "lz4");
        p.put("linger.ms", "20");
        long now = System.currentTimeMillis();
        Random rnd = new Random(11);
        int written = 0;
        List<Integer> lastRound = new ArrayList<>();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int r = 0; r < rounds; r++) {
                for (int k = 0; k < keys; k++) {
                    // After the first round each key is rewritten with probability 1/2, so
                    // that the cleaner keeps a few records of several batches: gaps inside
                    // batches.
                    if (r > 0 && rnd.nextBoolean()) {
                        continue;
                    }
                    written++;
                    if (r == rounds - 1) {
                        lastRound.add(k);
                    }
                    boolean tombstone = r == rounds - 2 && k % 10 == 0;
                    byte[] value = tombstone ? null : utf8("v-" + r + "-" + k + "-" + "x".repeat(k % 17));
                    List<Header> headers = new ArrayList<>();
                    headers.add(new RecordHeader("round", utf8(Integer.toString(r))));
                    sent.add(producer.send(new ProducerRecord<>(topic, k % partitions, now - 1000L * (rounds - r) + k,
                        utf8("key-" + k), value, headers)));
                }
                producer.flush();
                waitAll(sent);
                Thread.sleep(sleepMs);
            }
        }
        // Another producer supersedes every record of the first one's last round: the cleaner
        // then keeps that producer's last batch as an empty batch (recordsCount 0) to preserve
        // its producer state.
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int k : lastRound) {
                sent.add(producer.send(new ProducerRecord<>(topic, k % partitions, now + k,
                    utf8("key-" + k), utf8("final-" + k), new ArrayList<>())));
                written++;
            }
            producer.flush();
            waitAll(sent);
            Thread.sleep(sleepMs);
            for (int part = 0; part < partitions; part++) {
                sent.add(producer.send(new ProducerRecord<>(topic, part, utf8("roll"), utf8("roll"))));
                written++;
            }
            producer.flush();
            waitAll(sent);
        }
        System.out.println("written " + written);
    }

    static void bulk(String[] args) throws Exception {
        String bootstrap = args[1];
        String topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        int count = Integer.parseInt(args[4]);
        int valueBytes = Integer.parseInt(args[5]);
        int rate = args.length > 6 ? Integer.parseInt(args[6]) : 0;
        long started = System.nanoTime();
        Properties p = props(bootstrap);
        p.put("linger.ms", "10");
        p.put("batch.size", "16384");
        p.put("buffer.memory", "67108864");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                int partition = i % partitions;
                StringBuilder v = new StringBuilder("p" + partition + "-" + i + "-");
                while (v.length() < valueBytes) {
                    v.append((char) ('a' + v.length() % 26));
                }
                sent.add(producer.send(new ProducerRecord<>(topic, partition, null, utf8(v.toString()))));
                if (sent.size() >= 10000) {
                    waitAll(sent);
                }
                if (rate > 0 && i % 1000 == 999) {
                    long due = started + (i + 1) * 1_000_000_000L / rate;
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                    }
                }
            }
            producer.flush();
            waitAll(sent);
        }
    }

    static void lockstep(String[] args) throws Exception {
        String bootstrap = args[1];
        String topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        int batches = Integer.parseInt(args[4]);
        String codec = args[5];
        String target = args[6];
        String remote = args[7];
        Properties p = props(bootstrap);
        // One batch per flush: nothing leaves before it.
        p.put("linger.ms", "600000");
        p.put("compression.type", codec);
        Properties a = new Properties();
        a.put("bootstrap.servers", target);
        long[] ends = new long[partitions];
        int records = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
             Admin admin = Admin.create(a)) {
            for (int b = 0; b < batches; b++) {
                int partition = b % partitions;
                int n = 1 + b % 7;
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    int k = records + i;
                    ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, partition,
                        k % 3 == 0 ? null : utf8("key-" + k),
                        k % 5 == 4 ? null : utf8("value-" + k + "-" + "x".repeat(k % 40)));
                    if (k % 2 == 1) {
                        r.headers().add("h", utf8("v" + k));
                    }
                    sent.add(producer.send(r));
                }
                producer.flush();
                waitAll(sent);
                records += n;
                ends[partition] += n;
                org.apache.kafka.common.TopicPartition tp =
                    new org.apache.kafka.common.TopicPartition(remote, partition);
                long deadline = System.nanoTime() + 60_000_000_000L;
                while (true) {
                    long end = -1;
                    try {
                        end = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get()
                            .get(tp).offset();
                    } catch (java.util.concurrent.ExecutionException e) {
                        // The remote topic may not exist yet.
                    }
                    if (end == ends[partition]) {
                        break;
                    }
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("batch " + b + ": " + remote + "-" + partition
                            + " ends at " + end + ", not " + ends[partition] + ", after 60 s");
                    }
                    Thread.sleep(20);
                }
            }
        }
        System.out.println("batches " + batches + " records " + records);
    }

    static void big(String[] args) throws Exception {
        String bootstrap = args[1];
        String topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        int bigPartition = Integer.parseInt(args[4]);
        int bigBytes = Integer.parseInt(args[5]);
        int small = Integer.parseInt(args[6]);
        Properties p = props(bootstrap);
        Random rnd = new Random(7);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < small; i++) {
                for (int part = 0; part < partitions; part++) {
                    if (part == bigPartition && i == small / 2) {
                        byte[] value = new byte[bigBytes];
                        rnd.nextBytes(value);
                        sent.add(producer.send(new ProducerRecord<>(topic, part, utf8("big"), value)));
                    }
                    sent.add(producer.send(new ProducerRecord<>(topic, part, utf8("k-" + i), utf8("small-" + part + "-" + i))));
                }
            }
            producer.flush();
            waitAll(sent);
        }
    }
}
