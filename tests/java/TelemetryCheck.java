import java.time.Duration;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * KIP-714 from the Java client's side: a producer with the default enable.metrics.push=true asks the
 * broker for its telemetry subscription (GetTelemetrySubscriptions), learns its client instance id,
 * produces, and pushes its metrics (PushTelemetry) for a few intervals before closing (a terminating push).
 * Args: bootstrap topic client.id seconds. Prints "client_instance_id=<uuid>" last.
 */
public class TelemetryCheck {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("client.id", args[2]);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        long seconds = Long.parseLong(args[3]);
        Uuid id;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < 100; i++) {
                producer.send(new ProducerRecord<>(args[1], "k" + i, "v" + i)).get();
            }
            id = producer.clientInstanceId(Duration.ofSeconds(30));
            long end = System.currentTimeMillis() + seconds * 1000;
            int i = 0;
            while (System.currentTimeMillis() < end) {
                producer.send(new ProducerRecord<>(args[1], "k" + i, "v" + i++));
                Thread.sleep(50);
            }
            producer.flush();
        }
        System.out.println("client_instance_id=" + id);
    }
}
