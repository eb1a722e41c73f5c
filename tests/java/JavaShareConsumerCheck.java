import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * KafkaShareConsumer (KIP-932) checks for tests/integration/groups/test_share_groups_java.py and
 * test_share_group_tools.py. Every mode ends with ONE summary line "RESULT {json}" the test parses.
 *
 * Usage: JavaShareConsumerCheck MODE bootstrap topic group [key=value ...] [gc:KEY=VALUE ...]
 *   gc:KEY=VALUE   a GROUP config set on the group with Admin.incrementalAlterConfigs before consuming
 *   expect=N       stop once N distinct records were seen (then keep polling tail= ms for extras)
 *   idle=MS        stop after MS without a record (default 5000; consume: counted from warmup=MS, 8000)
 *   deadline=MS    stop at the latest after MS (default 60000)
 *
 * Modes:
 *   implicit2  two consumers (threads, implicit acknowledgement) in the group; once the assignment has
 *              settled (describeShareGroups: both members at the target assignment) and settle=MS (1500)
 *              more have passed, N=expect records v0..v(N-1) are produced; counts deliveries per record
 *              and consumer, then a third consumer checks nothing is left ("after").
 *   explicit   explicit acknowledgement of values vI: I%3==0 ACCEPT; I%3==1 RELEASE on the first
 *              delivery and ACCEPT the redelivery; I%3==2 REJECT. Reports redeliveries and their counts.
 *   limit      RELEASE every delivery; reports how many times each record was delivered (until idle).
 *   hold       explicit mode: poll until records are acquired, print "ACQUIRED {json}", then never
 *              acknowledge and never poll again (the test kills -9 or SIGSTOPs this process).
 *   consume    implicit acknowledgement: values with their delivery count and first-receipt time; with
 *              stop_file=PATH it stays a member (polling) after `expect` until PATH exists.
 *   latest     consume; once the member is assigned (describeShareGroups) and has polled for settle=MS
 *              (3000), produce M=produce records "new-I"; reports old and new records seen.
 *   admin      listGroups (all, forShareGroups(), forConsumerGroups()), describeShareGroups,
 *              listShareGroupOffsets.
 */
public class JavaShareConsumerCheck {
    static String bootstrap, topic, group;
    static final Map<String, String> opts = new HashMap<>();
    static final Map<String, String> groupConfigs = new LinkedHashMap<>();
    static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        bootstrap = args[1];
        topic = args[2];
        group = args[3];
        for (int i = 4; i < args.length; i++) {
            String a = args[i];
            if (a.startsWith("gc:")) {
                String[] kv = a.substring(3).split("=", 2);
                groupConfigs.put(kv[0], kv[1]);
            } else {
                String[] kv = a.split("=", 2);
                opts.put(kv[0], kv[1]);
            }
        }
        Map<String, Object> result;
        try {
            if (!groupConfigs.isEmpty()) {
                applyGroupConfigs();
            }
            result = run(mode);
        } catch (Throwable t) {
            t.printStackTrace();
            result = new LinkedHashMap<>();
            result.put("exception", t.toString());
        }
        if (result == null) {
            return;
        }
        System.out.println("RESULT " + JSON.writeValueAsString(result));
        System.out.flush();
        System.exit(result.containsKey("exception") ? 2 : 0);  // do not wait for lingering client threads
    }

    static Map<String, Object> run(String mode) throws Exception {
        Map<String, Object> result;
        switch (mode) {
            case "implicit2": result = implicit2(); break;
            case "explicit": result = explicit(); break;
            case "limit": result = limit(); break;
            case "hold": hold(); return null;
            case "consume": result = consume(); break;
            case "latest": result = latest(); break;
            case "admin": result = adminReport(); break;
            default: throw new IllegalArgumentException("mode " + mode);
        }
        return result;
    }

    static long opt(String key, long dflt) {
        return opts.containsKey(key) ? Long.parseLong(opts.get(key)) : dflt;
    }

    static Admin admin() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        return Admin.create(p);
    }

    static void applyGroupConfigs() throws Exception {
        try (Admin a = admin()) {
            List<AlterConfigOp> ops = new ArrayList<>();
            for (Map.Entry<String, String> e : groupConfigs.entrySet()) {
                ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET));
            }
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            a.incrementalAlterConfigs(Map.of(res, ops)).all().get();
        }
    }

    static final List<String> ACK_ERRORS = java.util.Collections.synchronizedList(new ArrayList<>());

    static KafkaShareConsumer<String, String> consumer(String ackMode, String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", clientId);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", ackMode);
        p.put("max.poll.records", opts.getOrDefault("max.poll.records", "100"));
        p.put("share.acquire.mode", opts.getOrDefault("share.acquire.mode", "record_limit"));
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.setAcknowledgementCommitCallback((offsets, exception) -> {  // an acknowledgement the broker refused
            if (exception != null) {
                ACK_ERRORS.add(clientId + ": " + exception + " " + offsets);
            }
        });
        c.subscribe(List.of(topic));
        return c;
    }

    static KafkaProducer<String, String> producer() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("linger.ms", "5");
        return new KafkaProducer<>(p);
    }

    static int dc(ConsumerRecord<String, String> r) {
        return r.deliveryCount().map(Short::intValue).orElse(-1);
    }

    static int index(String value) {
        return Integer.parseInt(value.replaceAll("^[^0-9]*", ""));
    }

    /** Polls a fresh consumer of the group for `ms`; how many records it still gets (implicit acks). */
    static int leftover(long ms) {
        int n = 0;
        try (KafkaShareConsumer<String, String> c = consumer("implicit", "after")) {
            long end = System.currentTimeMillis() + ms;
            while (System.currentTimeMillis() < end) {
                n += c.poll(Duration.ofMillis(500)).count();
            }
        }
        return n;
    }

    // ---------------------------------------------------------------------------------- implicit2 --
    static Map<String, Object> implicit2() throws Exception {
        int n = (int) opt("expect", 600);
        long deadline = System.currentTimeMillis() + opt("deadline", 60000);
        long pause = opt("pause", 20);
        Map<String, List<int[]>> deliveries = new ConcurrentHashMap<>();  // value -> [consumer, deliveryCount]
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger[] perConsumer = {new AtomicInteger(), new AtomicInteger()};
        List<String> errors = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer("implicit", "share-" + id)) {
                    while (!stop.get()) {
                        ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<String, String> r : rs) {
                            deliveries.computeIfAbsent(r.value(), k -> new ArrayList<>()).add(new int[]{id, dc(r)});
                            perConsumer[id].incrementAndGet();
                        }
                        if (rs.count() > 0 && pause > 0) {
                            Thread.sleep(pause);  // work, so that both consumers take a share
                        }
                    }
                } catch (Exception e) {
                    synchronized (errors) {
                        errors.add(e.toString());
                    }
                }
            });
            t.start();
            threads.add(t);
        }
        // Both members assigned before anything is produced (so neither drains the topic alone), and the
        // assignment settled: the first member is given every partition at its first heartbeat and loses
        // some to the second member at a later one. A record it acquired from such a partition is
        // implicitly acknowledged at its next poll; if by then the client has sent the next ShareFetch
        // (which forgets the revoked partition from its share session) and buffered its records, the
        // acknowledgement goes in a ShareAcknowledge, and the client fails it itself with
        // NotLeaderOrFollowerException (ShareConsumeRequestManager.commitAsync: the partition is no longer
        // in the share session); the records then stay acquired until their lock expires. So wait until
        // every member has its target assignment, then `settle` ms more: longer than fetch.max.wait.ms
        // (500), so that a ShareFetch sent under the first assignment (whose share session still holds
        // the revoked partitions while it long-polls) has been answered and the next one forgot them.
        int members = waitAssigned(2, deadline) ? 2 : 0;
        Thread.sleep(opt("settle", 1500));
        try (KafkaProducer<String, String> p = producer()) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
            }
            p.flush();
        }
        while (deliveries.size() < n && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        Thread.sleep(opt("tail", 2000));
        stop.set(true);
        for (Thread t : threads) {
            t.join(30000);
        }
        int total = 0, firstDup = 0, redelivered = 0, both = 0;
        for (List<int[]> ds : deliveries.values()) {
            total += ds.size();
            if (ds.stream().filter(d -> d[1] <= 1).count() > 1) {
                firstDup++;
            }
            redelivered += (int) ds.stream().filter(d -> d[1] > 1).count();
            if (ds.stream().map(d -> d[0]).distinct().count() > 1 && ds.stream().allMatch(d -> d[1] <= 1)) {
                both++;
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("members_assigned", members);
        out.put("distinct", deliveries.size());
        out.put("deliveries", total);
        out.put("first_delivery_duplicates", firstDup);
        out.put("to_both_without_redelivery", both);
        out.put("redeliveries", redelivered);
        out.put("per_consumer", List.of(perConsumer[0].get(), perConsumer[1].get()));
        out.put("after", leftover(opt("after", 4000)));
        out.put("errors", errors);
        out.put("ack_errors", new ArrayList<>(ACK_ERRORS));
        return out;
    }

    /** Until describeShareGroups shows `members` members, each with an assignment and each at the group's
     * target assignment epoch (a member gets its target assignment at its own next heartbeat; until then
     * it keeps the partitions it had). */
    static boolean waitAssigned(int members, long deadline) throws Exception {
        try (Admin a = admin()) {
            while (System.currentTimeMillis() < deadline) {
                try {
                    ShareGroupDescription d = a.describeShareGroups(List.of(group)).describedGroups().get(group).get();
                    long n = d.members().stream().filter(m -> !m.assignment().topicPartitions().isEmpty()).count();
                    boolean reconciled = d.members().stream().allMatch(m -> m.memberEpoch() == d.targetAssignmentEpoch());
                    if (n == members && d.members().size() == members && reconciled) {
                        return true;
                    }
                } catch (java.util.concurrent.ExecutionException e) {
                    // GroupIdNotFoundException until the first heartbeat created the group
                }
                Thread.sleep(200);
            }
        }
        return false;
    }

    // ----------------------------------------------------------------------------------- explicit --
    static Map<String, Object> explicit() {
        int n = (int) opt("expect", 30);
        long deadline = System.currentTimeMillis() + opt("deadline", 60000);
        long idle = opt("idle", 5000);
        Map<String, List<Integer>> seen = new TreeMap<>();  // value -> delivery counts, in order
        Map<String, String> ackOf = new TreeMap<>();         // value -> final acknowledgement
        int released = 0;
        List<String> errors = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer("explicit", "explicit")) {
            long last = System.currentTimeMillis();
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(300));
                for (ConsumerRecord<String, String> r : rs) {
                    List<Integer> dcs = seen.computeIfAbsent(r.value(), k -> new ArrayList<>());
                    dcs.add(dc(r));
                    int i = index(r.value());
                    AcknowledgeType t;
                    if (i % 3 == 0) {
                        t = AcknowledgeType.ACCEPT;
                    } else if (i % 3 == 1) {
                        t = dcs.size() == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
                    } else {
                        t = AcknowledgeType.REJECT;
                    }
                    if (t == AcknowledgeType.RELEASE) {
                        released++;
                    }
                    c.acknowledge(r, t);
                    ackOf.put(r.value(), t.toString());
                }
                if (rs.count() > 0) {
                    for (Map.Entry<?, Optional<org.apache.kafka.common.KafkaException>> e : c.commitSync().entrySet()) {
                        e.getValue().ifPresent(x -> errors.add(e.getKey() + ": " + x));
                    }
                    last = System.currentTimeMillis();
                } else if (seen.size() >= n && System.currentTimeMillis() - last > idle) {
                    break;
                }
            }
        }
        int acceptedOnce = 0, rejected = 0, releasedThenAccepted = 0, wrong = 0;
        for (Map.Entry<String, List<Integer>> e : seen.entrySet()) {
            int i = index(e.getKey());
            List<Integer> dcs = e.getValue();
            if (i % 3 == 0 && dcs.equals(List.of(1))) {
                acceptedOnce++;
            } else if (i % 3 == 1 && dcs.equals(List.of(1, 2))) {
                releasedThenAccepted++;
            } else if (i % 3 == 2 && dcs.equals(List.of(1))) {
                rejected++;
            } else {
                wrong++;
                errors.add(e.getKey() + " delivered with counts " + dcs);
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("distinct", seen.size());
        out.put("accepted_once", acceptedOnce);
        out.put("released", released);
        out.put("released_then_accepted", releasedThenAccepted);
        out.put("rejected", rejected);
        out.put("unexpected", wrong);
        out.put("after", leftover(opt("after", 3000)));
        out.put("errors", errors);
        return out;
    }

    // -------------------------------------------------------------------------------------- limit --
    static Map<String, Object> limit() {
        long deadline = System.currentTimeMillis() + opt("deadline", 60000);
        long idle = opt("idle", 5000);
        Map<String, List<Integer>> seen = new TreeMap<>();
        List<String> errors = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer("explicit", "releaser")) {
            long last = System.currentTimeMillis();
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(300));
                for (ConsumerRecord<String, String> r : rs) {
                    seen.computeIfAbsent(r.value(), k -> new ArrayList<>()).add(dc(r));
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                }
                if (rs.count() > 0) {
                    for (Map.Entry<?, Optional<org.apache.kafka.common.KafkaException>> e : c.commitSync().entrySet()) {
                        e.getValue().ifPresent(x -> errors.add(e.getKey() + ": " + x));
                    }
                    last = System.currentTimeMillis();
                } else if (!seen.isEmpty() && System.currentTimeMillis() - last > idle) {
                    break;
                }
            }
        }
        Map<String, Integer> times = new TreeMap<>();
        Set<List<Integer>> sequences = new java.util.HashSet<>();
        for (Map.Entry<String, List<Integer>> e : seen.entrySet()) {
            times.put(e.getKey(), e.getValue().size());
            sequences.add(e.getValue());
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("distinct", seen.size());
        out.put("deliveries", new java.util.TreeSet<>(times.values()));
        out.put("count_sequences", sequences);
        out.put("after", leftover(opt("after", 3000)));
        out.put("errors", errors);
        return out;
    }

    // --------------------------------------------------------------------------------------- hold --
    static void hold() throws Exception {
        KafkaShareConsumer<String, String> c = consumer("explicit", "holder");
        long deadline = System.currentTimeMillis() + opt("deadline", 60000);
        while (System.currentTimeMillis() < deadline) {
            ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
            if (rs.count() > 0) {
                List<String> values = new ArrayList<>();
                for (ConsumerRecord<String, String> r : rs) {
                    values.add(r.value());
                }
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("values", values);
                out.put("at_ms", System.currentTimeMillis());
                out.put("lock_ms", c.acquisitionLockTimeoutMs().orElse(-1));
                System.out.println("ACQUIRED " + JSON.writeValueAsString(out));
                System.out.flush();
                Thread.sleep(Long.MAX_VALUE);  // never acknowledge: the test kills -9 this process
            }
        }
        System.out.println("RESULT {\"acquired\": 0}");
        System.exit(1);
    }

    // ------------------------------------------------------------------------------------ consume --
    static Map<String, Object> consume() throws Exception {
        long expect = opt("expect", -1);
        long deadline = System.currentTimeMillis() + opt("deadline", 60000);
        long idle = opt("idle", 5000);
        long tail = opt("tail", 2000);
        Map<String, List<Integer>> seen = new TreeMap<>();
        Map<String, Long> firstAt = new TreeMap<>();
        long start = System.currentTimeMillis();
        java.nio.file.Path stopFile = opts.containsKey("stop_file") ? java.nio.file.Path.of(opts.get("stop_file")) : null;
        try (KafkaShareConsumer<String, String> c = consumer("implicit", "collector")) {
            long last = System.currentTimeMillis() + opt("warmup", 8000);  // joining takes a heartbeat or two
            long reached = -1;
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(300));
                long now = System.currentTimeMillis();
                for (ConsumerRecord<String, String> r : rs) {
                    seen.computeIfAbsent(r.value(), k -> new ArrayList<>()).add(dc(r));
                    firstAt.putIfAbsent(r.value(), now);
                }
                if (rs.count() > 0) {
                    last = now;
                }
                if (expect >= 0 && seen.size() >= expect && reached < 0) {
                    reached = now;
                }
                if (reached >= 0 && now - reached > tail && (stopFile == null || java.nio.file.Files.exists(stopFile))) {
                    break;
                }
                if (expect < 0 && now - last > idle) {
                    break;
                }
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("distinct", seen.size());
        out.put("deliveries", seen.values().stream().mapToInt(List::size).sum());
        out.put("counts", seen);
        out.put("first_at_ms", firstAt);
        out.put("started_ms", start);
        return out;
    }

    // ------------------------------------------------------------------------------------- latest --
    static Map<String, Object> latest() throws Exception {
        int m = (int) opt("produce", 10);
        long deadline = System.currentTimeMillis() + opt("deadline", 60000);
        Map<String, List<Integer>> seen = new ConcurrentHashMap<>();
        AtomicBoolean stop = new AtomicBoolean();
        Thread t = new Thread(() -> {
            try (KafkaShareConsumer<String, String> c = consumer("implicit", "latest")) {
                while (!stop.get()) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        seen.computeIfAbsent(r.value(), k -> new ArrayList<>()).add(dc(r));
                    }
                }
            }
        });
        t.start();
        // the share-partitions' start offsets are initialized by the member's first ShareFetch after it is
        // assigned (Admin listShareGroupOffsets reports them only once persisted): wait for the assignment,
        // then let the consumer poll for `settle` ms before producing
        boolean assigned = waitAssigned(1, deadline);
        Thread.sleep(opt("settle", 3000));
        try (KafkaProducer<String, String> p = producer()) {
            for (int i = 0; i < m; i++) {
                p.send(new ProducerRecord<>(topic, "n" + i, "new-" + i));
            }
            p.flush();
        }
        while (seen.keySet().stream().filter(v -> v.startsWith("new-")).count() < m
               && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        Thread.sleep(opt("tail", 2000));
        stop.set(true);
        t.join(30000);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("assigned", assigned);
        out.put("new", seen.keySet().stream().filter(v -> v.startsWith("new-")).count());
        out.put("old", seen.keySet().stream().filter(v -> !v.startsWith("new-")).count());
        out.put("deliveries", seen.values().stream().mapToInt(List::size).sum());
        return out;
    }

    // -------------------------------------------------------------------------------------- admin --
    static Map<String, Object> adminReport() throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin a = admin()) {
            Map<String, String> all = new TreeMap<>();
            for (GroupListing g : a.listGroups().all().get()) {
                all.put(g.groupId(), g.type().map(Object::toString).orElse("?") + "/"
                        + g.groupState().map(Object::toString).orElse("?"));
            }
            List<String> shares = new ArrayList<>();
            for (GroupListing g : a.listGroups(ListGroupsOptions.forShareGroups()).all().get()) {
                shares.add(g.groupId());
            }
            List<String> consumers = new ArrayList<>();
            for (GroupListing g : a.listGroups(ListGroupsOptions.forConsumerGroups()).all().get()) {
                consumers.add(g.groupId());
            }
            out.put("all", all);
            out.put("share_groups", shares);
            out.put("consumer_groups", consumers);
            ShareGroupDescription d = a.describeShareGroups(List.of(group)).describedGroups().get(group).get();
            out.put("state", d.groupState().toString());
            List<Map<String, Object>> members = new ArrayList<>();
            for (ShareMemberDescription m : d.members()) {
                Map<String, Object> mm = new LinkedHashMap<>();
                mm.put("client_id", m.clientId());
                List<String> tps = new ArrayList<>();
                for (TopicPartition tp : m.assignment().topicPartitions()) {
                    tps.add(tp.topic() + ":" + tp.partition());
                }
                java.util.Collections.sort(tps);
                mm.put("assignment", tps);
                members.add(mm);
            }
            out.put("members", members);
            Map<String, Object> offsets = new TreeMap<>();
            Map<TopicPartition, SharePartitionOffsetInfo> info = a.listShareGroupOffsets(
                Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group).get();
            for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : info.entrySet()) {
                SharePartitionOffsetInfo v = e.getValue();
                Map<String, Object> o = new LinkedHashMap<>();
                o.put("start", v == null ? null : v.startOffset());
                o.put("lag", v == null ? null : v.lag().orElse(null));
                offsets.put(e.getKey().topic() + ":" + e.getKey().partition(), o);
            }
            out.put("offsets", offsets);
        }
        return out;
    }
}
