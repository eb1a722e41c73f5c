#!/usr/bin/env python3
"""Reference lab: a real single-node Apache Kafka 4.x (KRaft, combined broker+controller) as an oracle.

The jars come from Maven Central through `mvn dependency:copy-dependencies` into a cache outside the
repository (never commit them):

    ${MINIKAFKA_KAFKA_CACHE:-${XDG_CACHE_HOME:-~/.cache}/minikafka}/apache-kafka-<version>/libs/*.jar

As a module (stdlib only, Python >= 3.11)::

    from scripts.apache_kafka import KafkaBroker, fetch, run_tool
    fetch()                                   # idempotent; ~10 s the first time, ~0 after
    with KafkaBroker() as kafka:              # free loopback ports, temp log.dirs, waits until ready
        run_tool("kafka-topics", ["--bootstrap-server", kafka.bootstrap, "--list"])

As a CLI::

    python scripts/apache_kafka.py fetch [--version V]
    python scripts/apache_kafka.py run [--port N] [--override k=v ...]   # foreground until Ctrl-C/SIGTERM
    python scripts/apache_kafka.py tool kafka-topics --bootstrap-server 127.0.0.1:9092 --list
    python scripts/apache_kafka.py tool org.apache.kafka.tools.TopicCommand ...   # a class name works too
    python scripts/apache_kafka.py tools                                           # list the aliases
    python scripts/apache_kafka.py path                                            # print the cache dir

Environment: MINIKAFKA_KAFKA_VERSION (default DEFAULT_VERSION), MINIKAFKA_KAFKA_CACHE (cache base dir),
MVN (maven executable, default `mvn`), JAVA (default `java`, else $JAVA_HOME/bin/java).
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

DEFAULT_VERSION = "4.3.1"
DEPENDENCY_PLUGIN_VERSION = "3.8.1"
# log4j2 version used by each Kafka minor (the slf4j binding must match the log4j-core Kafka brings).
LOG4J_VERSIONS = {"4.0": "2.24.3", "4.1": "2.24.3", "4.2": "2.25.4", "4.3": "2.25.4", "4.4": "2.25.5"}
POM_TEMPLATE = Path(__file__).resolve().parent / "kafka-lab" / "pom.xml"
MARKER = ".fetched"

# Short names (the bin/*.sh script names) -> candidate main classes, first one found in the jars wins
# (some classes moved between 4.x minors, e.g. DumpLogSegments from kafka.tools to o.a.k.tools).
TOOLS: dict[str, tuple[str, ...]] = {
    "kafka-server": ("kafka.Kafka",),
    "kafka-storage": ("kafka.tools.StorageTool",),
    "kafka-topics": ("org.apache.kafka.tools.TopicCommand",),
    "kafka-console-producer": ("org.apache.kafka.tools.ConsoleProducer",),
    "kafka-console-consumer": ("org.apache.kafka.tools.consumer.ConsoleConsumer",),
    "kafka-consumer-groups": ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",),
    "kafka-share-groups": ("org.apache.kafka.tools.consumer.group.ShareGroupCommand",),
    "kafka-streams-groups": ("org.apache.kafka.tools.streams.StreamsGroupCommand",),
    "kafka-transactions": ("org.apache.kafka.tools.TransactionsCommand",),
    "kafka-dump-log": ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"),
    "kafka-get-offsets": ("org.apache.kafka.tools.GetOffsetShell",),
    "kafka-configs": ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"),
    "kafka-features": ("org.apache.kafka.tools.FeatureCommand",),
    "kafka-metadata-quorum": ("org.apache.kafka.tools.MetadataQuorumCommand",),
    "kafka-broker-api-versions": ("org.apache.kafka.tools.BrokerApiVersionsCommand",),
    "kafka-delete-records": ("org.apache.kafka.tools.DeleteRecordsCommand",),
    "kafka-leader-election": ("org.apache.kafka.tools.LeaderElectionCommand",),
    "kafka-reassign-partitions": ("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",),
    "kafka-log-dirs": ("org.apache.kafka.tools.LogDirsCommand",),
    "kafka-producer-perf-test": ("org.apache.kafka.tools.ProducerPerformance",),
    "kafka-consumer-perf-test": ("org.apache.kafka.tools.ConsumerPerformance",),
    "kafka-e2e-latency": ("org.apache.kafka.tools.EndToEndLatency",),
    "kafka-verifiable-producer": ("org.apache.kafka.tools.VerifiableProducer",),
    "kafka-verifiable-consumer": ("org.apache.kafka.tools.VerifiableConsumer",),
    "kafka-cluster": ("org.apache.kafka.tools.ClusterTool",),
    "kafka-acls": ("org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand"),
}

SERVER_LOG4J2 = """\
status = warn
name = minikafka-lab-server
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.okafka.name = org.apache.kafka
logger.okafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
"""

TOOLS_LOG4J2 = """\
status = warn
name = minikafka-lab-tools
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""

# Fast-starting, small JVMs for short-lived CLI tools.
TOOL_JVM_OPTS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss1m",
                 "-Djava.awt.headless=true"]
SERVER_JVM_OPTS = ["-Xmx512m", "-Xms128m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                   "-Djava.awt.headless=true", "-Dcom.sun.management.jmxremote=false"]


# ----------------------------------------------------------------------------------------- paths --

def default_version() -> str:
    return os.environ.get("MINIKAFKA_KAFKA_VERSION") or DEFAULT_VERSION


def cache_base() -> Path:
    env = os.environ.get("MINIKAFKA_KAFKA_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "minikafka"


def cache_dir(version: str | None = None) -> Path:
    return cache_base() / f"apache-kafka-{version or default_version()}"


def libs_dir(version: str | None = None) -> Path:
    return cache_dir(version) / "libs"


def classpath(version: str | None = None) -> str:
    return str(libs_dir(version) / "*")


def java_bin() -> str:
    if os.environ.get("JAVA"):
        return os.environ["JAVA"]
    if os.environ.get("JAVA_HOME"):
        cand = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        if cand.exists():
            return str(cand)
    found = shutil.which("java")
    if not found:
        raise RuntimeError("java not found (install a JDK >= 17 or set JAVA / JAVA_HOME)")
    return found


def is_fetched(version: str | None = None) -> bool:
    return (cache_dir(version) / MARKER).is_file() and libs_dir(version).is_dir()


# ----------------------------------------------------------------------------------------- fetch --

def _log4j_version(version: str) -> str:
    if os.environ.get("MINIKAFKA_LOG4J_VERSION"):
        return os.environ["MINIKAFKA_LOG4J_VERSION"]
    minor = ".".join(version.split(".")[:2])
    return LOG4J_VERSIONS.get(minor, LOG4J_VERSIONS[max(LOG4J_VERSIONS)])


def render_pom(version: str) -> str:
    return (POM_TEMPLATE.read_text()
            .replace("@KAFKA_VERSION@", version)
            .replace("@LOG4J_VERSION@", _log4j_version(version))
            .replace("@DEPENDENCY_PLUGIN_VERSION@", DEPENDENCY_PLUGIN_VERSION))


@contextlib.contextmanager
def _file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def fetch(version: str | None = None, force: bool = False, quiet: bool = True) -> Path:
    """Download Apache Kafka `version` (broker + tools + log4j2 binding) into the cache; returns libs dir.

    Idempotent: a marker file (holding the pom's hash) makes later calls return at once; a change of
    the pom template refetches. Safe against concurrent callers (file lock), and atomic (a half-done
    fetch never looks complete).
    """
    version = version or default_version()
    cdir = cache_dir(version)
    libs = cdir / "libs"
    pom = render_pom(version)
    digest = hashlib.sha256(pom.encode()).hexdigest()[:16]
    marker = cdir / MARKER
    if not force and marker.is_file() and marker.read_text().strip() == digest and libs.is_dir():
        return libs
    mvn = os.environ.get("MVN") or shutil.which("mvn")
    if not mvn:
        raise RuntimeError("mvn not found: install Maven (>= 3.6.3) or set MVN")
    with _file_lock(cdir / ".lock"):
        if not force and marker.is_file() and marker.read_text().strip() == digest and libs.is_dir():
            return libs
        (cdir / "pom.xml").write_text(pom)
        tmp_libs = cdir / "libs.tmp"
        shutil.rmtree(tmp_libs, ignore_errors=True)
        cmd = [mvn, "-B", "-f", str(cdir / "pom.xml"),
               f"org.apache.maven.plugins:maven-dependency-plugin:{DEPENDENCY_PLUGIN_VERSION}:copy-dependencies",
               f"-DoutputDirectory={tmp_libs}", "-DincludeScope=runtime"]
        if quiet:
            cmd.insert(1, "-q")
        res = subprocess.run(cmd, cwd=cdir, capture_output=quiet, text=True)
        if res.returncode != 0:
            out = (res.stdout or "") + (res.stderr or "") if quiet else ""
            raise RuntimeError(f"maven fetch of Apache Kafka {version} failed ({res.returncode}):\n{out[-4000:]}")
        if not any(tmp_libs.glob(f"kafka_2.13-{version}.jar")):
            raise RuntimeError(f"fetch finished but kafka_2.13-{version}.jar is missing in {tmp_libs}")
        marker.unlink(missing_ok=True)
        shutil.rmtree(libs, ignore_errors=True)
        tmp_libs.rename(libs)
        (cdir / "tools-log4j2.properties").write_text(TOOLS_LOG4J2)
        marker.write_text(digest + "\n")
    return libs


def _ensure(version: str | None) -> Path:
    version = version or default_version()
    if not is_fetched(version):
        fetch(version)
    return libs_dir(version)


# ----------------------------------------------------------------------------------------- tools --

_class_index: dict[str, set[str]] = {}


def _classes(version: str) -> set[str]:
    if version not in _class_index:
        names: set[str] = set()
        for jar in libs_dir(version).glob("kafka*.jar"):
            with zipfile.ZipFile(jar) as zf:
                names.update(n[:-6].replace("/", ".") for n in zf.namelist()
                             if n.endswith(".class") and "$" not in n)
        _class_index[version] = names
    return _class_index[version]


def resolve_tool(name: str, version: str | None = None) -> str:
    """`kafka-topics` / `TopicCommand` / `org.apache.kafka.tools.TopicCommand` -> a main class in the jars."""
    version = version or default_version()
    _ensure(version)
    known = _classes(version)
    if name.endswith(".sh"):
        name = name[:-3]
    if name in TOOLS:
        for cls in TOOLS[name]:
            if cls in known:
                return cls
        raise LookupError(f"none of {TOOLS[name]} is in Apache Kafka {version}")
    if name in known:
        return name
    matches = sorted(c for c in known if c.rsplit(".", 1)[-1] == name)
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise LookupError(f"{name!r} is ambiguous: {matches}")
    raise LookupError(f"no tool or class {name!r} in Apache Kafka {version}")


def tool_command(tool: str, args: list[str] | tuple[str, ...] = (), version: str | None = None,
                 jvm_opts: list[str] | None = None) -> list[str]:
    version = version or default_version()
    cls = resolve_tool(tool, version)
    log_cfg = cache_dir(version) / "tools-log4j2.properties"
    if not log_cfg.exists():
        log_cfg.write_text(TOOLS_LOG4J2)
    return [java_bin(), *(jvm_opts or TOOL_JVM_OPTS), f"-Dlog4j2.configurationFile={log_cfg}",
            "-cp", classpath(version), cls, *map(str, args)]


def run_tool(tool: str, args: list[str] | tuple[str, ...] = (), *, input: str | bytes | None = None,
             timeout: float | None = 60, check: bool = False, version: str | None = None,
             env: dict[str, str] | None = None, text: bool = True) -> subprocess.CompletedProcess:
    """Run a Kafka CLI tool class from the cached jars; returns the CompletedProcess (stdout, stderr).

    `tool` is a bin-script name (`kafka-topics`, see TOOLS), a simple class name (`TopicCommand`)
    or a fully-qualified main class. With check=True a non-zero exit raises CalledProcessError.
    """
    cmd = tool_command(tool, args, version)
    if isinstance(input, bytes) and text:
        input = input.decode()
    return subprocess.run(cmd, input=input, capture_output=True, timeout=timeout, check=check,
                          text=text, env={**os.environ, **(env or {})},
                          stdin=None if input is not None else subprocess.DEVNULL)


# ---------------------------------------------------------------------------------------- broker --

def _die_with_parent() -> None:
    """preexec_fn: ask Linux to SIGTERM the JVM when the process that started it dies (no orphaned
    brokers after a crashed / killed test run). Best effort; no-op off Linux."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def free_port() -> int:
    """A free loopback port: the test suite's helper (minikafka.testing.free_port, below the ephemeral
    range and per xdist worker) where minikafka is importable, else one the OS picks."""
    try:
        from minikafka.testing import free_port as suite_free_port
    except ImportError:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    return suite_free_port("127.0.0.1")


def random_cluster_id() -> str:
    """Like org.apache.kafka.common.Uuid.randomUuid().toString(): base64url, no padding, 22 chars."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def _request(sock: socket.socket, api_key: int, version: int, corr: int, body: bytes) -> bytes:
    client_id = b"minikafka-lab"
    header = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    frame = header + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    resp = _recv_exactly(sock, size)
    (got,) = struct.unpack_from(">i", resp)
    if got != corr:
        raise ConnectionError(f"correlation id {got} != {corr}")
    return resp[4:]


def probe(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when the broker answers ApiVersions v0 with no error and Metadata v1 lists >= 1 broker
    (i.e. the KRaft broker has registered and is unfenced, so produce / topic creation will work)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            body = _request(sock, 18, 0, 1, b"")               # ApiVersions v0: empty body
            (err,) = struct.unpack_from(">h", body)
            if err != 0:
                return False
            body = _request(sock, 3, 1, 2, struct.pack(">i", 0))  # Metadata v1, topics = [] (none)
            (n_brokers,) = struct.unpack_from(">i", body)
            return n_brokers >= 1
    except (OSError, struct.error, ConnectionError):
        return False


class KafkaBroker:
    """A single-node Apache Kafka (KRaft combined mode) subprocess on free loopback ports.

    >>> with KafkaBroker() as k: print(k.bootstrap)
    """

    def __init__(self, version: str | None = None, work_dir: Path | str | None = None,
                 heap: str = "512m") -> None:
        self.version = version or default_version()
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir else None
        self.heap = heap
        self.port: int | None = None
        self.controller_port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.cluster_id: str | None = None
        self.ready_seconds: float | None = None
        # extra listeners (name -> security protocol) and their ports, e.g. {"SASL_PLAINTEXT": ...}
        self.extra_listeners: dict[str, str] = {}
        self.listener_ports: dict[str, int] = {}
        self.format_args: list[str] = []  # extra `kafka-storage format` args, e.g. ["--add-scram", "..."]
        self.jvm_opts: list[str] = []  # extra JVM options of the broker, e.g. ["-Dorg.apache.kafka...=..."]
        self._log_fh = None
        # PDEATHSIG: the JVM gets SIGTERM when the *thread* that spawned it ends; nodes restarted from a
        # worker thread (KafkaCluster under a nemesis) turn it off and are stopped by their owner instead
        self.die_with_parent = True

    # paths ---------------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        assert self.port is not None, "not started"
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        assert self.work_dir is not None
        return self.work_dir / "kafka.log"

    @property
    def data_dir(self) -> Path:
        assert self.work_dir is not None
        return self.work_dir / "data"

    @property
    def config_path(self) -> Path:
        assert self.work_dir is not None
        return self.work_dir / "server.properties"

    def log_text(self, tail: int = 8000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    # lifecycle -----------------------------------------------------------------------------------
    def properties(self, overrides: dict[str, str] | None = None) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "log.flush.interval.messages": str(2**63 - 1),
        }
        for name, proto in self.extra_listeners.items():
            address = f"{name}://127.0.0.1:{self.listener_ports[name]}"
            props["listeners"] += "," + address
            props["advertised.listeners"] += "," + address
            props["listener.security.protocol.map"] += f",{name}:{proto}"
        for k, v in (overrides or {}).items():
            props[k] = str(v)
        return props

    def bootstrap_for(self, listener: str) -> str:
        """host:port of an extra listener (start(extra_listeners=...))."""
        return f"127.0.0.1:{self.listener_ports[listener]}"

    def listener_port(self, name: str) -> int:
        """The port of an extra listener (start(extra_listeners=...))."""
        return self.listener_ports[name]

    def start(self, port: int | None = None, overrides: dict[str, str] | None = None,
              timeout: float = 60.0, extra_listeners: dict[str, str] | None = None,
              format_args: list[str] | None = None, wait: bool = True) -> "KafkaBroker":
        """`extra_listeners`: name -> security protocol of listeners next to PLAINTEXT (on free ports,
        see bootstrap_for); `format_args`: more `kafka-storage format` args (e.g. --add-scram SPEC),
        used on the first start of a work dir."""
        t0 = time.monotonic()
        if extra_listeners is not None:
            self.extra_listeners = dict(extra_listeners)
        if format_args is not None:
            self.format_args = list(format_args)
        for name in self.extra_listeners:
            self.listener_ports.setdefault(name, free_port())
        libs = _ensure(self.version)
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix=f"apache-kafka-{self.version}-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.controller_port = self.controller_port or free_port()  # kept across restarts (a quorum voter's address)
        while self.controller_port == self.port:
            self.controller_port = free_port()
        props = self.properties(overrides)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log_cfg = self.work_dir / "log4j2.properties"
        log_cfg.write_text(SERVER_LOG4J2.format(log=self.log_path))
        java = java_bin()
        common = [f"-Dlog4j2.configurationFile={log_cfg}", f"-Dkafka.logs.dir={self.work_dir}",
                  "-cp", str(libs / "*")]
        if not (self.data_dir / "meta.properties").exists():
            self.cluster_id = self.cluster_id or random_cluster_id()
            fmt = subprocess.run(
                [java, *TOOL_JVM_OPTS, *common, "kafka.tools.StorageTool", "format",
                 "-t", self.cluster_id, "-c", str(self.config_path), *self.format_args],
                capture_output=True, text=True, timeout=120)
            if fmt.returncode != 0:
                raise RuntimeError(f"kafka-storage format failed ({fmt.returncode}):\n{fmt.stdout}\n{fmt.stderr}")
        self._log_fh = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [java, f"-Xmx{self.heap}", *SERVER_JVM_OPTS[1:], *self.jvm_opts, *common, "kafka.Kafka",
             str(self.config_path)],
            stdout=self._log_fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=self.work_dir, start_new_session=True,
            preexec_fn=_die_with_parent if self.die_with_parent and sys.platform.startswith("linux") else None)
        if wait:
            self.wait_ready(t0, timeout)
        return self

    def wait_ready(self, t0: float, timeout: float) -> None:
        """Until the broker listener answers ApiVersions (raises if the process exits or `timeout` passes)."""
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Apache Kafka exited with {self.proc.returncode}:\n{self.log_text()}")
            if probe("127.0.0.1", self.port, timeout=1.0):
                self.ready_seconds = time.monotonic() - t0
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"Apache Kafka not ready on {self.bootstrap} within {timeout}s:\n{self.log_text()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_bytes(self) -> int | None:
        """Resident set size of the broker JVM (Linux /proc)."""
        if not self.alive():
            return None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (controlled shutdown), wait up to `timeout`, then SIGKILL."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self._log_fh:
            self._log_fh.close()
            self._log_fh = None
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self._log_fh:
            self._log_fh.close()
            self._log_fh = None

    def cleanup(self) -> None:
        """Remove the temp work dir (only when KafkaBroker created it)."""
        if self._own_dir and self.work_dir is not None and not self.alive():
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> "KafkaBroker":
        if not self.alive():
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        self.cleanup()


class KafkaCluster:
    """`size` Apache Kafka nodes (KRaft combined mode) forming one cluster on loopback: the reference for
    the multi-node tests and benchmarks of issue 16. Node ids 1..size; each node keeps its ports and work
    dir across kill/start. Internal topics get replication factor min(3, size) and min.isr 2 as Kafka's
    production defaults (or 1 on a single node)."""

    def __init__(self, size: int = 3, version: str | None = None, work_dir: Path | str | None = None,
                 heap: str = "512m", overrides: dict[str, str] | None = None) -> None:
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="apache-kafka-cluster-"))
        self.ids = list(range(1, size + 1))
        self.cluster_id = random_cluster_id()
        self.nodes: dict[int, KafkaBroker] = {}
        self.ports = {n: free_port() for n in self.ids}
        for n in self.ids:
            b = KafkaBroker(version, self.work_dir / f"node{n}", heap)
            b.die_with_parent = False  # restarted from any thread; stop()/atexit end them
            b.cluster_id = self.cluster_id
            b.controller_port = free_port()
            self.nodes[n] = b
        voters = ",".join(f"{n}@127.0.0.1:{b.controller_port}" for n, b in self.nodes.items())
        import atexit
        atexit.register(self.kill_all)
        rf, isr = str(min(3, size)), str(min(2, size))
        self.overrides = {"controller.quorum.voters": voters, "default.replication.factor": rf,
                          "offsets.topic.replication.factor": rf, "transaction.state.log.replication.factor": rf,
                          "transaction.state.log.min.isr": isr, "share.coordinator.state.topic.replication.factor": rf,
                          "share.coordinator.state.topic.min.isr": isr, **(overrides or {})}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[n]}" for n in self.ids)

    bootstrap_servers = bootstrap  # the name minikafka.testing.MiniKafkaCluster uses (bench/jepsen.py drives both)

    def pause(self, n: int) -> None:
        """SIGSTOP the node's JVM (a frozen, not a dead, broker)."""
        if self.nodes[n].alive():
            os.kill(self.nodes[n].proc.pid, signal.SIGSTOP)

    def resume(self, n: int) -> None:
        if self.nodes[n].alive():
            os.kill(self.nodes[n].proc.pid, signal.SIGCONT)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = -1,
                     config: dict[str, str] | None = None) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, partitions, replication_factor, config=dict(config or {}))])[name].result(60)

    def start_node(self, n: int, timeout: float = 90.0, wait: bool = True) -> None:
        """Start node n unless it runs (as MiniKafkaCluster.start_node)."""
        if self.nodes[n].alive():
            return
        self.nodes[n].start(port=self.ports[n], overrides={"node.id": str(n), **self.overrides}, timeout=timeout,
                            wait=wait)

    def start(self, timeout: float = 90.0) -> "KafkaCluster":
        """Every node spawned before any is waited for (a node's listener opens only once the quorum has
        formed); spawned from this thread, as the JVMs die with the thread that spawned them."""
        t0 = time.monotonic()
        for n in self.ids:
            self.start_node(n, timeout, wait=False)
        for n in self.ids:
            self.nodes[n].wait_ready(t0, timeout)
        return self

    def kill(self, n: int) -> None:
        self.resume(n)
        self.nodes[n].kill()

    def kill_all(self) -> None:
        for n in self.ids:
            self.kill(n)

    def stop(self) -> None:
        for n in self.ids:
            self.resume(n)
        for b in self.nodes.values():
            b.stop()

    def rss_bytes(self) -> int:
        return sum(b.rss_bytes() or 0 for b in self.nodes.values())

    def cleanup(self) -> None:
        if self._own_dir and not any(b.alive() for b in self.nodes.values()):
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        self.cleanup()


# ------------------------------------------------------------------------------------------- CLI --

def _parse_overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep:
            raise SystemExit(f"--override expects key=value, got {item!r}")
        out[k.strip()] = v.strip()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="apache_kafka.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default=default_version(), help=f"Kafka version (default {default_version()})")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download the jars into the cache (idempotent)")
    f.add_argument("--force", action="store_true")
    f.add_argument("-v", "--verbose", action="store_true", help="show maven output")
    r = sub.add_parser("run", help="run a broker in the foreground until Ctrl-C / SIGTERM")
    r.add_argument("--port", type=int)
    r.add_argument("--dir", help="work dir (kept); default a temp dir removed at exit")
    r.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    t = sub.add_parser("tool", help="run a Kafka CLI tool: alias (kafka-topics) or main class, then its args")
    t.add_argument("tool")
    sub.add_parser("tools", help="list tool aliases and their main classes")
    sub.add_parser("path", help="print the cache dir")
    argv = list(sys.argv[1:] if argv is None else argv)
    # `tool` passes everything after the tool name through untouched (no argparse on Kafka's args)
    head = 2 if argv[:1] == ["--version"] else 0
    if len(argv) > head + 1 and argv[head] == "tool":
        version = argv[1] if head else default_version()
        cmd = tool_command(argv[head + 1], argv[head + 2:], version)
        os.execvp(cmd[0], cmd)
    a = ap.parse_args(argv)

    if a.cmd == "fetch":
        t0 = time.monotonic()
        already = is_fetched(a.version) and not a.force
        libs = fetch(a.version, force=a.force, quiet=not a.verbose)
        jars = list(libs.glob("*.jar"))
        size = sum(p.stat().st_size for p in jars)
        print(f"Apache Kafka {a.version}: {len(jars)} jars, {size / 2**20:.1f} MiB in {libs}"
              f" ({'cached' if already else f'fetched in {time.monotonic() - t0:.1f}s'})")
        return 0
    if a.cmd == "path":
        print(cache_dir(a.version))
        return 0
    if a.cmd == "tools":
        _ensure(a.version)
        for name in TOOLS:
            try:
                print(f"{name:28} {resolve_tool(name, a.version)}")
            except LookupError as e:
                print(f"{name:28} -- {e}")
        return 0
    if a.cmd == "tool":
        cmd = tool_command(a.tool, [], a.version)
        os.execvp(cmd[0], cmd)
    if a.cmd == "run":
        kb = KafkaBroker(a.version, work_dir=a.dir)
        stop = {"now": False}

        def _sig(signum, frame):
            stop["now"] = True
        signal.signal(signal.SIGTERM, _sig)
        signal.signal(signal.SIGINT, _sig)
        kb.start(port=a.port, overrides=_parse_overrides(a.override))
        rss = kb.rss_bytes()
        print(f"Apache Kafka {kb.version} ready on {kb.bootstrap} in {kb.ready_seconds:.1f}s"
              f" (RSS {rss / 2**20 if rss else 0:.0f} MiB); log {kb.log_path}; Ctrl-C to stop", flush=True)
        try:
            while not stop["now"] and kb.alive():
                time.sleep(0.2)
        finally:
            rc = kb.stop()
            if a.dir is None:
                kb.cleanup()
        print(f"stopped (exit {rc})")
        return 0 if stop["now"] else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
