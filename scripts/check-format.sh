#!/usr/bin/env bash
# Checks that every tracked C, header, CUDA and C++ file (*.c, *.h, *.cu, *.cpp: the fake
# CUDA's) is formatted as the repository's .clang-format says, and lists the files that
# are not. Exits 0 when all are, 1 otherwise (CI runs it). With --fix it formats those
# files in place (clang-format -i) instead. The style is written for clang-format 14
# (Debian 12's): another version may format a few lines differently, so prefer
# clang-format-14 where it is installed.
# Works from any directory: it runs at the root of the checkout it belongs to.
# Usage: scripts/check-format.sh [--fix]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fix=false
case "${1:-}" in
  "") ;;
  --fix) fix=true ;;
  *) echo "usage: $0 [--fix]" >&2; exit 2 ;;
esac

# clang-format-14 first, then whatever clang-format is on PATH; $CLANG_FORMAT overrides both.
cf=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [[ -z "$cf" ]]; then
  echo "check-format: clang-format not found; install it with: sudo apt-get install clang-format" >&2
  exit 1
fi
if ! "$cf" --version | grep -q 'version 14\.'; then
  echo "check-format: note: $("$cf" --version) is not clang-format 14; results may differ" >&2
fi

# --dry-run --Werror: exit non-zero, and change nothing, when a file would be reformatted.
unformatted=()
while IFS= read -r -d '' f; do
  "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
done < <(git ls-files -z -- '*.c' '*.h' '*.cu' '*.cpp')

if ((${#unformatted[@]} == 0)); then
  echo "check-format: all files are formatted"
  exit 0
fi
if $fix; then
  "$cf" -i -- "${unformatted[@]}"
  echo "check-format: formatted ${#unformatted[@]} file(s):"
  printf '  %s\n' "${unformatted[@]}"
  exit 0
fi
echo "check-format: ${#unformatted[@]} file(s) not formatted:" >&2
printf '  %s\n' "${unformatted[@]}" >&2
echo "fix them with: scripts/check-format.sh --fix  (see the changes with: git diff)" >&2
exit 1
