#!/usr/bin/env bash
# photo_corpus.sh OUT — builds the input-pipeline benchmark's corpus of real photographs:
# OUT/train/<class>/*.jpg in torchvision's ImageFolder layout, 320 files in 10 classes.
#
# Why these files: the issue asks for real photographs of mixed sizes, ImageNet-like
# (~500x375) up to several megapixels, and this machine reaches only Debian and PyPI.
# So the photographs come from Debian wallpaper packages (the ones that are photos, picked
# by eye; abstract and rendered wallpapers are left out) and from the sample photos that
# scikit-learn and scikit-image ship. The corpus holds
#   - the 32 source photos themselves ("originals": 24 wallpapers of 1.3 to 20 megapixels,
#     byte for byte as packaged — progressive and baseline, some with EXIF — plus 8 small
#     sample photos, PNGs re-encoded as JPEG), and
#   - 288 ImageNet-like images cut from them: a random crop (10-100% of the area) in the
#     shape of an ImageNet-typical size (mostly 500x375 / 375x500, some 500x333, 500x500,
#     and some with a shorter side of 200-800), resized with Lanczos and saved as baseline
#     JPEG quality 90 (Pillow's default 4:2:0 subsampling), as ImageNet's files are.
# 320 = 5 batches of 64, so a benchmark timing whole batches times whole epochs.
# ORIGINALS=0 leaves the originals out and cuts 10 ImageNet-like images from each source
# instead (still 320 files): a corpus with ImageNet's own size mix, without the large
# photographs that dominate the mixed one's pixel count.
#
# Deterministic: a fixed seed, the same Debian package versions (bookworm) and the same
# Pillow give the same bytes; OUT/MANIFEST lists every file's size, dimensions and sha256.
#
# Needs: apt-get (to download the .deb files; nothing is installed), and a Python with
# Pillow, scikit-learn and scikit-image (PYTHON, default /work/anchors/bin/python:
# `pip install pillow scikit-learn scikit-image`). DEB_CACHE (default OUT/../debs) keeps
# the downloaded packages.
set -euo pipefail

OUT=${1:?usage: photo_corpus.sh OUT}
PYTHON=${PYTHON:-/work/anchors/bin/python}
SEED=${SEED:-10}
ORIGINALS=${ORIGINALS:-1}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DEB_CACHE=${DEB_CACHE:-$(dirname "$OUT")/debs}
mkdir -p "$DEB_CACHE"

# The packages and, in each, the wallpapers that are photographs.
PACKAGES="lomiri-wallpapers-16.04 lomiri-wallpapers-20.04 mate-backgrounds"
PHOTOS="
usr/share/backgrounds/Bridge_by_Sander_Klootwijk.jpg
usr/share/backgrounds/Dragonfly_by_Bolly.jpg
usr/share/backgrounds/Kleiber_by_Lukas_Baubkus.jpg
usr/share/backgrounds/Picture_0B_by_freespace.jpg
usr/share/backgrounds/Picture_1A_by_freespace.jpg
usr/share/backgrounds/Wine_by_Jakkub_Mede.jpg
usr/share/backgrounds/aitzgorri_by_Aitzol_Berasategi.jpg
usr/share/backgrounds/friends_by_Aitzol_Berasategi.jpg
usr/share/backgrounds/life_by_Aitzol_Berasategi.jpg
usr/share/backgrounds/picosdeeuropa_by_Aitzol_Berasategi.jpg
usr/share/backgrounds/seeding_by_Clements_Engelhardt.jpg
usr/share/backgrounds/sunset_by_Aitzol_Berasategi.jpg
usr/share/backgrounds/mate/nature/Aqua.jpg
usr/share/backgrounds/mate/nature/Blinds.jpg
usr/share/backgrounds/mate/nature/Dune.jpg
usr/share/backgrounds/mate/nature/FreshFlower.jpg
usr/share/backgrounds/mate/nature/Garden.jpg
usr/share/backgrounds/mate/nature/GreenMeadow.jpg
usr/share/backgrounds/mate/nature/LadyBird.jpg
usr/share/backgrounds/mate/nature/RainDrops.jpg
usr/share/backgrounds/mate/nature/Storm.jpg
usr/share/backgrounds/mate/nature/TwoWings.jpg
usr/share/backgrounds/mate/nature/Wood.jpg
usr/share/backgrounds/mate/nature/YellowFlower.jpg
"

EXTRACT="$DEB_CACHE/root"
for pkg in $PACKAGES; do
  if ! ls "$DEB_CACHE/${pkg}"_*.deb > /dev/null 2>&1; then
    echo "downloading $pkg"
    (cd "$DEB_CACHE" && apt-get download "$pkg" > /dev/null) ||
      { echo "photo_corpus.sh: apt-get download $pkg failed (run apt-get update first?)" >&2; exit 2; }
  fi
  deb=$(ls "$DEB_CACHE/${pkg}"_*.deb | head -1)
  dpkg -x "$deb" "$EXTRACT"
done
for p in $PHOTOS; do
  [ -f "$EXTRACT/$p" ] || { echo "photo_corpus.sh: $p is not in the packages ($PACKAGES)" >&2; exit 2; }
done

rm -rf "$OUT/train"
# shellcheck disable=SC2086
"$PYTHON" - "$OUT" "$SEED" "$ORIGINALS" $(for p in $PHOTOS; do echo "$EXTRACT/$p"; done) <<'EOF'
import hashlib, io, os, random, shutil, sys
from PIL import Image
import sklearn.datasets, skimage

out, seed, originals, wallpapers = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4:]
sk = os.path.join(os.path.dirname(sklearn.datasets.__file__), "images")
ski = os.path.join(os.path.dirname(skimage.__file__), "data")
samples = [os.path.join(sk, "china.jpg"), os.path.join(sk, "flower.jpg")] + [
    os.path.join(ski, n) for n in ("astronaut.png", "chelsea.png", "coffee.png",
                                   "rocket.jpg", "motorcycle_left.png",
                                   "hubble_deep_field.jpg")]
sources = wallpapers + samples
assert len(sources) == 32, len(sources)
NCLASS = 10
NDERIVED = 288 if originals else 320
rng = random.Random(seed)

def save_jpeg(img, path):
    img.convert("RGB").save(path, "JPEG", quality=90, progressive=False, optimize=False)

# ImageNet-typical shapes (width, height); orientation follows the source's.
def target_shape():
    r = rng.random()
    if r < 0.60: long_, short = 500, 375
    elif r < 0.75: long_, short = 500, 333
    elif r < 0.85: long_, short = 500, 500
    else:
        short = rng.randint(200, 800)
        long_ = int(round(short * rng.uniform(4 / 3, 16 / 9)))
    return long_, short

classes = ["class%02d" % k for k in range(NCLASS)]
for c in classes:
    os.makedirs(os.path.join(out, "train", c))

per_source = [NDERIVED // len(sources)] * len(sources)  # 9 each
for i, src in enumerate(sources):
    cls = classes[i % NCLASS]
    base = os.path.splitext(os.path.basename(src))[0]
    dst = os.path.join(out, "train", cls, "orig_%s.jpg" % base)
    if not originals:
        pass
    elif src.endswith(".jpg"):
        shutil.copyfile(src, dst)  # byte for byte: progressive, EXIF and all
    else:
        save_jpeg(Image.open(src), dst)
    img = Image.open(src)
    img.load()
    img = img.convert("RGB")
    W, H = img.size
    for j in range(per_source[i]):
        long_, short = target_shape()
        tw, th = (long_, short) if W >= H else (short, long_)
        if rng.random() < 0.15:  # some the other way round
            tw, th = th, tw
        # A crop with the target's aspect ratio, 10-100% of the largest such crop.
        aspect = tw / th
        cw_max = min(W, H * aspect)
        frac = rng.uniform(0.10, 1.0) ** 0.5
        cw = max(1, int(cw_max * frac)); ch = max(1, int(round(cw / aspect)))
        ch = min(ch, H)
        x = rng.randint(0, W - cw); y = rng.randint(0, H - ch)
        crop = img.crop((x, y, x + cw, y + ch))
        # Never upscale by more than 1.5x: a small crop of a small photo stays smaller.
        scale = min(tw / cw, 1.5 * 1.0)
        size = (max(1, round(cw * scale)), max(1, round(ch * scale)))
        save_jpeg(crop.resize(size, Image.LANCZOS),
                  os.path.join(out, "train", cls, "%s_%02d.jpg" % (base, j)))

# Manifest: size, dimensions, mode and sha256 of every file.
rows = []
for root, _, files in os.walk(os.path.join(out, "train")):
    for f in files:
        p = os.path.join(root, f)
        with open(p, "rb") as fh:
            data = fh.read()
        im = Image.open(io.BytesIO(data))
        prog = "progressive" if im.info.get("progressive") or im.info.get("progression") else "baseline"
        rows.append((os.path.relpath(p, out), len(data), im.size[0], im.size[1], prog,
                     hashlib.sha256(data).hexdigest()))
rows.sort()
with open(os.path.join(out, "MANIFEST"), "w") as fh:
    fh.write("# path bytes width height coding sha256\n")
    for r in rows:
        fh.write("%s %d %d %d %s %s\n" % r)

# The size distribution (bench/README.md records it).
import statistics
mp = [w * h / 1e6 for _, _, w, h, _, _ in rows]
def band(lo, hi): return [m for m in mp if lo <= m < hi]
print("%d files, %.1f MB, %.1f megapixels in all" %
      (len(rows), sum(r[1] for r in rows) / 1e6, sum(mp)))
for lo, hi, name in ((0, 0.1, "< 0.1 MP"), (0.1, 0.3, "0.1-0.3 MP (ImageNet-like)"),
                     (0.3, 1, "0.3-1 MP"), (1, 4, "1-4 MP"), (4, 10, "4-10 MP"),
                     (10, 100, ">= 10 MP")):
    b = band(lo, hi)
    print("  %-28s %4d files, %5.1f%% of the pixels" % (name, len(b), 100 * sum(b) / sum(mp)))
print("  median %.2f MP; %d progressive" % (statistics.median(mp),
                                            sum(1 for r in rows if r[4] == "progressive")))
EOF
echo "corpus: $OUT/train (manifest $OUT/MANIFEST)"
