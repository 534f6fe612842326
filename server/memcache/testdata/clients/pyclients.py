"""Drives a blobcache memcached port with pymemcache and python-memcached.

Usage: python3 pyclients.py HOST PORT (TestPythonClients runs it). Each client runs the same
commands with its default settings: pymemcache sends noreply on set, add, replace, append,
prepend, delete, touch and flush_all by default (default_noreply=True), so those return True
without reading an answer; python-memcached sends none. Exits non-zero on the first wrong answer.
"""
import sys

import memcache
from pymemcache.client.base import Client


def check(what, got, want):
    if got != want:
        sys.exit(f"{what}: got {got!r}, want {want!r}")


def pymemcache_run(host, port):
    c = Client((host, port))  # default_noreply=True
    q = Client((host, port), default_noreply=False)
    pre = b"py-"
    check("set (noreply)", c.set(pre + b"k", b"v", expire=0), True)
    check("get", c.get(pre + b"k"), b"v")
    check("add existing", q.add(pre + b"k", b"x"), False)
    check("add new", q.add(pre + b"a", b"1"), True)
    check("replace missing", q.replace(pre + b"missing", b"x"), False)
    check("replace", q.replace(pre + b"k", b"w"), True)
    check("append", q.append(pre + b"k", b"x"), True)
    check("prepend", q.prepend(pre + b"k", b"<"), True)
    check("append (noreply)", c.append(pre + b"k", b">"), True)
    check("get after append", c.get(pre + b"k"), b"<wx>")
    value, cas = q.gets(pre + b"k")
    check("gets", value, b"<wx>")
    check("cas", q.cas(pre + b"k", b"new", cas), True)
    check("cas stale", q.cas(pre + b"k", b"lost", cas), False)
    check("cas missing", q.cas(pre + b"missing", b"x", cas), None)
    q.set(pre + b"n", b"10")
    check("incr", q.incr(pre + b"n", 5), 15)
    check("decr below 0", q.decr(pre + b"n", 100), 0)
    check("incr missing", q.incr(pre + b"missing", 1), None)
    check("incr wrap", (q.set(pre + b"w", b"18446744073709551615"), q.incr(pre + b"w", 1))[1], 0)
    check("incr (noreply)", q.incr(pre + b"n", 1, noreply=True), None)
    check("get after incr (padded, as memcached does)", q.get(pre + b"n"), b"1 ")
    check("touch", q.touch(pre + b"k", 100), True)
    check("touch missing", q.touch(pre + b"missing", 100), False)
    check("touch (noreply)", c.touch(pre + b"k", 100), True)
    check("delete", q.delete(pre + b"a"), True)
    check("delete missing", q.delete(pre + b"a"), False)
    check("delete (noreply)", c.delete(pre + b"k"), True)
    check("get deleted", c.get(pre + b"k"), None)
    check("flush_all (noreply)", c.flush_all(), True)
    check("get flushed", c.get(pre + b"n"), None)  # c: after its own noreply flush
    check("flush_all", q.flush_all(), True)
    c.close()
    q.close()


def python_memcached_run(host, port):
    c = memcache.Client([f"{host}:{port}"])
    pre = "pm-"
    check("set", c.set(pre + "k", "v"), True)
    check("get", c.get(pre + "k"), "v")
    check("add existing", c.add(pre + "k", "x"), False)
    check("add new", c.add(pre + "a", "1"), True)
    check("replace missing", c.replace(pre + "missing", "x"), False)
    check("replace", c.replace(pre + "k", "w"), True)
    check("append", c.append(pre + "k", "x"), True)
    check("prepend", c.prepend(pre + "k", "<"), True)
    check("get after append", c.get(pre + "k"), "<wx")
    c.cache_cas = True
    check("gets", c.gets(pre + "k"), "<wx")
    check("cas", c.cas(pre + "k", "new"), True)
    c2 = memcache.Client([f"{host}:{port}"], cache_cas=True)
    c2.gets(pre + "k")
    c.set(pre + "k", "other")
    check("cas stale", c2.cas(pre + "k", "lost"), False)
    c.set(pre + "n", "10")
    check("incr", c.incr(pre + "n", 5), 15)
    check("decr below 0", c.decr(pre + "n", 100), 0)
    check("incr missing", c.incr(pre + "missing", 1), None)
    check("touch", c.touch(pre + "k", 100), True)
    check("touch missing", c.touch(pre + "missing", 100), False)
    check("delete", c.delete(pre + "a"), True)
    check("get deleted", c.get(pre + "a"), None)
    check("flush_all", c.flush_all(), None)
    check("get flushed", c.get(pre + "k"), None)
    c.disconnect_all()
    c2.disconnect_all()


def pymemcache_stats(host, port):
    # What monitoring agents read through pymemcache's stats(): the fields memcached reports
    # for memory, its limit and evictions, typed as pymemcache types memcached's.
    q = Client((host, port), default_noreply=False)
    st = q.stats()
    for field in (b"bytes", b"limit_maxbytes", b"evictions", b"curr_items", b"total_items",
                  b"curr_connections", b"max_connections", b"get_hits", b"get_misses", b"uptime"):
        if field not in st or not isinstance(st[field], int):
            sys.exit(f"stats(): {field!r} is {st.get(field)!r}")
    if not isinstance(st[b"rusage_user"], float):
        sys.exit(f"stats(): rusage_user is {st[b'rusage_user']!r}")
    settings = q.stats("settings")
    for field in (b"maxbytes", b"maxconns", b"item_size_max"):
        if field not in settings:
            sys.exit(f"stats('settings'): no {field!r}")
    q.close()


if __name__ == "__main__":
    host, port = sys.argv[1], int(sys.argv[2])
    pymemcache_stats(host, port)
    pymemcache_run(host, port)
    python_memcached_run(host, port)
    print("pymemcache and python-memcached: every answer as expected")
