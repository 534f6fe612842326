#!/usr/bin/env python3
"""Plot memory_timeline.sh's CSV as an SVG: RSS and Go heap over time, the phases shaded.

Usage: plot_timeline.py IN.csv OUT.svg   (standard library only)
"""
import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
t = [float(r["seconds"]) for r in rows]
series = [
    ("RSS", "rss_bytes", "#1f77b4"),
    ("Go heap in use", "heap_inuse_bytes", "#d62728"),
    ("write buffers", "write_buffer_bytes", "#2ca02c"),
    ("index + bloom filter", None, "#9467bd"),
]
if rows and "memory_tier_bytes" in rows[0] and any(float(r["memory_tier_bytes"] or 0) for r in rows):
    series.append(("memory tier", "memory_tier_bytes", "#ff7f0e"))


def value(r, key):
    if key is None:
        return (float(r["index_bytes"] or 0) + float(r["bloom_bytes"] or 0)) / 2**20
    return float(r[key] or 0) / 2**20


W, H, L, B, T, R = 900, 420, 70, 50, 30, 190
tmax = max(t) or 1
ymax = max(value(r, k) for r in rows for _, k, _ in series) * 1.1 or 1
x = lambda s: L + (W - L - R) * s / tmax
y = lambda mib: H - B - (H - B - T) * mib / ymax
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>']
# Phases as shaded bands.
colors = {"preload": "#f0f0f0", "load": "#fff5e0", "idle": "#e8f4e8"}
start = 0
for i in range(1, len(rows) + 1):
    if i == len(rows) or rows[i]["phase"] != rows[start]["phase"]:
        p, a, b = rows[start]["phase"], t[start], t[i - 1]
        out.append(f'<rect x="{x(a):.1f}" y="{T}" width="{max(x(b) - x(a), 1):.1f}" height="{H - B - T}" fill="{colors.get(p, "#fff")}"/>')
        out.append(f'<text x="{(x(a) + x(b)) / 2:.1f}" y="{T + 14}" text-anchor="middle" fill="#666">{p}</text>')
        start = i
# Axes and ticks.
out.append(f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>')
out.append(f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>')
for k in range(6):
    v = ymax * k / 5
    out.append(f'<text x="{L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.0f}</text>')
    out.append(f'<line x1="{L}" y1="{y(v):.1f}" x2="{W - R}" y2="{y(v):.1f}" stroke="#ddd"/>')
for k in range(7):
    s = tmax * k / 6
    out.append(f'<text x="{x(s):.1f}" y="{H - B + 18}" text-anchor="middle">{s:.0f}</text>')
out.append(f'<text x="{(L + W - R) / 2}" y="{H - 10}" text-anchor="middle">seconds</text>')
out.append(f'<text x="16" y="{(T + H - B) / 2}" transform="rotate(-90 16 {(T + H - B) / 2})" text-anchor="middle">MiB</text>')
for n, (name, key, color) in enumerate(series):
    pts = " ".join(f"{x(s):.1f},{y(value(r, key)):.1f}" for s, r in zip(t, rows))
    out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"/>')
    out.append(f'<line x1="{W - R + 12}" y1="{T + 20 + 18 * n}" x2="{W - R + 32}" y2="{T + 20 + 18 * n}" stroke="{color}" stroke-width="2"/>')
    out.append(f'<text x="{W - R + 38}" y="{T + 24 + 18 * n}">{name}</text>')
out.append("</svg>")
open(sys.argv[2], "w").write("\n".join(out))
