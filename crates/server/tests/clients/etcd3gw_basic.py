"""The basic operations of etcd3gw (OpenStack's etcd client, which speaks only etcd's
JSON gateway) against the server at argv[1]:argv[2]. Prints one line per step and
exits non-zero on the first one that fails."""

import sys
import threading
import time

import etcd3gw

host, port = sys.argv[1], int(sys.argv[2])
c = etcd3gw.client(host=host, port=port)


def step(name, ok):
    print(("ok   " if ok else "FAIL ") + name, flush=True)
    if not ok:
        sys.exit(1)


status = c.status()
step("status names a leader", int(status["leader"]) != 0)
step("members lists one", len(c.members()) == 1)
step("put", c.put("foo", "bar") is True)
step("get", c.get("foo") == [b"bar"])
values = c.get("foo", metadata=True)
step("get with metadata", values[0][1]["key"] == b"foo" and values[0][1]["version"] == "1")
c.put("dir/a", "1")
c.put("dir/b", "2")
prefix = sorted(v for v, _ in c.get_prefix("dir/"))
step("get_prefix", prefix == [b"1", b"2"])
step("replace when equal", c.replace("foo", "bar", "baz") is True)
step("replace when not equal", c.replace("foo", "bar", "qux") is False)
step("get after replace", c.get("foo") == [b"baz"])
step("create absent", c.create("new", "v") is True)
step("create present", c.create("new", "w") is False)
step("delete", c.delete("foo") is True)
step("delete absent", c.delete("foo") is False)
step("delete_prefix", c.delete_prefix("dir/") is True)
step("get_all", len(c.get_all()) >= 1)

lease = c.lease(ttl=30)
step("lease granted", lease.id != 0)
c.put("leased", "v", lease=lease)
step("lease refresh", lease.refresh() > 0)
step("lease ttl", 0 < lease.ttl() <= 30)
step("lease keys", lease.keys() == [b"leased"])
step("lease revoke", lease.revoke() is True)
step("leased key gone", c.get("leased") == [])

lock = c.lock(id="gate", ttl=30)
step("lock acquire", lock.acquire() is True)
step("lock is held", lock.is_acquired() is True)
step("lock release", lock.release() is True)

seen = []
def writer():
    time.sleep(0.5)
    c.put("watched", "w1")
t = threading.Thread(target=writer)
t.start()
event = c.watch_once("watched", timeout=10)
t.join()
step("watch_once sees the put", event["kv"]["value"] == b"w1")

events, cancel = c.watch_prefix("w")
c.put("watched", "w2")
for e in events:
    seen.append(e)
    break
cancel()
step("watch_prefix sees the put", seen and seen[0]["kv"]["value"] == b"w2")

txn = c.transaction({
    "compare": [{"key": etcd3gw.utils._encode("new"), "result": "EQUAL", "target": "VALUE",
                 "value": etcd3gw.utils._encode("v")}],
    "success": [{"request_put": {"key": etcd3gw.utils._encode("new"),
                                 "value": etcd3gw.utils._encode("v2")}}],
    "failure": [],
})
step("transaction", txn.get("succeeded") is True)
step("get after transaction", c.get("new") == [b"v2"])
print("all steps passed")
