#!/usr/bin/env python3
"""Hit ratio of BlobCache against libCacheSim's policies, on the very same requests.

Generates the synthetic Zipf traces once with `blobcache-bench trace -save` (oracleGeneral
files), then for every trace and cache size runs libCacheSim's FIFO, LRU, CLOCK, SIEVE, S3-FIFO
and ARC (Python bindings, `pip install libcachesim`) and `blobcache-bench trace` with the same
byte count, and prints one markdown table, then a sanity table of FIFO against BlobCache.

    pip install libcachesim
    cd bench && python3 scripts/libcachesim_compare.py            # the table of BENCHMARKS.md
    python3 scripts/libcachesim_compare.py --quick                # small traces, 10% only
    python3 scripts/libcachesim_compare.py --traces zipf0.8-4k --fractions 0.01
    python3 scripts/libcachesim_compare.py --policies default --memory 0.1   # two tiers, see below

Cache sizes are fractions of the trace's unique bytes as libCacheSim counts them
(TraceReader.get_working_set_size), rounded down to bytes; both sides get that byte count.
Requests of size 0 are skipped by both (libCacheSim's ignore_size_zero_req default, and the
replay). BlobCache runs in a temporary directory under --dir (default /dev/shm when it exists:
the figures are hit ratios and bytes written, not device speed, and tmpfs keeps a case to
seconds).

--memory F adds BlobCache's memory tier (blobcache-bench trace -memory) of F times the cache
size, rounded down to bytes: every BlobCache case runs without the tier and with it, and a
further table sets them beside libCacheSim's FIFO and S3-FIFO at the cache size and at the total
bytes, cache size plus memory. The tier holds copies of values the segments hold, so BlobCache
with it keeps no more objects than without; the policies at the total bytes have that much more
room for distinct objects.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import libcachesim as lcs

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DIR = os.path.dirname(BENCH_DIR)

# name, label, blobcache-bench trace flags (None: a file)
ZIPF = [
    ("zipf0.8-4k", "Zipf 0.8, 4 KiB", ["-zipf", "0.8", "-objects", "500000", "-requests", "2000000", "-size", "4096"]),
    ("zipf1.0-4k", "Zipf 1.0, 4 KiB", ["-zipf", "1.0", "-objects", "500000", "-requests", "2000000", "-size", "4096"]),
    ("zipf0.8-logn", "Zipf 0.8, lognormal 1 KiB–1 MiB",
     ["-zipf", "0.8", "-objects", "30000", "-requests", "200000", "-size-min", "1024", "-size-max", "1048576"]),
    ("zipf1.0-logn", "Zipf 1.0, lognormal 1 KiB–1 MiB",
     ["-zipf", "1.0", "-objects", "30000", "-requests", "200000", "-size-min", "1024", "-size-max", "1048576"]),
]
QUICK = {  # --quick: a tenth of the objects and requests
    "zipf0.8-4k": ["-objects", "50000", "-requests", "200000"],
    "zipf1.0-4k": ["-objects", "50000", "-requests", "200000"],
    "zipf0.8-logn": ["-objects", "3000", "-requests", "20000"],
    "zipf1.0-logn": ["-objects", "3000", "-requests", "20000"],
}
CLOUDPHYSICS = "/work/shared/traces/cloudPhysicsIO.oracleGeneral.bin"

ALGOS = [("FIFO", lcs.FIFO), ("LRU", lcs.LRU), ("CLOCK", lcs.Clock), ("SIEVE", lcs.Sieve),
         ("S3-FIFO", lcs.S3FIFO), ("ARC", lcs.ARC)]

# What runs at the total bytes (cache plus memory) with --memory.
TOTAL_ALGOS = [("FIFO", lcs.FIFO), ("S3-FIFO", lcs.S3FIFO)]

# Bytes a record costs BlobCache beyond its value: a 64-byte header, the 8-byte key and a
# 20-byte footer entry (internal/record, internal/segment).
RECORD_OVERHEAD = 64 + 8 + 20


def reader(path):
    return lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE)


def libcachesim_miss(path, algo, size):
    """Object and byte miss ratios of one policy with a cache of size bytes."""
    cache = algo(cache_size=size)
    return cache.process_trace(reader(path))


def blobcache(bench, path, size, segments, workdir, policies="default", memory=0):
    """BlobCache's runs of one cache size, one per policy (blobcache-bench trace -policy); with
    memory (bytes), each policy twice: without the memory tier, then with one of memory bytes."""
    out = os.path.join(workdir, "bc.json")
    cmd = [bench, "trace", "-oracle", path, "-cache", str(size), "-segments", str(segments), "-json", out,
           "-policy", policies]
    if memory:
        cmd += ["-memory", f"0,{memory}"]
    if ARGS.dir:
        cmd += ["-dir", ARGS.dir]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)["runs"]


def median_runs(repeats):
    """Per policy, the run of median miss ratio among repeated runs (BlobCache's background
    reinsertion makes runs differ a little), with the spread of the miss ratio."""
    out = []
    for runs in zip(*repeats):
        ordered = sorted(runs, key=lambda r: r["miss_ratio"])
        mid = dict(ordered[len(ordered) // 2])
        mid["miss_spread"] = (ordered[0]["miss_ratio"], ordered[-1]["miss_ratio"])
        out.append(mid)
    return out


def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", help="blobcache-bench binary (default: go build it)")
    p.add_argument("--traces", default="zipf0.8-4k,zipf1.0-4k,zipf0.8-logn,zipf1.0-logn,cloudPhysicsIO")
    p.add_argument("--fractions", help="cache sizes, fractions of unique bytes (default 0.01,0.1; --quick: 0.1,"
                   " since 1%% of its traces is below BlobCache's least cache, two segments of 1.07 MiB)")
    p.add_argument("--segments", type=int, default=32, help="BlobCache segments per cache (-segments; 32: what the library derives from MaxSize)")
    p.add_argument("--seed", default="1")
    p.add_argument("--quick", action="store_true", help="a tenth of the synthetic traces")
    p.add_argument("--keep", action="store_true", help="keep the generated traces (their directory is printed)")
    p.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else "",
                   help="parent of BlobCache's temporary directories")
    p.add_argument("--policies", default="fifo,reinsert,fifo+second,reinsert+second,default",
                   help="BlobCache policies (blobcache-bench trace -policy), one column each")
    p.add_argument("--no-sanity", action="store_true", help="skip the FIFO sanity table")
    p.add_argument("--repeat", type=int, default=1,
                   help="BlobCache runs per case; the tables show the run of median miss ratio")
    p.add_argument("--memory", type=float, default=0,
                   help="BlobCache's memory tier, a fraction of the cache size (e.g. 0.1): each case runs without"
                   " and with it, and libCacheSim's FIFO and S3-FIFO run at the cache size plus the tier's too")
    ARGS = p.parse_args()
    if not ARGS.fractions:
        ARGS.fractions = "0.1" if ARGS.quick else "0.01,0.1"

    work = tempfile.mkdtemp(prefix="libcachesim-compare-")
    try:
        run(work)
    finally:
        if ARGS.keep:
            print(f"traces kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def run(work):
    bench = ARGS.bench
    if not bench:
        bench = os.path.join(work, "blobcache-bench")
        subprocess.run(["go", "build", "-o", bench, "./cmd/blobcache-bench"], cwd=BENCH_DIR, check=True)

    traces = []
    wanted = ARGS.traces.split(",")
    for name, label, flags in ZIPF:
        if name not in wanted:
            continue
        path = os.path.join(work, name + ".oracleGeneral.bin")
        flags = flags + (QUICK[name] if ARGS.quick else []) + ["-seed", ARGS.seed]
        subprocess.run([bench, "trace"] + flags + ["-save", path, "-cache", ""], check=True, stdout=subprocess.DEVNULL)
        traces.append((label, path))
    if "cloudPhysicsIO" in wanted:
        traces.append(("cloudPhysicsIO", CLOUDPHYSICS))

    rows, sanity, tiers = [], [], []
    for label, path in traces:
        n_obj, wss = reader(path).get_working_set_size()
        mean = wss / n_obj
        for frac in [float(f) for f in ARGS.fractions.split(",")]:
            size = int(frac * wss)
            memory = int(ARGS.memory * size)
            miss = {name: libcachesim_miss(path, algo, size)[0] for name, algo in ALGOS}
            runs = median_runs([blobcache(bench, path, size, ARGS.segments, work, ARGS.policies, memory)
                                for _ in range(ARGS.repeat)])
            rows.append((label, frac, size, miss, runs))
            if memory:
                total = {name: libcachesim_miss(path, algo, size + memory)[0] for name, algo in TOTAL_ALGOS}
                tiers.append((label, frac, size, memory, miss, total, runs))
            bc = next((r for r in runs if r["policy"] == "fifo" and "memory" not in r), runs[0])
            if not ARGS.no_sanity:
                # FIFO with the bytes BlobCache holds on average: half a segment less
                # (whole-segment eviction, the active segment counted full) and its per-record
                # overhead.
                eff = int((size - bc["segment_size"] / 2) * mean / (mean + RECORD_OVERHEAD))
                sanity.append((label, frac, size, bc, miss["FIFO"], libcachesim_miss(path, lcs.FIFO, eff)[0], eff))
            print(f"done: {label} {frac}", file=sys.stderr)

    names = [n for n, _ in ALGOS]
    pols = ARGS.policies.split(",")
    if ARGS.memory:  # each policy without the tier, then with it, as blobcache() returns them
        pols = [q for p in pols for q in (p, p + " + memory")]
    print("Object miss ratio (libCacheSim's policies, then BlobCache's" +
          (f", the median of {ARGS.repeat} runs, with the range" if ARGS.repeat > 1 else "") + "):")
    print()
    print("| trace | cache | " + " | ".join(names) + " | " + " | ".join(f"BC {p}" for p in pols) + " |")
    print("|---|---|" + "--:|" * (len(names) + len(pols)))
    for label, frac, size, miss, runs in rows:
        cells = " | ".join(f"{miss[n]:.4f}" for n in names)
        bcs = " | ".join(f"{r['miss_ratio']:.4f}" + (f" ({r['miss_spread'][0]:.4f}-{r['miss_spread'][1]:.4f})"
                                                      if ARGS.repeat > 1 else "") for r in runs)
        print(f"| {label} | {frac:g} ({human(size)}) | {cells} | {bcs} |")
    print()
    print("BlobCache's bytes written per byte requested (reinsertions and tombstones included), its "
          "byte miss ratio, and what it held once full (Stats.DataBytes / MaxSize, mean of samples every "
          "1,024 requests after the first eviction):")
    print()
    print("| trace | cache | segments | " + " | ".join(f"{p} written" for p in pols) + " | " +
          " | ".join(f"{p} byte miss" for p in pols) + " | " + " | ".join(f"{p} held" for p in pols) + " |")
    print("|---|---|--:|" + "--:|" * (3 * len(pols)))
    for label, frac, size, miss, runs in rows:
        w = " | ".join(f"{r['write_amp']:.3f}" for r in runs)
        b = " | ".join(f"{r['byte_miss_ratio']:.4f}" for r in runs)
        h = " | ".join(f"{r.get('held_mean', 0):.3f}" for r in runs)
        segs = f"{size // runs[0]['segment_size']} x {human(runs[0]['segment_size'])}"
        print(f"| {label} | {frac:g} ({human(size)}) | {segs} | {w} | {b} | {h} |")
    print()
    if tiers:
        print_tiers(tiers)
    if ARGS.no_sanity:
        return
    print("Sanity: FIFO against BlobCache (FIFO by segment). \"FIFO, held bytes\" is libCacheSim's FIFO with "
          "the bytes BlobCache holds on average: MaxSize less half a segment, less 92 bytes a record.")
    print()
    print("| trace | cache | segments x size | FIFO | FIFO, held bytes | BlobCache |")
    print("|---|---|--:|--:|--:|--:|")
    for label, frac, size, bc, fifo, fifo_eff, eff in sanity:
        print(f"| {label} | {frac:g} ({human(size)}) | {size // bc['segment_size']} x {human(bc['segment_size'])} | "
              f"{fifo:.4f} | {fifo_eff:.4f} ({human(eff)}) | {bc['miss_ratio']:.4f} |")


def print_tiers(tiers):
    """The two-tier table: BlobCache without and with the memory tier, libCacheSim's FIFO and
    S3-FIFO at the cache size and at the total bytes (cache plus memory)."""
    spread = ARGS.repeat > 1
    print(f"Two tiers: BlobCache without and with a memory tier of {ARGS.memory:g} times the cache size, "
          "libCacheSim's FIFO and S3-FIFO at the cache size (disk) and at the cache size plus the memory "
          "(total). Object miss ratio" + (f", BlobCache's the median of {ARGS.repeat} runs with the range" if spread
                                        else "") + "; the share of BlobCache's hits served from memory, the "
          "tier's inserts and evictions, and bytes written per byte requested without and with the tier:")
    print()
    cols = ["FIFO disk", "FIFO total", "S3-FIFO disk", "S3-FIFO total"]
    print("| trace | cache (disk) | memory | policy | " + " | ".join(cols) +
          " | BC | BC + memory | memory hits / hits | memory inserts | memory evictions | written | written + memory |")
    print("|---|---|--:|---|" + "--:|" * (len(cols) + 7))
    for label, frac, size, memory, miss, total, runs in tiers:
        for off, on in zip(runs[0::2], runs[1::2]):
            m = on["memory"]

            def ratio(r):
                return f"{r['miss_ratio']:.4f}" + (f" ({r['miss_spread'][0]:.4f}-{r['miss_spread'][1]:.4f})"
                                                   if spread else "")
            print(f"| {label} | {frac:g} ({human(size)}) | {human(memory)} | {on['policy']} | "
                  f"{miss['FIFO']:.4f} | {total['FIFO']:.4f} | {miss['S3-FIFO']:.4f} | {total['S3-FIFO']:.4f} | "
                  f"{ratio(off)} | {ratio(on)} | {on['memory_hit_share']:.3f} | {m['inserts']} | {m['evictions']} | "
                  f"{off['write_amp']:.3f} | {on['write_amp']:.3f} |")
    print()


if __name__ == "__main__":
    main()
