import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Consume-transform-produce, exactly once: a read_committed consumer (assign()-ed to every partition
 * of `in`, positions from the group's committed offsets) and a transactional producer that writes
 * "out-" + value to the same partition of `out` and commits the consumed offsets in the same
 * transaction (sendOffsetsToTransaction), at most 20 records per transaction.
 * Mode "crash:K": after K records, flush the open transaction and halt the JVM (no cleanup, like a
 * kill -9). Mode "run": go on until every partition is consumed to its end; print
 * "transactions=T processed=P".
 * Usage: bootstrap in out group transactionalId mode
 */
public class JavaEosCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3], txnId = args[4], mode = args[5];
        int crashAfter = mode.startsWith("crash:") ? Integer.parseInt(mode.substring(6)) : -1;

        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        cp.put("isolation.level", "read_committed");
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("transactional.id", txnId);
        pp.put("linger.ms", "5");

        int transactions = 0, processed = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            List<TopicPartition> parts = consumer.partitionsFor(in).stream()
                .map(p -> new TopicPartition(in, p.partition())).collect(Collectors.toList());
            consumer.assign(parts);
            producer.initTransactions();
            while (true) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
                if (batch.isEmpty()) {
                    Map<TopicPartition, Long> end = consumer.endOffsets(parts);
                    boolean done = true;
                    for (TopicPartition tp : parts) done &= consumer.position(tp) >= end.get(tp);
                    if (done) break;
                    continue;
                }
                int inTxn = 0;
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                producer.beginTransaction();
                for (ConsumerRecord<String, String> r : batch) {
                    if (inTxn == 20) {
                        producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                        producer.commitTransaction();
                        transactions++;
                        offsets.clear();
                        inTxn = 0;
                        producer.beginTransaction();
                    }
                    producer.send(new ProducerRecord<>(out, r.partition(), r.key(), "out-" + r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    inTxn++;
                    processed++;
                    if (processed == crashAfter) {
                        producer.flush();
                        System.out.println("halting with a transaction open after " + processed);
                        System.out.flush();
                        Runtime.getRuntime().halt(3);
                    }
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                transactions++;
            }
        }
        System.out.println("transactions=" + transactions + " processed=" + processed);
    }
}
