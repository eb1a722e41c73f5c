import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Produces N records with the Java client's defaults (idempotent, acks=all since 3.0), then reads
 * the topic back with an assign()-ed consumer and prints one summary line:
 * "produced=N consumed=M distinct=D in_order=true|false". Usage: bootstrap topic N [compression]
 */
public class JavaClientCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int n = Integer.parseInt(args[2]);
        String compression = args.length > 3 ? args[3] : "none";

        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("compression.type", compression);
        pp.put("linger.ms", "5");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + (i % 97), String.format("v%07d", i)));
            }
            producer.flush();
        }

        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        cp.put("enable.auto.commit", "false");
        cp.put("isolation.level", "read_committed");
        int consumed = 0;
        boolean inOrder = true;
        Set<String> distinct = new HashSet<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : consumer.partitionsFor(topic)) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            java.util.Map<String, Integer> lastPerKey = new java.util.HashMap<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (consumed < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    consumed++;
                    distinct.add(r.value());
                    int seq = Integer.parseInt(r.value().substring(1));
                    Integer last = lastPerKey.put(r.key(), seq);
                    if (last != null && last >= seq) {
                        inOrder = false;  // same key -> same partition -> must be in send order
                    }
                }
            }
            // nothing beyond N may arrive
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                consumed++;
            }
        }
        System.out.println("produced=" + n + " consumed=" + consumed + " distinct=" + distinct.size()
                + " in_order=" + inOrder);
    }
}
