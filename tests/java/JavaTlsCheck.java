import java.io.FileInputStream;
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client over TLS: the client security settings (security.protocol, ssl.*) come from a
 * properties file. Produces N records with the defaults (idempotent, acks=all), reads them back from
 * partition 0 with read_committed, prints "produced=N consumed=M". Usage: bootstrap topic N client.properties
 */
public class JavaTlsCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int n = Integer.parseInt(args[2]);
        Properties security = new Properties();
        try (FileInputStream in = new FileInputStream(args[3])) {
            security.load(in);
        }
        Properties pp = new Properties();
        pp.putAll(security);
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k", "v" + i));
            }
            producer.flush();
        }
        Properties cp = new Properties();
        cp.putAll(security);
        cp.put("bootstrap.servers", bootstrap);
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        cp.put("enable.auto.commit", "false");
        cp.put("isolation.level", "read_committed");
        int consumed = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 60_000;
            while (consumed < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    if (!r.value().equals("v" + consumed)) {
                        throw new IllegalStateException("out of order at " + consumed + ": " + r.value());
                    }
                    consumed++;
                }
            }
        }
        System.out.println("produced=" + n + " consumed=" + consumed);
    }
}
