// Kafka's own clients and MirrorMaker 2 classes, driven by strait's offset-translation tests
// (control/tests/translate.rs).
//
// It lives in MirrorMaker's package only to reach OffsetSyncStore's package-private constructor,
// so that the test can ask MM2's own translation algorithm about the offset syncs strait wrote.
// The class is not public so that javac accepts it whatever the source file is called.
//
// Commands (one per line of output, tab-separated):
//   produce BOOTSTRAP TOPIC COUNT PREFIX KEYS [STRIDE]
//       COUNT records, record i to partition i % partitions with key "k-((i % KEYS) * STRIDE)"
//       (STRIDE defaults to 1) and value "PREFIX-i"; batched (linger.ms=20), idempotent.
//   produce-tx BOOTSTRAP TOPIC TRANSACTIONAL_ID SPEC
//       One transaction per comma-separated SPEC item: "cN" commits N records, "aN" aborts N;
//       records go round-robin over the partitions with value "PREFIX-i-j" where PREFIX is c or
//       a, i the transaction's index and j the record's.
//   consume BOOTSTRAP GROUP TOPIC MAX ISOLATION RESET [STOP_FILE]
//       Subscribes GROUP to TOPIC and prints "partition offset value" for at most MAX records
//       (MAX < 0: until 4 s pass without records), then commits exactly the offset after the
//       last printed record of each partition, with metadata "strait-test". With STOP_FILE it
//       prints "ASSIGNED" once it has partitions, keeps polling without committing (an active
//       member) until STOP_FILE exists, and prints no records.
//   dump BOOTSTRAP TOPIC ISOLATION
//       Assigns every partition of TOPIC (no group, nothing committed), reads each from its
//       beginning to its end offset as ISOLATION sees it (read_committed: the last stable offset)
//       and prints "partition offset value" per record: the fault suite's independent read of
//       the target (tests/src/faults.rs). Fails after 120 s short of the end.
//   commit BOOTSTRAP TOPIC GROUP=PARTITION:OFFSET[,PARTITION:OFFSET...]...
//       For each argument, commits those offsets of TOPIC as GROUP (metadata "strait-test")
//       with a consumer that never joins the group (assign, then commitSync), as
//       kafka-consumer-groups --reset-offsets does; prints "group partition offset" per offset.
//   remote-translate BOOTSTRAP REMOTE_ALIAS GROUP
//       RemoteClusterUtils.translateOffsets: prints "topic partition offset metadata".
//   mm2-translate BOOTSTRAP SYNCS_TOPIC GROUP TOPIC PARTITION OFFSET...
//       Loads MM2's OffsetSyncStore from the offset-syncs topic (as a checkpoint task whose
//       checkpoints were read) and prints "offset translated" per OFFSET ("none" when empty).
package org.apache.kafka.connect.mirror;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

class StraitOffsetsTool {
    static final long IDLE_MS = 4000;

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "produce":
                produce(args);
                break;
            case "produce-tx":
                produceTx(args);
                break;
            case "consume":
                consume(args);
                break;
            case "dump":
                dump(args);
                break;
            case "commit":
                commit(args);
                break;
            case "remote-translate":
                remoteTranslate(args);
                break;
            case "mm2-translate":
                mm2Translate(args);
                break;
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    static Properties producerProps(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("linger.ms", "20");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return p;
    }

    static void produce(String[] a) throws Exception {
        String topic = a[2];
        long count = Long.parseLong(a[3]);
        long keys = Long.parseLong(a[5]);
        long stride = a.length > 6 ? Long.parseLong(a[6]) : 1;
        try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(a[1]))) {
            int partitions = p.partitionsFor(topic).size();
            for (long i = 0; i < count; i++) {
                p.send(new ProducerRecord<>(topic, (int) (i % partitions), "k-" + (i % keys) * stride, a[4] + "-" + i));
            }
            p.flush();
        }
    }

    static void produceTx(String[] a) throws Exception {
        String topic = a[2];
        Properties props = producerProps(a[1]);
        props.put("transactional.id", a[3]);
        try (KafkaProducer<String, String> p = new KafkaProducer<>(props)) {
            int partitions = p.partitionsFor(topic).size();
            p.initTransactions();
            String[] spec = a[4].split(",");
            int next = 0;
            for (int i = 0; i < spec.length; i++) {
                boolean commit = spec[i].charAt(0) == 'c';
                int n = Integer.parseInt(spec[i].substring(1));
                p.beginTransaction();
                for (int j = 0; j < n; j++) {
                    String value = (commit ? "c" : "a") + "-" + i + "-" + j;
                    p.send(new ProducerRecord<>(topic, next++ % partitions, "k", value));
                }
                p.flush();
                if (commit) {
                    p.commitTransaction();
                } else {
                    p.abortTransaction();
                }
            }
        }
    }

    static void consume(String[] a) {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[1]);
        p.put("group.id", a[2]);
        p.put("enable.auto.commit", "false");
        p.put("isolation.level", a[5]);
        p.put("auto.offset.reset", a[6]);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        String topic = a[3];
        long max = Long.parseLong(a[4]);
        String stopFile = a.length > 7 ? a[7] : null;
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        try (KafkaConsumer<byte[], String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            long taken = 0;
            long lastActivity = -1;
            boolean announced = false;
            outer:
            while (true) {
                ConsumerRecords<byte[], String> records = c.poll(Duration.ofMillis(200));
                long now = System.currentTimeMillis();
                if (stopFile != null) {
                    if (!announced && !c.assignment().isEmpty()) {
                        System.out.println("ASSIGNED");
                        System.out.flush();
                        announced = true;
                    }
                    if (Files.exists(Paths.get(stopFile))) {
                        return;
                    }
                    continue;
                }
                if (lastActivity < 0 && !c.assignment().isEmpty()) {
                    lastActivity = now;
                }
                if (records.isEmpty()) {
                    if (lastActivity >= 0 && now - lastActivity > IDLE_MS) {
                        break;
                    }
                    continue;
                }
                lastActivity = now;
                for (ConsumerRecord<byte[], String> r : records) {
                    if (max >= 0 && taken >= max) {
                        break outer;
                    }
                    System.out.println(r.partition() + "\t" + r.offset() + "\t" + r.value());
                    next.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1, "strait-test"));
                    taken++;
                }
                if (max >= 0 && taken >= max) {
                    break;
                }
            }
            if (!next.isEmpty()) {
                c.commitSync(next);
            }
        }
    }

    static void dump(String[] a) throws IOException {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[1]);
        p.put("enable.auto.commit", "false");
        p.put("isolation.level", a[3]);
        p.put("max.poll.records", "10000");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        String topic = a[2];
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        try (KafkaConsumer<byte[], String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            if (tps.isEmpty()) {
                throw new IllegalStateException("topic " + topic + " has no partitions");
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(30));
            long deadline = System.currentTimeMillis() + 120_000;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, Duration.ofSeconds(30)) < end.get(tp)) {
                        done = false;
                        break;
                    }
                }
                if (done) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("not at the end offsets " + end + " of " + topic + " within 120 s");
                }
                for (ConsumerRecord<byte[], String> r : c.poll(Duration.ofMillis(200))) {
                    out.write(r.partition() + "\t" + r.offset() + "\t" + r.value() + "\n");
                }
            }
        }
        out.flush();
    }

    static void commit(String[] a) {
        String topic = a[2];
        for (int i = 3; i < a.length; i++) {
            String[] groupAndOffsets = a[i].split("=", 2);
            Properties p = new Properties();
            p.put("bootstrap.servers", a[1]);
            p.put("group.id", groupAndOffsets[0]);
            p.put("enable.auto.commit", "false");
            p.put("key.deserializer", ByteArrayDeserializer.class.getName());
            p.put("value.deserializer", ByteArrayDeserializer.class.getName());
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (String po : groupAndOffsets[1].split(",")) {
                String[] f = po.split(":");
                offsets.put(new TopicPartition(topic, Integer.parseInt(f[0])),
                        new OffsetAndMetadata(Long.parseLong(f[1]), "strait-test"));
            }
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.assign(offsets.keySet());
                c.commitSync(offsets);
            }
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                System.out.println(groupAndOffsets[0] + "\t" + e.getKey().partition() + "\t" + e.getValue().offset());
            }
        }
    }

    static void remoteTranslate(String[] a) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", a[1]);
        Map<TopicPartition, OffsetAndMetadata> offsets =
                RemoteClusterUtils.translateOffsets(props, a[2], a[3], Duration.ofSeconds(30));
        List<Map.Entry<TopicPartition, OffsetAndMetadata>> sorted = new ArrayList<>(offsets.entrySet());
        sorted.sort(Comparator.comparing((Map.Entry<TopicPartition, OffsetAndMetadata> e) -> e.getKey().topic())
                .thenComparingInt(e -> e.getKey().partition()));
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : sorted) {
            System.out.println(e.getKey().topic() + "\t" + e.getKey().partition() + "\t"
                    + e.getValue().offset() + "\t" + e.getValue().metadata());
        }
    }

    /** MM2's store, filled by our own consumer instead of a KafkaBasedLog. */
    static final class Store extends OffsetSyncStore {
        private final String bootstrap;
        private final String topic;

        Store(String bootstrap, String topic) {
            super();
            this.bootstrap = bootstrap;
            this.topic = topic;
        }

        @Override
        void backingStoreStart() {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("key.deserializer", ByteArrayDeserializer.class.getName());
            p.put("value.deserializer", ByteArrayDeserializer.class.getName());
            TopicPartition tp = new TopicPartition(topic, 0);
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                long end = c.endOffsets(List.of(tp)).get(tp);
                while (c.position(tp) < end) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                        handleRecord(r);
                    }
                }
            }
        }
    }

    static void mm2Translate(String[] a) {
        try (Store store = new Store(a[1], a[2])) {
            store.start(false);
            TopicPartition tp = new TopicPartition(a[4], Integer.parseInt(a[5]));
            for (int i = 6; i < a.length; i++) {
                long offset = Long.parseLong(a[i]);
                OptionalLong t = store.translateDownstream(a[3], tp, offset);
                System.out.println(offset + "\t" + (t.isPresent() ? Long.toString(t.getAsLong()) : "none"));
            }
        }
    }
}
