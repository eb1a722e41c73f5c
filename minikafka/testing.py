"""A minikafka broker for tests and scripts: `MiniKafka`, a real broker subprocess you can stop, restart
and kill -9.

    from minikafka.testing import MiniKafka
    with MiniKafka(config={"num.partitions": "3"}) as kafka:
        kafka.bootstrap_servers                 # "127.0.0.1:<free port>"
        kafka.create_topic("orders", partitions=6, config={"cleanup.policy": "compact"})
        kafka.restart()                         # clean stop + start, same port and data dir
        kafka.kill(); kafka.start()             # a real crash (SIGKILL), back on the same port and data

    with MiniKafka(sasl_users={"alice": "alice-secret"}) as kafka:   # + a SASL_PLAINTEXT listener
        kafka.sasl_bootstrap_servers            # PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for alice

Invariants: `start()` returns only once the broker has answered an ApiVersions request on its port (or
raises `MiniKafkaError` carrying the tail of the broker's log); the port and the data dir stay the same
for the object's life, so `restart()` and `kill()` + `start()` keep every acked record; a temp data dir
(the default) is removed by `close()` / the `with` exit (and at interpreter exit), a `data_dir=` given
by the caller never is. No pytest needed here (the pytest fixtures are in `minikafka.pytest_plugin`).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    from minikafka.faults import FaultsClient

__all__ = ["MiniKafka", "MiniKafkaCluster", "MiniKafkaError", "free_port", "minikafka_command"]

_LOG_TAIL = 4000


class MiniKafkaError(RuntimeError):
    """The broker did not start, died, or refused an admin request; the message ends with its log tail."""


# Server ports come from below the kernel's ephemeral range, so that a port a broker gave up (killed, to be
# restarted on the same port) is never handed to some client's connect() in between, and each pytest-xdist
# worker draws from its own slice (PYTEST_XDIST_WORKER gwN -> slice N+1; slice 0 outside xdist).
_PORT_FLOOR = 10240
_PORT_SLICES = 8
_port_lock = threading.Lock()
_port_next: dict[tuple[int, int], int] = {}


def _ephemeral_floor() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_slice() -> tuple[int, int] | None:
    """[lo, hi) of this process's slice, or None where the range below the ephemeral ports is too small."""
    top = min(_ephemeral_floor(), 32768)
    size = (top - _PORT_FLOOR) // _PORT_SLICES
    if size < 256:
        return None
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) + 1 if worker.startswith("gw") and worker[2:].isdigit() else 0
    lo = _PORT_FLOOR + (index % _PORT_SLICES) * size
    return lo, lo + size


def _bindable(host: str, port: int) -> bool:
    """Nothing listens on, or holds a connection from, host:port (bind without SO_REUSEADDR)."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port to listen on that is free on `host` now (bound then released), below the ephemeral range
    and in this xdist worker's slice; successive calls walk the slice (from a random start per process)
    rather than reuse a port soon. Falls back to an OS-chosen port where no such range exists."""
    bounds = _port_slice()
    if bounds is not None:
        lo, hi = bounds
        with _port_lock:
            nxt = _port_next.get(bounds)
            if nxt is None:
                nxt = lo + int.from_bytes(os.urandom(2), "big") % (hi - lo)
            for _ in range(hi - lo):
                port, nxt = nxt, (lo if nxt + 1 >= hi else nxt + 1)
                if _bindable(host, port):
                    _port_next[bounds] = nxt
                    return port
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def minikafka_command() -> list[str]:
    """The argv prefix that runs the `minikafka` command line for a broker subprocess.

    `$MINIKAFKA_EXECUTABLE` when set: an installed `minikafka` entry point (e.g. a wheel's virtualenv, as
    `make test` uses), run as it is, with nothing of the caller's import path. Otherwise this interpreter
    with `-m minikafka.broker.cli.main`, importing the same `minikafka` the caller imported."""
    exe = os.environ.get("MINIKAFKA_EXECUTABLE")
    if exe:
        return [exe]
    return [sys.executable, "-m", "minikafka.broker.cli.main"]


def subprocess_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for `minikafka_command()`: `base` (default os.environ), plus the caller's package
    root on PYTHONPATH when the subprocess runs this interpreter (an installed executable gets none)."""
    env = dict(os.environ if base is None else base)
    if env.get("MINIKAFKA_EXECUTABLE"):
        env.pop("PYTHONPATH", None)  # the install imports its own package, never a tree named here
    else:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH")) if p)
    return env


def _package_root() -> str | None:
    """The sys.path entry this `minikafka` package was imported from, so that the broker subprocess runs
    the same code as the caller (a wheel installed with --target, a source tree on sys.path); None when
    that is a site-packages dir, which the subprocess finds anyway (and must not put ahead of stdlib)."""
    import site
    root = str(Path(__file__).resolve().parent.parent)
    sites = {str(Path(p).resolve()) for p in [*site.getsitepackages(), site.getusersitepackages()]}
    return None if root in sites else root


class _Conn:
    """One blocking connection speaking kafka.protocol requests (the codec the broker itself uses)."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def _recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def request(self, req, resp_cls, version: int):
        self.correlation_id += 1
        req.with_header(correlation_id=self.correlation_id, client_id="minikafka-testing")
        self.sock.sendall(bytes(req.encode(version=version, header=True, framed=True)))
        (size,) = struct.unpack(">i", self._recv_exactly(4))
        return resp_cls.decode(self._recv_exactly(size), version=version, header=True)


def _stop_process(proc: subprocess.Popen | None, kill: bool, timeout: float) -> None:
    if proc is None or proc.poll() is not None:
        return
    if kill:
        proc.kill()
    else:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _finalize(proc_holder: list, workdir: str | None) -> None:
    """At garbage collection / interpreter exit: no orphan broker, no leftover temp dir."""
    _stop_process(proc_holder[0], kill=True, timeout=10)
    if workdir:
        shutil.rmtree(workdir, ignore_errors=True)


class MiniKafka:
    """A minikafka broker subprocess on a free loopback port (see the module docstring).

    `config`: broker config keys (Kafka's names, e.g. {"num.partitions": "3"}), passed as `--override`.
    `data_dir`: keep the data here (created if missing, never removed); default: a temp dir removed at
    close. `port`: the listener port (default: a free one). `start`: start in the constructor.

    `admin_url` is the HTTP admin/metrics listener (`minikafka.metrics.listener` in `config`) or None;
    it is the seam where admin-side helpers (metrics, fault injection) attach.
    `sasl_users`: {user: password}; adds a SASL_PLAINTEXT listener on a free port
    (`sasl_bootstrap_servers`) where these users log in with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512
    (PLAIN users in the listener's JAAS config, SCRAM credentials written into the data dir before the
    first start, as `minikafka storage format --add-scram` does). Keys in `config` win.
    `faults=True`, or `minikafka.faults.enable=true` in `config`: enable fault injection, with the admin
    listener on a free port unless `config` names one; then `kafka.faults` is a `minikafka.faults.FaultsClient`.
    `schema_registry=True`, or `schema.registry.listener` in `config`: the built-in Confluent-compatible
    Schema Registry, on a free port unless `config` names one; its URL is `schema_registry_url`.
    """

    def __init__(self, config: Mapping[str, object] | None = None, data_dir: str | os.PathLike | None = None,
                 port: int | None = None, start: bool = True, startup_timeout: float = 30.0,
                 host: str = "127.0.0.1", faults: bool = False,
                 sasl_users: Mapping[str, str] | None = None, schema_registry: bool = False) -> None:
        self.config: dict[str, str] = {str(k): _config_value(v) for k, v in (config or {}).items()}
        self.host = host
        if schema_registry and not self.config.get("schema.registry.listener"):
            self.config["schema.registry.listener"] = f"http://{host}:{free_port(host)}"
        self.schema_registry_url: str | None = self.config.get("schema.registry.listener") or None
        if faults:
            self.config["minikafka.faults.enable"] = "true"
        if self.config.get("minikafka.faults.enable", "").strip().lower() == "true":
            # fault injection needs the admin listener: one on a free port unless configured
            if not self.config.get("minikafka.metrics.listener"):
                self.config["minikafka.metrics.listener"] = f"http://{host}:{free_port(host)}"
        self.port = port or free_port(host)
        self.sasl_port: int | None = None
        self._sasl_users = dict(sasl_users or {})
        if self._sasl_users:
            self.sasl_port = free_port(host)
            self.config = {**_sasl_config(host, self.port, self.sasl_port, self._sasl_users), **self.config}
        self.startup_timeout = startup_timeout
        self._workdir = tempfile.mkdtemp(prefix="minikafka-")
        self.data_dir = Path(data_dir) if data_dir is not None else Path(self._workdir) / "data"
        self.log_path = Path(self._workdir) / "broker.log"
        self.admin_url: str | None = self.config.get("minikafka.metrics.listener") or None
        self.startup_seconds: float | None = None  # spawn to the first ApiVersions answer, last start()
        self._cwd: str | None = None  # the subprocess's working dir (None: the caller's)
        self._proc_holder: list[subprocess.Popen | None] = [None]
        self._finalizer = weakref.finalize(self, _finalize, self._proc_holder, self._workdir)
        if start:
            try:
                self.start()
            except BaseException:
                self.close()
                raise

    # --- addresses ---------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        """The SASL_PLAINTEXT listener of `sasl_users`."""
        if self.sasl_port is None:
            raise MiniKafkaError("no SASL listener: give MiniKafka(sasl_users={...})")
        return f"{self.host}:{self.sasl_port}"

    @property
    def faults(self) -> "FaultsClient":
        """The fault-injection client (inject / injected / clear) on `admin_url`; see minikafka/faults.py."""
        from minikafka.faults import FaultsClient
        if not self.admin_url:
            raise MiniKafkaError("fault injection needs MiniKafka(faults=True) (or minikafka.faults.enable=true "
                                 "and minikafka.metrics.listener in config)")
        return FaultsClient(self.admin_url)

    @property
    def proc(self) -> subprocess.Popen | None:
        return self._proc_holder[0]

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self, tail: int = _LOG_TAIL) -> str:
        """The last `tail` characters of the broker's output (all its starts, appended)."""
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    # --- life cycle --------------------------------------------------------------------------------

    def _command(self) -> list[str]:
        args = [*minikafka_command(), "serve",
                "--override", f"listeners=PLAINTEXT://{self.host}:{self.port}",
                "--override", f"log.dirs={self.data_dir}"]
        for key, value in self.config.items():
            args += ["--override", f"{key}={value}"]
        return args

    def start(self) -> "MiniKafka":
        """Spawn the broker and wait until it answers ApiVersions; no-op if it is running."""
        if self.alive():
            return self
        if not self._finalizer.alive:
            raise MiniKafkaError("this MiniKafka was closed")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._sasl_users:  # SCRAM credentials for the SASL users (once; later starts keep the file)
            from minikafka.broker.security.sasl.bootstrap import add_scram_credentials
            add_scram_credentials(self.data_dir, [f'{mech}=[name="{user}",password="{password}"]'
                                                  for user, password in self._sasl_users.items()
                                                  for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")])
            self._sasl_users = {}
        import kafka.protocol.metadata  # noqa: F401  (the probe's codec, loaded before the clock starts)
        env = subprocess_env()
        t0 = time.perf_counter()
        with open(self.log_path, "ab") as log:
            proc = subprocess.Popen(self._command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                    stdin=subprocess.DEVNULL, cwd=self._cwd)
        self._proc_holder[0] = proc
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if proc.poll() is not None:
                raise MiniKafkaError(f"minikafka exited with code {proc.returncode} before answering on "
                                     f"{self.bootstrap_servers}; log tail ({self.log_path}):\n{self.log_text()}")
            if self._answers_api_versions():
                self.startup_seconds = time.perf_counter() - t0
                return self
            if time.monotonic() > deadline:
                _stop_process(proc, kill=True, timeout=10)
                raise MiniKafkaError(f"minikafka did not answer ApiVersions on {self.bootstrap_servers} within "
                                     f"{self.startup_timeout}s; log tail ({self.log_path}):\n{self.log_text()}")
            time.sleep(0.005)

    def _answers_api_versions(self) -> bool:
        from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
        try:
            conn = _Conn(self.host, self.port, timeout=2.0)
        except OSError:
            return False
        try:
            resp = conn.request(ApiVersionsRequest(), ApiVersionsResponse, 0)
            return resp.error_code == 0 and bool(resp.api_keys)
        except (OSError, ConnectionError, ValueError):
            return False
        finally:
            conn.close()

    def stop(self, timeout: float = 20.0) -> int | None:
        """Clean shutdown (SIGTERM, wait); returns the exit code (None if it was not running)."""
        proc = self.proc
        if proc is None:
            return None
        _stop_process(proc, kill=False, timeout=timeout)
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL: a real crash, nothing flushed or closed; `start()` recovers on the same port and data."""
        _stop_process(self.proc, kill=True, timeout=10)

    def restart(self) -> "MiniKafka":
        """Clean stop + start on the same port and data dir."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the broker (cleanly; killed if it does not exit in time) and remove the temp dir."""
        if self._finalizer.alive:
            try:
                self.stop()
            finally:
                self._finalizer()

    def __enter__(self) -> "MiniKafka":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.alive() else "stopped"
        return f"MiniKafka({self.bootstrap_servers}, {state}, data_dir={str(self.data_dir)!r})"

    # --- topics ------------------------------------------------------------------------------------

    def _admin(self, req, resp_cls, version: int):
        conn = _Conn(self.host, self.port, timeout=30.0)
        try:
            return conn.request(req, resp_cls, version)
        finally:
            conn.close()

    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, object] | None = None,
                     timeout_ms: int = 30000) -> None:
        """CreateTopics (v5); raises MiniKafkaError with Kafka's error name if the broker refuses."""
        from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
        topic = CreateTopicsRequest.CreatableTopic
        req = CreateTopicsRequest(topics=[topic(
            name=name, num_partitions=partitions, replication_factor=-1, assignments=[],
            configs=[topic.CreatableTopicConfig(name=str(k), value=_config_value(v))
                     for k, v in (config or {}).items()])], timeout_ms=timeout_ms, validate_only=False)
        resp = self._admin(req, CreateTopicsResponse, 5)
        (t,) = resp.topics
        _raise_for(t.error_code, t.error_message, f"create topic {name!r}")

    def delete_topic(self, name: str, timeout_ms: int = 30000) -> None:
        """DeleteTopics (v4); raises MiniKafkaError with Kafka's error name if the broker refuses."""
        from kafka.protocol.admin import DeleteTopicsRequest, DeleteTopicsResponse
        resp = self._admin(DeleteTopicsRequest(topic_names=[name], timeout_ms=timeout_ms), DeleteTopicsResponse, 4)
        (r,) = resp.responses
        _raise_for(r.error_code, getattr(r, "error_message", None), f"delete topic {name!r}")


def _sasl_config(host: str, port: int, sasl_port: int, users: Mapping[str, str]) -> dict[str, str]:
    """Broker config (Kafka's keys) of a PLAINTEXT + SASL_PLAINTEXT broker whose PLAIN users are `users`."""
    entries = []
    for user, password in users.items():
        if not user or not all(c.isalnum() or c in "_.-" for c in user) or '"' in password or "\\" in password:
            raise ValueError(f"sasl_users: user names of letters, digits, '_', '.', '-' and passwords without "
                             f"'\"' or '\\' please (got {user!r})")
        entries.append(f'user_{user}="{password}"')
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(entries) + ";"
    return {"listeners": f"PLAINTEXT://{host}:{port},SASL_PLAINTEXT://{host}:{sasl_port}",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            **{f"listener.name.sasl_plaintext.{mech}.sasl.jaas.config":
               "org.apache.kafka.common.security.scram.ScramLoginModule required;"
               for mech in ("scram-sha-256", "scram-sha-512")}}


def _config_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _raise_for(code: int, message: str | None, what: str) -> None:
    if code == 0:
        return
    import kafka.errors
    name = kafka.errors.for_code(code).__name__
    raise MiniKafkaError(f"{what}: {name} ({code}){': ' + message if message else ''}")


def __getattr__(name: str):
    """`MiniKafkaCluster` lives in testing_cluster.py (it builds on MiniKafka); importable from here."""
    if name == "MiniKafkaCluster":
        from minikafka.testing_cluster import MiniKafkaCluster
        return MiniKafkaCluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
