#!/usr/bin/env bash
# Every relative link of the documentation resolves: each [text](TARGET) and ![alt](TARGET)
# outside code (fenced blocks and `spans`) of README.md, docs/*.md and the other READMEs
# (bench/, tests/, sdk/examples/, each plugin's), or of the Markdown files named as
# arguments (relative to the checkout's root), names a file or directory of the checkout,
# relative to the page that links it, and an anchor (`#section`, `page.md#section`) names
# a heading of that page, as GitHub makes them (lower case; punctuation but `-` and `_`
# dropped; each blank a `-`; a repeated heading gets `-1`, `-2`, ...) or an
# <a id|name="..."> there. Links with a scheme (https:, mailto:) are not followed.
#   scripts/check-links.sh [FILE.md...]    exit 1 naming FILE:LINE of each broken link
# The ctest docs_links runs it (tests/CMakeLists.txt).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
if [ $# -eq 0 ]; then
  set -- README.md docs/*.md bench/*.md tests/README.md sdk/examples/README.md contrib/*/README.md \
    plugins/*/*/README.md
fi

# anchors FILE: the anchors FILE's headings and <a id|name> tags make, one a line.
anchors() {
  LC_ALL=C awk '
    /^[ \t]*(```|~~~)/ { inblock = !inblock; next }
    inblock { next }
    /^#+[ \t]/ && match($0, /^#+/) && RLENGTH <= 6 {
      h = $0
      sub(/^#+[ \t]+/, "", h); sub(/[ \t]+#+[ \t]*$/, "", h); sub(/[ \t]+$/, "", h)
      # Link text stays, its target goes: [a](b) -> a.
      while (match(h, /\[[^]]*\]\([^)]*\)/)) {
        t = substr(h, RSTART + 1, RLENGTH); sub(/\]\(.*$/, "", t)
        h = substr(h, 1, RSTART - 1) t substr(h, RSTART + RLENGTH)
      }
      h = tolower(h)
      gsub(/[^a-z0-9 _-]/, "", h)
      gsub(/ /, "-", h)
      n = seen[h]++
      print (n ? h "-" n : h)
    }
    {
      l = $0
      while (match(l, /<a [^>]*(id|name)="[^"]*"/)) {
        a = substr(l, RSTART, RLENGTH); sub(/.*(id|name)="/, "", a); sub(/"$/, "", a)
        print a
        l = substr(l, RSTART + RLENGTH)
      }
    }' "$1"
}

# links FILE: "LINE<TAB>TARGET" for each link of FILE outside code.
links() {
  awk '
    /^[ \t]*(```|~~~)/ { inblock = !inblock; next }
    inblock { next }
    {
      l = $0
      gsub(/``[^`]*``/, "", l); gsub(/`[^`]*`/, "", l)
      while (match(l, /\]\([^) \t]+([ \t]+"[^"]*")?\)/)) {
        t = substr(l, RSTART + 2, RLENGTH - 3); sub(/[ \t].*$/, "", t)
        print FNR "\t" t
        l = substr(l, RSTART + RLENGTH)
      }
    }' "$1"
}

bad=0 checked=0
for f in "$@"; do
  [ -f "$f" ] || { echo "$f: no such file"; bad=$((bad + 1)); continue; }
  dir=$(dirname "$f")
  while IFS=$'\t' read -r line target; do
    case "$target" in
      *:*) continue ;; # https:, mailto:, ...
    esac
    checked=$((checked + 1))
    path=${target%%#*}
    anchor=""
    [[ "$target" == *"#"* ]] && anchor=${target#*#}
    if [ -z "$path" ]; then
      file=$f
    elif [[ "$path" == /* ]]; then
      file=$root$path
    else
      file=$dir/$path
    fi
    if [ ! -e "$file" ]; then
      echo "$f:$line: broken link ($target): $path does not exist"
      bad=$((bad + 1))
      continue
    fi
    if [ -n "$anchor" ]; then
      case "$file" in
        *.md)
          if ! anchors "$file" | grep -qxF -- "$anchor"; then
            echo "$f:$line: broken link ($target): no heading in ${file#./} makes #$anchor"
            bad=$((bad + 1))
          fi ;;
      esac
    fi
  done < <(links "$f")
done
if [ "$bad" -gt 0 ]; then
  echo "$bad broken link(s) of $checked in $*"
  exit 1
fi
echo "all $checked relative links resolve in $*"
