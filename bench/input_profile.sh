#!/usr/bin/env bash
# input_profile.sh — where cnnbench's input pipeline spends its time: perf record on
# cnnbench --input_only (one decoder thread, pinned to one core), then the samples summed
# into what the work is: JPEG entropy decoding (baseline and progressive Huffman), IDCT,
# colour conversion and upsampling, the datasource's own resize / distortions / copies,
# memory clearing and copying (libc), and the kernel (page faults, scheduling, locks).
#
# Debian's libjpeg.so.62 is stripped of its static functions, so perf shows most of its
# samples as bare addresses; each libjpeg source file ends with its exported jinit_*
# function, so an address is put in the file of the next exported symbol above it (read
# from nm -D), which is exact for libjpeg-turbo's layout (jdhuff.c's decode_mcu lies before
# jinit_huff_decoder, jdphuff.c's before jinit_phuff_decoder), and the hand-written SIMD
# code lies after the last C file.
#
# Usage: bench/input_profile.sh DATA_DIR [cnnbench flags...]   (env BUILD, CORE=1, OUT)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$REPO/build}
CORE=${CORE:-1}
DATA=${1:?usage: input_profile.sh DATA_DIR [cnnbench flags...]}
shift
OUT=${OUT:-$BUILD/bench-results/input-profile-$(date -u +%Y%m%dT%H%M%S)}
mkdir -p "$OUT"
command -v perf > /dev/null || { echo "input_profile.sh: no perf (apt-get install linux-perf)" >&2; exit 2; }
taskset -c "$CORE" perf record -q -o "$OUT/perf.data" -g -- taskset -c "$CORE" \
  "$BUILD/bin/cnnbench" --input_only --data_name=imagenet --data_dir="$DATA" --batch_size=64 \
  --num_batches=10 --num_warmup_batches=5 --datasets_num_private_threads=1 --device=cpu \
  --model=resnet50 "$@" > "$OUT/cnnbench.log" 2>&1
grep '^total images/sec' "$OUT/cnnbench.log"
perf report -i "$OUT/perf.data" --no-children -g none --sort dso,sym --stdio 2> /dev/null \
  > "$OUT/report.txt"
LIBJPEG=$(ldd "$BUILD/lib/cnnbench/plugins/libcnnb_datasource_imagenet.so" | awk '/libjpeg\.so/ {print $3}')
nm -D --defined-only "$(readlink -f "$LIBJPEG")" | awk '{print $1, $3}' | sort > "$OUT/libjpeg.syms"
python3 - "$OUT/report.txt" "$OUT/libjpeg.syms" <<'EOF' | tee "$OUT/breakdown.md"
import bisect, re, sys
syms = []
for line in open(sys.argv[2]):
    addr, name = line.split()
    if int(addr, 16) > 0:
        syms.append((int(addr, 16), name.split("@")[0]))
syms.sort()
addrs = [a for a, _ in syms]
FILE_OF = {  # the exported function that ends each decoder source file
    "jinit_huff_decoder": "Huffman decoding, baseline (jdhuff.c)",
    "jpeg_fill_bit_buffer": "Huffman decoding, baseline (jdhuff.c)",
    "jpeg_huff_decode": "Huffman decoding, baseline (jdhuff.c)",
    "jinit_phuff_decoder": "Huffman decoding, progressive (jdphuff.c)",
    "jinit_d_coef_controller": "coefficient buffering (jdcoefct.c)",
    "jinit_color_deconverter": "colour conversion, C (jdcolor.c)",
    "jinit_merged_upsampler": "merged upsampling + colour, C (jdmerge.c)",
    "jinit_upsampler": "upsampling, C (jdsample.c)",
    "jinit_inverse_dct": "IDCT set-up (jddctmgr.c)",
    "jpeg_make_d_derived_tbl": "Huffman tables",
}
def libjpeg_class(sym):
    if sym.startswith("jpeg_idct_"):
        return "IDCT, C (scaled NxN: %s)" % ("8x8" if sym in ("jpeg_idct_islow", "jpeg_idct_ifast", "jpeg_idct_float") else "reduced")
    m = re.match(r"0x([0-9a-f]+)$", sym)
    if not m:
        return FILE_OF.get(sym, "libjpeg other (%s)" % sym)
    a = int(m.group(1), 16)
    i = bisect.bisect_right(addrs, a)
    if i >= len(syms) or syms[i][0] > 0x60000 or syms[i][1] in ("jpeg_natural_order",):
        return "libjpeg SIMD (IDCT 8x8/4x4/2x2, colour conversion, upsampling)"
    nxt = syms[i][1]
    if nxt.startswith("jpeg_idct_") or nxt.startswith("jinit_1pass"):
        return "IDCT, C (scaled NxN: reduced)"
    return FILE_OF.get(nxt, "libjpeg other (before %s)" % nxt)
def plugin_class(sym):
    if "resize" in sym: return "cnnbench: resize"
    if "distort" in sym or "hsv" in sym or "contrast" in sym or "saturat" in sym: return "cnnbench: colour distortions"
    return "cnnbench: %s" % sym
totals = {}
for line in open(sys.argv[1]):
    m = re.match(r"\s*([0-9.]+)%\s+(\S+)\s+\[(.)\]\s+(\S+)", line)
    if not m:
        continue
    pct, dso, _, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4)
    if dso.startswith("libjpeg"):
        k = "libjpeg: " + libjpeg_class(sym)
    elif "imagenet" in dso:
        k = plugin_class(sym)
    elif dso.startswith("libc"):
        k = "libc: " + ("memset (clearing)" if "memset" in sym else "memcpy/memmove (copies)" if "mem" in sym else "other (malloc, locks)")
    elif dso.startswith("[kernel"):
        k = "kernel: " + ("page faults / memory" if re.search(r"fault|page|pte|mem|clear|mmap|unmap|folio|lru", sym) else "scheduling, futex, I/O")
    else:
        k = "%s" % dso
    totals[k] = totals.get(k, 0) + pct
print("| where (share of the pipeline core's samples) | % |")
print("|---|---:|")
for k, v in sorted(totals.items(), key=lambda kv: -kv[1]):
    if v >= 0.3:
        print("| %s | %.1f |" % (k, v))
EOF
echo "perf data and report: $OUT"
