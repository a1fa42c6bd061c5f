#!/usr/bin/env bash
# The table of tf_cnn_benchmarks' flags in docs/flags.md ("tf_cnn_benchmarks' flags"), made
# from core/src/config/tf_flags.tsv (the one place of those facts; the build makes the C
# table from the same file).
#   scripts/tf-flags-readme.sh           print the table
#   scripts/tf-flags-readme.sh --write   replace the table in docs/flags.md
#   scripts/tf-flags-readme.sh --check   exit 1 (and show the difference) when docs/flags.md's
#                                        table is not the TSV's; cli_tf_flags runs this
# The table sits between the lines <!-- tf-flags:begin --> and <!-- tf-flags:end -->;
# README=FILE names another Markdown file to hold it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tsv="$root/core/src/config/tf_flags.tsv"
readme="${README:-$root/docs/flags.md}"

table() {
  echo "| tf_cnn_benchmarks flag | tf's default | here | why, or how it differs |"
  echo "|---|---|---|---|"
  awk -F'\t' '
    /^#/ || NF == 0 { next }
    NF != 5 { printf "%s:%d: %d fields, want 5\n", FILENAME, FNR, NF > "/dev/stderr"; bad = 1; exit 1 }
    {
      def = $3 == "" ? "\x27\x27" : $3
      note = $5; gsub(/\|/, "\\|", note) # a | inside a cell ends it
      printf "| `--%s` | `%s` | %s | %s |\n", $1, def, $4, note
    }
    END { if (bad) exit 1 }' "$tsv"
}

block() { # the page's table, markers excluded
  awk '/^<!-- tf-flags:end -->$/ { on = 0 } on { print } /^<!-- tf-flags:begin -->$/ { on = 1 }' "$readme"
}

case "${1:-}" in
  "") table ;;
  --check)
    grep -qx '<!-- tf-flags:begin -->' "$readme" || { echo "$readme: no <!-- tf-flags:begin --> line"; exit 1; }
    if ! diff <(table) <(block) >/dev/null; then
      echo "$readme: the tf_cnn_benchmarks flag table differs from $tsv (run $0 --write):"
      diff <(table) <(block) | head -20
      exit 1
    fi ;;
  --write)
    new=$(mktemp); trap 'rm -f "$new"' EXIT
    awk -v table="$(table)" '
      /^<!-- tf-flags:begin -->$/ { print; print table; skip = 1; next }
      /^<!-- tf-flags:end -->$/ { skip = 0 }
      !skip { print }' "$readme" >"$new"
    cat "$new" >"$readme" ;;
  *) echo "usage: $0 [--check|--write]" >&2; exit 2 ;;
esac
