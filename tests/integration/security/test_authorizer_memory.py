"""Authorization holds no memory a client controls: a principal without any ACL asks about thousands of
32 KiB group and transactional ids (DescribeGroups, FindCoordinator, DeleteGroups), every one denied; the
broker's RSS grows by no more than its request memory budget (queued.max.request.bytes) plus a small
margin, where a per-name decision cache would keep every name."""
from __future__ import annotations

import uuid

import psutil
import pytest
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from tests.support.authz_helpers import STANDARD_AUTHORIZER, bootstrap_admin
from tests.support.helpers import RawClient

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]  # an RSS bound

BUDGET_MB = 16  # queued.max.request.bytes of this broker
MARGIN_MB = 24
NAME_BYTES = 32_000  # a string of a non-flexible version holds at most 32767 bytes
NAMES = 6000  # ~190 MB of distinct names: a per-name cache would hold all of it


def test_denied_names_leave_no_memory_behind(broker_factory):
    b = broker_factory({"authorizer.class.name": STANDARD_AUTHORIZER, "allow.everyone.if.no.acl.found": "true",
                        "queued.max.request.bytes": str(BUDGET_MB << 20)})
    admin = bootstrap_admin(b.bootstrap)  # ACLs exist from here on: the client below has none
    admin.close()
    proc = psutil.Process(b.pid)
    with RawClient(b.bootstrap, timeout=60) as c:
        c.request(FindCoordinatorRequest(key="warm", key_type=0), 3)  # first use of each code path
        c.request(DescribeGroupsRequest(groups=["warm"], include_authorized_operations=True), 5)
        before = proc.memory_info().rss
        tag = uuid.uuid4().hex
        per_request = 50
        for start in range(0, NAMES, per_request):
            names = [f"{tag}-{i}-".ljust(NAME_BYTES, "x") for i in range(start, start + per_request)]
            kind = (start // per_request) % 3
            if kind == 0:
                resp = c.request(DescribeGroupsRequest(groups=names, include_authorized_operations=True), 5)
                assert all(g.error_code == 30 for g in resp.groups)
            elif kind == 1:
                resp = c.request(FindCoordinatorRequest(key_type=1, coordinator_keys=names), 4)
                assert all(x.error_code == 53 for x in resp.coordinators)
            else:
                resp = c.request(DeleteGroupsRequest(groups_names=names), 2)
                assert all(r.error_code == 30 for r in resp.results)
        grown_mb = (proc.memory_info().rss - before) / (1 << 20)
    assert grown_mb <= BUDGET_MB + MARGIN_MB, f"RSS grew by {grown_mb:.0f} MB for {NAMES} denied 32 KiB names"
