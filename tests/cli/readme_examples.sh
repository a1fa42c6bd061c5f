#!/usr/bin/env bash
# Every command line the READMEs show is run: README.md, the pages of docs/ (but
# architecture.md, which shows none) and each plugin's README.md (or the files in
# $README_FILES), in that order, in one shared directory: a line may use what an earlier
# line of its page made (a checkpoint, a flagfile). From their fenced code blocks, each
# line that starts with `cnnbench`, `cnnbench-mkrecords`, `cnnbench-tune` or `mpirun`
# (backslash continuations joined, a trailing `# comment` dropped; the "## Set up" block
# is .ci/fresh-debian.sh's) runs with its sizes shrunk by these rules, so the whole set
# takes seconds, not days:
#
#   --batch_size=N         -> 2 (added when absent); --num_batches=N -> 2 (added when absent)
#   --num_epochs=N         -> dropped for --num_batches=2 (an ImageNet epoch is 1.28M images)
#   --num_warmup_batches=0 added; --num_eval_batches=N -> 2 (added to --eval lines)
#   --eval_during_training_every_n_epochs=K -> --eval_during_training_every_n_steps=1
#   --budget=X             -> 60s (cnnbench-tune); --num_shards=N -> 2 (cnnbench-mkrecords)
#   mpirun -np N -H HOSTS  -> mpirun -np 2 on this host, oversubscribed, as root, loopback only
#   an absolute path in a flag (/tmp/.., /data/.., /ckpt/..) -> the same path under the
#                            test's own directory; /data/imagenet and /data/photos/train are
#                            small JPEG folders the test makes, /data/cifar10 CIFAR-10 files;
#                            a path of the repository (bench/..) -> the checkout's
#   --flagfile=FILE        a relative FILE the README does not show is made: --model=trivial
#
# What each line must do: exit 0 — except a line with --device=cuda|gpu on a machine
# without a GPU (exit 2, saying there is no GPU or no cuda device), a line asking for a
# precision the device cannot run here (bf16 on a CPU without AVX-512: exit 2 saying
# so), a line loading a plugin
# file the README only names (`--plugin=./libmy_model.so`: exit 2 naming the file), and a
# line with --target_accuracy (0, or 1 saying the target was not reached: 2 steps rarely
# reach it). A line that does otherwise fails the test, named by file and line. The test
# also runs itself on a planted bad example and checks that it fails, naming the line.
set -uo pipefail
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}"
# About 65 command lines, a few minutes on 2 cores: CI's host stage runs them
# (CNNB_README_EXAMPLES=1 in .ci/run), not every build of the suite.
if [ "${CNNB_README_EXAMPLES:-0}" != 1 ] && [ -z "${README_FILES:-}" ]; then
  echo "SKIP: set CNNB_README_EXAMPLES=1 to run the READMEs' command lines (.ci/run's host stage does)"
  exit 77
fi
bin=$(dirname "$CNNBENCH")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The planted bad example: the same test on a README whose one example cannot run.
if [ -z "${README_FILES:-}" ]; then
  printf '# x\n\n```sh\ncnnbench --model=no_such_model   # planted\n```\n' > "$work/BAD.md"
  README_FILES=$work/BAD.md bash "$0" > "$work/planted.out" 2>&1 < /dev/null
  rc=$?
  if [ "$rc" -eq 0 ] || ! grep -q 'FAIL: .*BAD.md:4: ' "$work/planted.out"; then
    fail "the planted bad example (cnnbench --model=no_such_model) passed or was not named (exit $rc)"
    cat "$work/planted.out"
  fi
  cd "$CNNB_SOURCE_DIR" || exit 1
  files=(README.md)
  for f in docs/*.md; do
    [ "$f" = docs/architecture.md ] || files+=("$f") # how the code fits: no command lines
  done
  files+=(plugins/*/*/README.md)
else
  read -r -a files <<< "$README_FILES"
fi

# commands FILE: "LINE<TAB>COMMAND" for each command line of FILE's code blocks.
commands() {
  awk '
    # The line up to a "#" that starts a comment: after a blank, outside quotes.
    function strip_comment(l,    i, c, q, out) {
      q = ""
      for (i = 1; i <= length(l); i++) {
        c = substr(l, i, 1)
        if (q == "" && (c == "\047" || c == "\"")) q = c
        else if (c == q) q = ""
        else if (q == "" && c == "#" && i > 1 && substr(l, i - 1, 1) ~ /[ \t]/) break
        out = out c
      }
      sub(/[ \t]+$/, "", out)
      return out
    }
    /^## / { setup = ($0 ~ /^## Set up[ \t]*$/) }
    /^[ \t]*```/ { inblock = !inblock; cont = ""; next }
    !inblock || setup { next }
    {
      line = $0
      if (cont == "" && line !~ /^[ \t]*(cnnbench|cnnbench-mkrecords|cnnbench-tune|mpirun)([ \t]|$)/) next
      if (cont == "") start = NR
      line = strip_comment(line)
      if (line ~ /\\[ \t]*$/) { sub(/\\[ \t]*$/, " ", line); cont = cont line; next }
      line = cont line
      sub(/^[ \t]+/, "", line) # a block indented in a list item
      printf "%d\t%s\n", start, line; cont = ""
    }' "$1"
}

# shrink COMMAND: the command with the rules above applied.
shrink() {
  local c=" $1 "
  c=$(sed -E \
    -e 's/ --batch_size=[0-9]+/ --batch_size=2/g' \
    -e 's/ --num_batches=[0-9]+/ --num_batches=2/g' \
    -e 's/ --num_epochs=[0-9.]+/ --num_batches=2/g' \
    -e 's/ --num_eval_batches=[0-9]+/ --num_eval_batches=2/g' \
    -e 's/ --num_warmup_batches=[0-9]+//g' \
    -e 's/ --eval_during_training_every_n_epochs=[0-9.]+/ --eval_during_training_every_n_steps=1/g' \
    -e 's/ --budget=[^ ]+/ --budget=60s/g' \
    -e 's/ --num_shards=[0-9]+/ --num_shards=2/g' \
    -e 's/^ mpirun (-H [^ ]+ )?(-np [0-9]+ )?(-H [^ ]+ )?/ mpirun -np 2 /' \
    -e "s#=/(tmp|data|ckpt)/#=$work/root/\\1/#g" \
    -e "s#=(bench|tests|plugins|docs)/#=$CNNB_SOURCE_DIR/\\1/#g" <<< "$c")
  case "$c" in
    *" cnnbench-mkrecords "* | *" cnnbench-tune "*) ;;
    *" cnnbench "*)
      case "$c" in *" --batch_size="*) ;; *) c="$c --batch_size=2 " ;; esac
      case "$c" in *" --num_batches="*) ;; *) c="$c --num_batches=2 " ;; esac
      case "$c" in *" --eval "* | *" --eval_during"*)
        case "$c" in *" --num_eval_batches="*) ;; *) c="$c --num_eval_batches=2 " ;; esac ;;
      esac
      c="$c --num_warmup_batches=0 " ;;
  esac
  echo "$c"
}

# The data the lines name: small JPEG folders, CIFAR-10 files.
root=$work/root
mkdir -p "$root/tmp" "$root/ckpt" "$root/data"
if [ -n "${MAKE_IMAGE_FOLDER:-}" ]; then
  "$MAKE_IMAGE_FOLDER" "$root/data/imagenet" train 2 4 &&
    "$MAKE_IMAGE_FOLDER" "$root/data/imagenet" validation 2 2 &&
    "$MAKE_IMAGE_FOLDER" "$root/data/photos" train 2 3 || { echo "make_image_folder failed"; exit 1; }
fi
if [ -n "${MAKE_CIFAR:-}" ]; then
  mkdir -p "$root/data/cifar10" && "$MAKE_CIFAR" "$root/data/cifar10" 20 ||
    { echo "make_cifar failed"; exit 1; }
fi

# Wrappers on PATH: the programs of this build; mpirun as the MPI tests run it.
mkdir -p "$work/path"
for p in cnnbench cnnbench-mkrecords cnnbench-tune; do
  [ -x "$bin/$p" ] && ln -s "$bin/$p" "$work/path/$p"
done
real_mpirun=$(command -v mpirun || true)
if [ -n "$real_mpirun" ]; then
  cat > "$work/path/mpirun" << EOF
#!/usr/bin/env bash
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec "$real_mpirun" --oversubscribe --mca btl self,vader,tcp --mca btl_tcp_if_include lo \\
  --mca oob_tcp_if_include lo "\$@"
EOF
  chmod +x "$work/path/mpirun"
fi
gpu=0
command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1 && gpu=1

ran=0
for f in "${files[@]}"; do
  while IFS=$'\t' read -r lineno cmd; do
    where="$f:$lineno"
    run=$(shrink "$cmd")
    prog=$(awk '{ print ($1 == "mpirun") ? "mpirun" : $1 }' <<< "$run")
    if [ ! -e "$work/path/$prog" ]; then
      echo "skip $where: $prog is not built here"
      continue
    fi
    case "$run" in *" --data_dir=$root/data/imagenet"* | *" --input_dir=$root/data/photos"*)
      [ -n "${MAKE_IMAGE_FOLDER:-}" ] || { echo "skip $where: no JPEG component to make its data"; continue; } ;;
    esac
    out=$work/out
    # A --flagfile the README names without showing it: one line of the test's own.
    if [[ "$run" =~ \ --flagfile=([^/ ][^ ]*) ]] && [ ! -e "$work/${BASH_REMATCH[1]}" ]; then
      echo "--model=trivial" > "$work/${BASH_REMATCH[1]}"
    fi
    # stdin from /dev/null: a command must not eat the list of the next ones.
    (cd "$work" && PATH="$work/path:$PATH" timeout -s KILL 600 bash -c "$run") < /dev/null > "$out" 2>&1
    rc=$?
    ran=$((ran + 1))
    expect="exit 0"
    if [[ "$run" =~ \ --device=(cuda|gpu|GPU)\  ]] && [ "$gpu" = 0 ]; then
      expect="the GPU refusal"
      [ "$rc" = 2 ] && grep -qiE 'gpu|cuda' "$out" && continue
    elif [[ "$run" =~ \ (--precision=(bf16|fp16)|--use_fp16)\  ]] && [ "$rc" = 2 ] &&
      grep -q 'cannot run it' "$out"; then
      continue # the device's refusal of a precision this CPU lacks (bf16 needs AVX-512)
    elif [[ "$run" =~ \ --plugin=\./ ]]; then
      expect="the refusal of the missing plugin file"
      file=$(sed -E 's/.* --plugin=(\.\/[^ ]+).*/\1/' <<< "$run")
      [ "$rc" = 2 ] && grep -qF "${file#./}" "$out" && continue
    elif [[ "$run" =~ \ --target_accuracy= ]]; then
      expect="exit 0, or 1 with the target not reached"
      [ "$rc" = 0 ] && continue
      [ "$rc" = 1 ] && grep -qi 'not reach\|best top-1' "$out" && continue
    else
      [ "$rc" = 0 ] && continue
    fi
    fail "$where: \`$cmd\` (run as \`${run# }\`) exited $rc, expected $expect:"
    tail -n 15 "$out" | sed 's/^/    /'
  done < <(commands "$f")
done
echo "ran $ran README command lines from ${#files[@]} files"
[ "$ran" -gt 0 ] || fail "no command line found in ${files[*]}"
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
