import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A Kafka Streams 4.3.1 instance of a sum-per-key application for tests/integration/groups/
 * test_streams_group_app.py, on a streams group (KIP-1071: group.protocol=streams) with
 * processing.guarantee=exactly_once_v2 and num.stream.threads=2.
 *
 * Input records (any key) carry "word:amount"; the topology re-keys them by word (so a repartition topic,
 * "APP-by-word-repartition", sits between its two sub-topologies), sums the amounts per word in a state
 * store (changelog "APP-sums-changelog") and writes every update of the sum to the output topic. The
 * broker creates both internal topics (streams groups: the group coordinator asks for them).
 *
 * Usage: StreamsEosApp bootstrap applicationId inputTopic outputTopic stateDir
 * Prints "STATE <new> <old>" on every state change, "ERROR <exception>" for an uncaught exception (which
 * shuts the instance down) and, when stopped by SIGTERM, one summary line "CLOSED processed=N state=S".
 */
public class StreamsEosApp {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3], stateDir = args[4];
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);

        AtomicLong processed = new AtomicLong();
        StreamsBuilder b = new StreamsBuilder();
        b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .map((k, v) -> {
                processed.incrementAndGet();
                String[] parts = v.split(":");
                return KeyValue.pair(parts[0], Long.parseLong(parts[1]));
            })
            .groupByKey(Grouped.with("by-word", Serdes.String(), Serdes.Long()))
            .reduce(Long::sum, Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("sums")
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setStateListener((now, old) -> {
            System.out.println("STATE " + now + " " + old);
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("ERROR " + e);
            System.out.flush();
            // no silent retries: any uncaught exception ends the instance (state ERROR) and fails the test
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                .SHUTDOWN_CLIENT;
        });
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(java.time.Duration.ofSeconds(30));
            System.out.println("CLOSED processed=" + processed.get() + " state=" + streams.state());
            System.out.flush();
            done.countDown();
        }));
        streams.start();
        done.await();
    }
}
