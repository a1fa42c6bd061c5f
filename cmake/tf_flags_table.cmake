# Turns core/src/config/tf_flags.tsv (the one list of tf_cnn_benchmarks' flags and what
# each does here) into the C table config/tf_flags.c reads. Run as
#   cmake -DIN=tf_flags.tsv -DOUT=tf_flags_table.c -P tf_flags_table.cmake
# A malformed row stops the build, naming its line.
cmake_policy(SET CMP0007 NEW) # empty fields (no note, an empty default) are fields
file(STRINGS "${IN}" lines ENCODING UTF-8)
set(body "")
set(count 0)
set(lineno 0)
foreach(line IN LISTS lines)
  math(EXPR lineno "${lineno} + 1")
  if(line MATCHES "^#" OR line STREQUAL "")
    continue()
  endif()
  if(line MATCHES "[;\\\"]")
    message(FATAL_ERROR "${IN}:${lineno}: a semicolon, backslash or double quote (CMake's list "
      "separator and C's escapes): write it another way")
  endif()
  # Empty fields survive: a list from "a\t\tb" keeps its empty element.
  string(REPLACE "\t" ";" fields "${line}")
  list(LENGTH fields n)
  if(NOT n EQUAL 5)
    message(FATAL_ERROR "${IN}:${lineno}: ${n} fields, want 5 (name, type, default, status, note)")
  endif()
  list(GET fields 0 name)
  list(GET fields 1 type)
  list(GET fields 2 default)
  list(GET fields 3 status)
  list(GET fields 4 note)
  if(status STREQUAL "honoured")
    set(code CNNB_TF_HONOURED)
  elseif(status STREQUAL "no-effect")
    set(code CNNB_TF_NO_EFFECT)
  elseif(status STREQUAL "refused")
    set(code CNNB_TF_REFUSED)
  else()
    message(FATAL_ERROR "${IN}:${lineno}: status '${status}' is not honoured, no-effect or refused")
  endif()
  string(APPEND body "    {\"${name}\", \"${type}\", \"${default}\", ${code}, \"${note}\"},\n")
  math(EXPR count "${count} + 1")
endforeach()
set(text "/* Generated from core/src/config/tf_flags.tsv by cmake/tf_flags_table.cmake: edit the TSV. */
#include \"config/tf_flags.h\"

const cnnb_tf_flag cnnb_tf_flags[] = {
${body}};
const size_t cnnb_tf_flags_count = ${count};
")
# Rewritten only when it changes, so a touched TSV with the same rows rebuilds nothing.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL text)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${text}")
