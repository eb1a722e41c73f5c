import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A subscribe()-ing consumer with group.protocol=consumer (KIP-848): reads N records of the topic in
 * group G, commits synchronously after every poll, and prints one summary line
 * "consumed=M distinct=D partitions=P". Usage: bootstrap topic group N [assignor]
 */
public class JavaConsumerGroupCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int n = Integer.parseInt(args[3]);
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("group.protocol", "consumer");
        if (args.length > 4) {
            cp.put("group.remote.assignor", args[4]);
        }
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        int consumed = 0;
        Set<String> distinct = new HashSet<>();
        Set<Integer> partitions = new HashSet<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 90_000;
            while (distinct.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    consumed++;
                    distinct.add(r.value());
                    partitions.add(r.partition());
                }
                consumer.commitSync();
            }
        }
        System.out.println("consumed=" + consumed + " distinct=" + distinct.size() + " partitions=" + partitions.size());
    }
}
