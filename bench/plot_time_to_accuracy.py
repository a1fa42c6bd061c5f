#!/usr/bin/env python3
"""plot_time_to_accuracy.py CURVE.tsv OUT.svg — the batch-size curve of
bench/time_to_accuracy.sh as a standalone SVG (no library, no script in it: any image
viewer or browser shows it).

CURVE.tsv has one line per batch size: batch, learning rate, reached (1/0), seconds (or
"-"), epochs, top-1, training images/sec. Two panels share the batch axis (log 2): the
training's images/sec, rising with the batch; and the wall time to the target with the
epochs it took beside each point, the batches that never reached it drawn as crosses at
the top with their best top-1.
"""
import argparse
import math


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 7:
                continue
            rows.append({"batch": int(p[0]), "lr": p[1], "reached": p[2] == "1",
                         "seconds": float(p[3]) if p[3] != "-" else None,
                         "epochs": p[4], "top1": float(p[5]), "ips": float(p[6])})
    return rows


def nice_max(v):
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def panel(out, x0, y0, w, h, rows, key, ymax, ylabel, title, annotate):
    batches = [r["batch"] for r in rows]
    lo, hi = math.log2(min(batches)), math.log2(max(batches))
    span = hi - lo or 1.0

    def px(b):
        return x0 + (math.log2(b) - lo) / span * w

    def py(v):
        return y0 + h - v / ymax * h

    out.append(f'<text x="{x0 + w / 2}" y="{y0 - 14}" class="title">{title}</text>')
    out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" class="frame"/>')
    for i in range(5):
        v = ymax * i / 4
        y = py(v)
        out.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + w}" y2="{y}" class="grid"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4}" class="ytick">{v:g}</text>')
    for b in batches:
        out.append(f'<text x="{px(b)}" y="{y0 + h + 16}" class="xtick">{b}</text>')
    out.append(f'<text x="{x0 + w / 2}" y="{y0 + h + 34}" class="label">batch size (log scale)</text>')
    out.append(f'<text x="{x0 - 44}" y="{y0 + h / 2}" class="label" '
               f'transform="rotate(-90 {x0 - 44} {y0 + h / 2})">{ylabel}</text>')
    pts = [(px(r["batch"]), py(r[key])) for r in rows if r[key] is not None]
    if len(pts) > 1:
        out.append('<polyline class="line" points="' +
                   " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
    for r in rows:
        x = px(r["batch"])
        if r[key] is None:
            y = y0 + 10
            out.append(f'<path d="M{x - 5},{y - 5} L{x + 5},{y + 5} M{x - 5},{y + 5} L{x + 5},{y - 5}" class="never"/>')
            anchor = "end" if x > x0 + 0.8 * w else "start" if x < x0 + 0.2 * w else "middle"
            out.append(f'<text x="{x}" y="{y + 20}" class="note" text-anchor="{anchor}">'
                       f'never (best {r["top1"]:.3f})</text>')
            continue
        y = py(r[key])
        out.append(f'<circle cx="{x}" cy="{y}" r="4" class="dot"/>')
        if annotate:
            out.append(f'<text x="{x}" y="{y - 9}" class="note">{annotate(r)}</text>')


def main():
    p = argparse.ArgumentParser()
    p.add_argument("curve")
    p.add_argument("svg")
    p.add_argument("--target", default="0.90")
    p.add_argument("--max_epochs", default="")
    p.add_argument("--title", default="")
    a = p.parse_args()
    rows = sorted(read(a.curve), key=lambda r: r["batch"])
    if not rows:
        raise SystemExit(f"plot_time_to_accuracy: no rows in {a.curve}")
    width, height = 980, 430
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           "<style>.frame{fill:none;stroke:#444}.grid{stroke:#ddd}.line{fill:none;stroke:#1f77b4;"
           "stroke-width:2}.dot{fill:#1f77b4}.never{stroke:#d62728;stroke-width:2.5}"
           ".title{text-anchor:middle;font-size:14px;font-weight:bold}.label{text-anchor:middle}"
           ".xtick{text-anchor:middle}.ytick{text-anchor:end}.note{text-anchor:middle;"
           "font-size:11px;fill:#333}</style>",
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" class="title">{a.title}</text>']
    ips_max = nice_max(max(r["ips"] for r in rows) * 1.1)
    panel(out, 80, 70, 360, 280, rows, "ips", ips_max, "training images/sec",
          "Training images/sec by batch", None)
    reached = [r["seconds"] for r in rows if r["seconds"] is not None]
    sec_max = nice_max(max(reached) * 1.25 if reached else 1.0)
    panel(out, 580, 70, 360, 280, rows, "seconds", sec_max, f"seconds to top-1 {a.target}",
          f"Wall time to top-1 {a.target} by batch (epochs beside)",
          lambda r: f'{r["epochs"]} ep')
    note = (f"Each batch: learning rate scaled linearly, warm-up, at most {a.max_epochs} epochs; "
            "a cross: the target was never reached.")
    out.append(f'<text x="{width / 2}" y="{height - 12}" class="label">{note}</text>')
    out.append("</svg>")
    with open(a.svg, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
