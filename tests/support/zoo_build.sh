# zoo_build.sh — sourced by the torchvision_zoo tests: contrib/torchvision_zoo as a third
# party builds it. zoo_build DIR installs this build into DIR/prefix, builds the zoo
# against that install with find_package(CNNBench) alone into DIR/zoo (no include path
# into the source or build tree may appear), and sets:
#   zoo_prefix   the install
#   zoo_dir      the zoo's build directory (its plugins)
#   zoo_models   the model names the zoo's plugins offer (from --list_plugins)
# and defines zoo_cnnbench (the installed cnnbench with the zoo on CNNB_PLUGIN_PATH).
# On failure it prints why, with the failing step's log, and returns 1.
zoo_build() { # DIR
  local dir=$1 log cc
  zoo_prefix="$dir/prefix" zoo_dir="$dir/zoo" log="$dir/zoo_build.log"
  if ! cmake --install "$CNNB_BUILD_DIR" --prefix "$zoo_prefix" >"$log" 2>&1; then
    cat "$log"
    echo "FAIL: cmake --install $CNNB_BUILD_DIR failed"
    return 1
  fi
  cc="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$CNNB_BUILD_DIR/CMakeCache.txt")"
  if ! cmake -S "$CNNB_SOURCE_DIR/contrib/torchvision_zoo" -B "$zoo_dir" \
    -DCMAKE_PREFIX_PATH="$zoo_prefix" -DCMAKE_BUILD_TYPE=Release ${cc:+-DCMAKE_C_COMPILER="$cc"} \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$log" 2>&1 ||
    ! cmake --build "$zoo_dir" -j2 >>"$log" 2>&1; then
    cat "$log"
    echo "FAIL: configuring or building the zoo against $zoo_prefix failed"
    return 1
  fi
  if ! grep -qF -- "$zoo_prefix/include" "$zoo_dir/compile_commands.json"; then
    echo "FAIL: the zoo was not compiled against $zoo_prefix/include"
    return 1
  fi
  if grep -E -- "-(I|isystem) ?($CNNB_SOURCE_DIR|$CNNB_BUILD_DIR)" "$zoo_dir/compile_commands.json"; then
    echo "FAIL: the zoo reached into the source or build tree"
    return 1
  fi
  zoo_models=$(zoo_cnnbench --list_plugins 2>&1 | awk -v dir="$zoo_dir/" '
    $1 == "model" && index($NF, dir) == 1 {
      for (i = 2; i <= NF - 3; i++) { name = $i; sub(/,$/, "", name); print name }
    }')
  if [[ $(wc -w <<<"$zoo_models") -lt 10 ]]; then
    echo "FAIL: the zoo offers too few models: '$zoo_models'"
    return 1
  fi
}

zoo_cnnbench() { CNNB_PLUGIN_PATH="$zoo_dir" "$zoo_prefix/bin/cnnbench" "$@"; }
