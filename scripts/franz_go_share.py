#!/usr/bin/env python3
"""franz-go's own share-group tests (KIP-932) run against a broker: the oracle for ShareGroupHeartbeat,
ShareFetch/ShareAcknowledge v2 and the share-group offsets admin APIs as a Go client drives them.

github.com/twmb/franz-go (module root; kgo is its pkg/kgo package, not a module of its own) comes from
the Go module proxy into a cache outside the repository:

    ${MINIKAFKA_KAFKA_CACHE:-${XDG_CACHE_HOME:-~/.cache}/minikafka}/franz-go/
        gomod/            GOMODCACHE (franz-go and its dependencies, as the proxy serves them)
        gobuild/          GOCACHE (the Go build cache)
        src-<version>/    a writable copy of the module source
        kgo-<version>.test   the compiled pkg/kgo test binary (`go test -c`), built once per version

The tests: every Test function in pkg/kgo/*_test.go that skips itself when the broker lacks share groups
(`if !allowShare { t.Skip(...) }`; allowShare is set when ApiVersions advertises ShareFetch (78) v2+ and
ShareAcknowledge (79) v2+). In v1.22.x these are TestShareGroup (client_test.go), TestShareGroupETL,
TestShareGroupAckOnClose, TestShareGroupOffsetsAdmin (share_test.go) and TestConsumeRegexShareSkipsInternal
(consumer_test.go). They are pointed at the broker by KGO_SEEDS, with KGO_TEST_RF=1 (a single node) and
KGO_TEST_RECORDS (the ETL test's record count; its default, 500000, is cut to 2000 here).

Fails (exit 1) unless every one of them reports `--- PASS`: a SKIP (the broker did not advertise the
versions) is a failure, and so is a test that did not run.

    python scripts/franz_go_share.py run --seeds 127.0.0.1:9092      # fetch + build if needed, then run
    python scripts/franz_go_share.py prepare                          # fetch + build only
    python scripts/franz_go_share.py list                             # print the test names

Environment: MINIKAFKA_FRANZ_GO_VERSION (default DEFAULT_VERSION), GOPROXY (default the public proxy),
GO (go executable, default `go`).
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

MODULE = "github.com/twmb/franz-go"
DEFAULT_VERSION = "v1.22.3"
DEFAULT_RECORDS = 2000
# the tests the issue names; discovery must find at least these
KNOWN = ("TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin")


def version() -> str:
    return os.environ.get("MINIKAFKA_FRANZ_GO_VERSION") or DEFAULT_VERSION


def cache_dir() -> Path:
    env = os.environ.get("MINIKAFKA_KAFKA_CACHE")
    if env:
        base = Path(env).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "minikafka"
    return base / "franz-go"


def go_bin() -> str:
    go = os.environ.get("GO") or shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists()
                                                       else None)
    if not go:
        raise RuntimeError("go not found: install Go (>= the version franz-go's go.mod asks) or set GO")
    return go


def go_env() -> dict[str, str]:
    c = cache_dir()
    env = dict(os.environ)
    env.update(GOMODCACHE=str(c / "gomod"), GOCACHE=str(c / "gobuild"), GOFLAGS="-mod=mod", GOTOOLCHAIN="local",
               GOPROXY=os.environ.get("GOPROXY") or "https://proxy.golang.org,direct")
    return env


@contextlib.contextmanager
def _lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _go(args: list[str], cwd: Path | None = None, timeout: float = 900) -> str:
    res = subprocess.run([go_bin(), *args], cwd=cwd, env=go_env(), capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"go {' '.join(args)} failed ({res.returncode}):\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
    return res.stdout


def source_dir(ver: str | None = None) -> Path:
    """The module source, fetched through the Go proxy (`go mod download`) and copied writable."""
    ver = ver or version()
    src = cache_dir() / f"src-{ver}"
    if (src / "go.mod").is_file():
        return src
    with _lock(cache_dir() / ".lock"):
        if (src / "go.mod").is_file():
            return src
        import json
        info = json.loads(_go(["mod", "download", "-json", f"{MODULE}@{ver}"], cwd=cache_dir()))
        if info.get("Error"):
            raise RuntimeError(f"go mod download {MODULE}@{ver}: {info['Error']}")
        tmp = cache_dir() / f"src-{ver}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(info["Dir"], tmp)
        for p in [tmp, *tmp.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)  # the module cache is read-only
        tmp.rename(src)
    return src


def share_tests(ver: str | None = None) -> list[str]:
    """Test functions of pkg/kgo that skip unless the broker supports share groups (allowShare)."""
    kgo = source_dir(ver) / "pkg" / "kgo"
    names = []
    for f in sorted(kgo.glob("*_test.go")):
        text = f.read_text()
        for m in re.finditer(r"^func (Test\w+)\(t \*testing\.T\) \{\n(.*?)^\}", text, re.M | re.S):
            if re.search(r"if !allowShare \{", m.group(2)):
                names.append(m.group(1))
    missing = [n for n in KNOWN if n not in names]
    if missing:
        raise RuntimeError(f"franz-go {ver or version()} has no share-gated tests named {missing} (found {names})")
    return names


def test_binary(ver: str | None = None) -> Path:
    """pkg/kgo's test binary (`go test -c`), built once per franz-go version and Go version."""
    ver = ver or version()
    gov = _go(["env", "GOVERSION"]).strip()
    binary = cache_dir() / f"kgo-{ver}-{gov}.test"
    if binary.is_file():
        return binary
    src = source_dir(ver)
    with _lock(cache_dir() / ".lock"):
        if not binary.is_file():
            tmp = binary.with_suffix(".tmp")
            _go(["test", "-c", "-o", str(tmp), "."], cwd=src / "pkg" / "kgo")
            tmp.rename(binary)
    return binary


def prepare(ver: str | None = None) -> tuple[Path, list[str]]:
    return test_binary(ver), share_tests(ver)


def run(seeds: str, ver: str | None = None, records: int = DEFAULT_RECORDS, timeout: float = 170,
        log_level: str = "none") -> tuple[bool, dict[str, str], str]:
    """Run the share tests against `seeds`; returns (ok, test -> PASS/FAIL/SKIP/MISSING, output)."""
    binary, tests = prepare(ver)
    pattern = "^(" + "|".join(tests) + ")$"
    env = dict(os.environ, KGO_SEEDS=seeds, KGO_TEST_RF="1", KGO_TEST_RECORDS=str(records), KGO_LOG_LEVEL=log_level)
    cmd = [str(binary), "-test.run", pattern, "-test.v", "-test.count=1", f"-test.timeout={int(timeout)}s"]
    try:
        res = subprocess.run(cmd, cwd=source_dir(ver) / "pkg" / "kgo", env=env, capture_output=True, text=True,
                             timeout=timeout + 30)
        out = res.stdout + res.stderr
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        out += "\n(killed: the test binary outlived its timeout)"
    results = {t: "MISSING" for t in tests}
    for m in re.finditer(r"--- (PASS|FAIL|SKIP): (\w+) \(", out):
        if m.group(2) in results:
            results[m.group(2)] = m.group(1)
    return all(v == "PASS" for v in results.values()), results, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="franz_go_share.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default=version(), help=f"franz-go version (default {version()})")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the share-group tests against a broker (fails on any skip)")
    r.add_argument("--seeds", required=True, help="bootstrap host:port[,host:port]")
    r.add_argument("--records", type=int, default=DEFAULT_RECORDS, help="KGO_TEST_RECORDS (the ETL test's size)")
    r.add_argument("--timeout", type=float, default=170, help="seconds for the whole test binary")
    r.add_argument("-v", "--verbose", action="store_true", help="print the whole go test output")
    sub.add_parser("prepare", help="fetch the module and build the test binary")
    sub.add_parser("list", help="print the share-group test names")
    a = ap.parse_args(argv)
    if a.cmd == "prepare":
        t0 = time.monotonic()
        binary, tests = prepare(a.version)
        print(f"franz-go {a.version}: {binary} ({time.monotonic() - t0:.1f}s); tests: {' '.join(tests)}")
        return 0
    if a.cmd == "list":
        print("\n".join(share_tests(a.version)))
        return 0
    t0 = time.monotonic()
    ok, results, out = run(a.seeds, a.version, a.records, a.timeout)
    if a.verbose or not ok:
        print(out[-20000:])
    for name, status in results.items():
        print(f"{status:8} {name}")
    print(f"franz-go {a.version} share tests: {sum(v == 'PASS' for v in results.values())}/{len(results)} passed"
          f" in {time.monotonic() - t0:.1f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
