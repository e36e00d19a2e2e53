// Writes and reads the old-cluster tests' data with Kafka's own Java client, compiled against
// the jars of the cluster it talks to (2.8.2, 3.9.1 or 4.1.1; only APIs all three have). No
// headers: message formats 0 and 1 have none. Topics must exist.
//
//   produce BOOTSTRAP COUNT SEED TOPIC:PARTITIONS:CODEC...
//           COUNT records per topic: keys, null and empty keys, null and empty values, text and
//           noise, explicit timestamps (every ninth left to the producer), in multi-record batches.
//   compact BOOTSTRAP KEYS ROUNDS SLEEP_MS TOPIC:PARTITIONS:CODEC...
//           every key, then ROUNDS-1 rounds rewriting about half of them, pausing between rounds
//           so that segments roll; the last round but one turns every tenth key it writes into a
//           tombstone; then one "roll" record per partition closes the last segment.
//           Prints "written N".
//   dump    BOOTSTRAP TOPIC:PARTITIONS...
//           every record from the beginning to the end offsets, one line each:
//           "TOPIC PARTITION OFFSET TIMESTAMP_TYPE TIMESTAMP KEY VALUE HEADERS", KEY and VALUE in
//           hex ("-" for null, "~" for empty), HEADERS the header count.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class LegacyData {
    static Properties producerProps(String bootstrap, String codec) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("acks", "all");
        p.put("linger.ms", "30");
        p.put("batch.size", "16384");
        p.put("compression.type", codec);
        // Idempotence needs magic 2; the old formats cannot carry producer ids.
        p.put("enable.idempotence", "false");
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
            case "produce": produce(args); break;
            case "compact": compact(args); break;
            case "dump": dump(args); break;
            default: throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    static void produce(String[] args) throws Exception {
        String bootstrap = args[1];
        int count = Integer.parseInt(args[2]);
        long seed = Long.parseLong(args[3]);
        long now = System.currentTimeMillis();
        for (int t = 4; t < args.length; t++) {
            String[] spec = args[t].split(":");
            String topic = spec[0];
            int partitions = Integer.parseInt(spec[1]);
            Random rnd = new Random(seed ^ topic.hashCode());
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, spec[2]))) {
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
                            value[j] = j % 2 == 0 ? (byte) ('a' + (i + j) % 26) : (byte) rnd.nextInt(256);
                        }
                    }
                    Long ts = i % 9 == 0 ? null : now - 60_000 - rnd.nextInt(600_000);
                    sent.add(producer.send(new ProducerRecord<>(topic, partition, ts, key, value)));
                    if (i % 97 == 50) {
                        Thread.sleep(5);
                    }
                }
                producer.flush();
                waitAll(sent);
            }
        }
    }

    static void compact(String[] args) throws Exception {
        String bootstrap = args[1];
        int keys = Integer.parseInt(args[2]);
        int rounds = Integer.parseInt(args[3]);
        long sleepMs = Long.parseLong(args[4]);
        long now = System.currentTimeMillis();
        Map<String, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();
        Map<String, Integer> partitionsOf = new HashMap<>();
        List<String> topics = new ArrayList<>();
        for (int t = 5; t < args.length; t++) {
            String[] spec = args[t].split(":");
            topics.add(spec[0]);
            partitionsOf.put(spec[0], Integer.parseInt(spec[1]));
            Properties p = producerProps(bootstrap, spec[2]);
            p.put("linger.ms", "20");
            producers.put(spec[0], new KafkaProducer<>(p));
        }
        Random rnd = new Random(11);
        int written = 0;
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try {
            for (int r = 0; r < rounds; r++) {
                for (String topic : topics) {
                    int partitions = partitionsOf.get(topic);
                    for (int k = 0; k < keys; k++) {
                        if (r > 0 && rnd.nextBoolean()) {
                            continue;
                        }
                        boolean tombstone = r == rounds - 2 && k % 10 == 0;
                        byte[] value = tombstone ? null : utf8("v-" + r + "-" + k + "-" + "x".repeat(k % 17));
                        sent.add(producers.get(topic).send(new ProducerRecord<>(topic, k % partitions,
                            now - 1000L * (rounds - r) + k, utf8("key-" + k), value)));
                        written++;
                    }
                    producers.get(topic).flush();
                }
                waitAll(sent);
                Thread.sleep(sleepMs);
            }
            for (String topic : topics) {
                for (int part = 0; part < partitionsOf.get(topic); part++) {
                    sent.add(producers.get(topic).send(new ProducerRecord<>(topic, part, utf8("roll"), utf8("roll"))));
                    written++;
                }
                producers.get(topic).flush();
            }
            waitAll(sent);
        } finally {
            for (KafkaProducer<byte[], byte[]> p : producers.values()) {
                p.close();
            }
        }
        System.out.println("written " + written);
    }

    static String hex(byte[] b) {
        if (b == null) return "-";
        if (b.length == 0) return "~";
        StringBuilder s = new StringBuilder(b.length * 2);
        for (byte x : b) {
            s.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return s.toString();
    }

    static void dump(String[] args) throws Exception {
        String bootstrap = args[1];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("check.crcs", "true");
        List<TopicPartition> tps = new ArrayList<>();
        for (int t = 2; t < args.length; t++) {
            String[] spec = args[t].split(":");
            for (int i = 0; i < Integer.parseInt(spec[1]); i++) {
                tps.add(new TopicPartition(spec[0], i));
            }
        }
        StringBuilder out = new StringBuilder();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (consumer.position(tp) < end.get(tp)) {
                        done = false;
                    }
                }
                if (done) break;
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("not at the end offsets " + end + " after 60 s");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    out.append(r.topic()).append(' ').append(r.partition()).append(' ').append(r.offset()).append(' ')
                        .append(r.timestampType().name).append(' ').append(r.timestamp()).append(' ')
                        .append(hex(r.key())).append(' ').append(hex(r.value())).append(' ')
                        .append(r.headers().toArray().length).append('\n');
                }
            }
        }
        System.out.print(out);
    }
}
