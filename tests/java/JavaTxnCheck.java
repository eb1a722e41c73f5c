import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional Java producer commits N records ("c-i"), aborts N ("a-i") and commits N more
 * ("d-i") over the topic's partitions; then an assign()-ed read_committed Java consumer reads the topic
 * back. Prints one summary line:
 * "committed=2N consumed=M aborted_seen=K in_order=true|false digest=<sorted values hash>".
 * Usage: bootstrap topic transactionalId N
 */
public class JavaTxnCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], txnId = args[2];
        int n = Integer.parseInt(args[3]);

        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("transactional.id", txnId);
        pp.put("linger.ms", "5");
        int partitions;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            partitions = producer.partitionsFor(topic).size();
            producer.initTransactions();
            String[] prefixes = {"c", "a", "d"};
            for (String prefix : prefixes) {
                producer.beginTransaction();
                for (int i = 0; i < n; i++) {
                    producer.send(new ProducerRecord<>(topic, i % partitions, "k" + i, String.format("%s-%06d", prefix, i)));
                }
                if (prefix.equals("a")) {
                    producer.flush();
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
        }

        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        cp.put("enable.auto.commit", "false");
        cp.put("isolation.level", "read_committed");
        int consumed = 0, abortedSeen = 0;
        boolean inOrder = true;
        TreeSet<String> values = new TreeSet<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : consumer.partitionsFor(topic)) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            java.util.Map<Integer, String> lastPerPartition = new java.util.HashMap<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (consumed < 2 * n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(300))) {
                    consumed++;
                    values.add(r.value());
                    if (r.value().startsWith("a-")) {
                        abortedSeen++;
                    }
                    String last = lastPerPartition.put(r.partition(), r.value());
                    if (last != null && last.compareTo(r.value()) >= 0) {
                        inOrder = false;
                    }
                }
            }
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                consumed++;  // nothing beyond the committed records may arrive
            }
        }
        System.out.println("committed=" + (2 * n) + " consumed=" + consumed + " aborted_seen=" + abortedSeen
                + " in_order=" + inOrder + " digest=" + Integer.toHexString(String.join(",", values).hashCode()));
    }
}
