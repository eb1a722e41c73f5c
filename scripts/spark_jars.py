#!/usr/bin/env python3
"""Spark's Kafka connector jars (spark-sql-kafka-0-10 and its runtime deps) and spark-avro (from_avro, for
the Schema Registry pipeline of docs/schema-registry.md) from Maven Central.

`mvn dependency:copy-dependencies` copies them into a cache outside the repository (never commit them):

    ${MINIKAFKA_KAFKA_CACHE:-${XDG_CACHE_HOME:-~/.cache}/minikafka}/spark-kafka-<version>/jars/*.jar

The version is the pyspark version pinned in pyproject.toml's `spark` extra (SPARK_VERSION below; keep
both equal: the connector must match the Spark it runs in). Jars that pyspark's wheel already ships
(Spark, Scala, slf4j, compression codecs) are excluded in scripts/spark-lab/pom.xml.

    python3 scripts/spark_jars.py fetch      # idempotent; ~5 s the first time, ~0 after
    python3 scripts/spark_jars.py path       # the jars dir
    python3 scripts/spark_jars.py jars       # comma-separated list, the value for `spark.jars`

Stdlib only, so that `make` can run it before any virtualenv exists.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.apache_kafka import DEPENDENCY_PLUGIN_VERSION, _file_lock, cache_base  # noqa: E402

SPARK_VERSION = "4.0.0"
POM_TEMPLATE = Path(__file__).resolve().parent / "spark-lab" / "pom.xml"
MARKER = ".fetched"
# the Spark artifacts the pom names (at SPARK_VERSION); their runtime deps come along
ARTIFACTS = ("spark-sql-kafka-0-10_2.13", "spark-avro_2.13")


def version() -> str:
    return os.environ.get("MINIKAFKA_SPARK_VERSION") or SPARK_VERSION


def cache_dir(v: str | None = None) -> Path:
    return cache_base() / f"spark-kafka-{v or version()}"


def jars_dir(v: str | None = None) -> Path:
    return cache_dir(v) / "jars"


def render_pom(v: str) -> str:
    return (POM_TEMPLATE.read_text().replace("@SPARK_VERSION@", v)
            .replace("@DEPENDENCY_PLUGIN_VERSION@", DEPENDENCY_PLUGIN_VERSION))


def fetch(v: str | None = None, force: bool = False, quiet: bool = True) -> Path:
    """Resolve and copy the connector jars; returns the jars dir. Idempotent (marker = pom hash),
    safe against concurrent callers (file lock), atomic (a half-done fetch never looks complete)."""
    v = v or version()
    cdir = cache_dir(v)
    jars = cdir / "jars"
    pom = render_pom(v)
    digest = hashlib.sha256(pom.encode()).hexdigest()[:16]
    marker = cdir / MARKER

    def done() -> bool:
        return not force and marker.is_file() and marker.read_text().strip() == digest and jars.is_dir()

    if done():
        return jars
    mvn = os.environ.get("MVN") or shutil.which("mvn")
    if not mvn:
        raise RuntimeError("mvn not found: install Maven (>= 3.6.3) or set MVN")
    with _file_lock(cdir / ".lock"):
        if done():
            return jars
        (cdir / "pom.xml").write_text(pom)
        tmp = cdir / "jars.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [mvn, "-B", "-f", str(cdir / "pom.xml"),
               f"org.apache.maven.plugins:maven-dependency-plugin:{DEPENDENCY_PLUGIN_VERSION}:copy-dependencies",
               f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"]
        if quiet:
            cmd.insert(1, "-q")
        res = subprocess.run(cmd, cwd=cdir, capture_output=quiet, text=True)
        if res.returncode != 0:
            out = (res.stdout or "") + (res.stderr or "") if quiet else ""
            raise RuntimeError(f"maven fetch of the Spark jars {v} failed ({res.returncode}):\n{out[-4000:]}")
        for artifact in ARTIFACTS:
            if not (tmp / f"{artifact}-{v}.jar").is_file():
                raise RuntimeError(f"fetch finished but {artifact}-{v}.jar is missing in {tmp}")
        marker.unlink(missing_ok=True)
        shutil.rmtree(jars, ignore_errors=True)
        tmp.rename(jars)
        marker.write_text(digest + "\n")
    return jars


def jar_list(v: str | None = None) -> list[str]:
    """The jars to hand to `spark.jars` (fetching them first if needed)."""
    return sorted(str(p) for p in fetch(v).glob("*.jar"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["fetch", "path", "jars"])
    ap.add_argument("--version", default=None)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    if a.command == "fetch":
        print(fetch(a.version, force=a.force))
    elif a.command == "path":
        print(jars_dir(a.version))
    else:
        print(",".join(jar_list(a.version)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
