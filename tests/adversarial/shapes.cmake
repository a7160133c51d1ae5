# `clbound shapes` on bad and extreme logs (issue 16, class 3): each case runs
# the tool on a file made at test time and checks the exit code and message.
# name | kind | content (\n: newline, %S: ';') | extra args (','-separated) |
# exit code | expected text
set(CLB_ADV_SHAPES_CASES
  "huge-dims|text|4611686018427387904\\n4611686018427387905\\n9223372036854775807\\n5\\n||0|powers of two {8, 16"
  "huge-dims-bound|text|4611686018427387905\\n9223372036854775807\\n||0|one bound 9223372036854775807: 33% padding"
  "digits-20|text|5\\n12345678901234567890\\n||1|line 2, column 1: size 12345678901234567890 is over 9223372036854775807"
  "digits-19-over|text|x=3x9223372036854775808\\n||1|line 1, column 5: size 9223372036854775808 is over"
  "negative|text|5,2\\n5,-2\\n||1|line 2, column 3: '-': a size is a whole number from 0 to 9223372036854775807"
  "garbage|text|x=5%Sy=abc\\n||1|line 1, column 7: 'a' where a size was expected"
  "float|text|1.5\\n||1|line 1, column 2: '.' where a size was expected"
  "exponent|text|1e5\\n||1|line 1, column 2: 'e' where a size was expected"
  "rank-9|text|1x2x3x4x5x6x7x8x9\\n||1|line 1, column 17: more than 8 dims"
  "inputs-17|text|1%S2%S3%S4%S5%S6%S7%S8%S9%S10%S11%S12%S13%S14%S15%S16%S17\\n||1|line 1, column 40: more than 16 inputs"
  "rank-changes|text|5,2\\n5\\n||1|line 2, column 1: input input0 has rank 1, earlier lines rank 2"
  "inputs-change|text|x=1%Sy=2\\nx=1\\n||1|line 2, column 3: 1 inputs, earlier lines 2"
  "long-name|text|abcdefghijabcdefghijabcdefghijabcdefghijabcdefghij=5\\n||1|line 1, column 1: an input name longer than 47 characters"
  "long-line|long|||0|2 runs, 2 unique shapes"
  "empty|text|||1|holds no shapes"
  "only-comments|text|# data-dependent: count of nonzero #1\\n\\n||1|holds no shapes"
  "binary|binary|||1|line 1, column 1: byte 0x01 where a size was expected"
  "missing|none|||1|cannot open"
  "directory|dir|||1|Is a directory"
  "buckets-text|text|5\\n|--buckets,abc|2|--buckets takes a whole number from 1 to 64, not \"abc\""
  "buckets-exp|text|5\\n|--buckets,1e3|2|--buckets takes a whole number from 1 to 64, not \"1e3\""
  "buckets-zero|text|5\\n|--buckets,0|2|--buckets takes a whole number from 1 to 64"
  "buckets-big|text|5\\n|--buckets,4294967297|2|--buckets takes a whole number from 1 to 64"
  "buckets-missing|text|5\\n|--buckets|2|--buckets needs a value"
  "unknown-option|text|5\\n|--bucket,3|2|unknown option --bucket"
)
foreach(case ${CLB_ADV_SHAPES_CASES})
  string(REPLACE "|" ";" f "${case}")
  list(GET f 0 name)
  list(GET f 1 kind)
  list(GET f 2 content)
  list(GET f 3 args)
  list(GET f 4 rc)
  list(GET f 5 expect)
  add_test(NAME adversarial/shapes-${name}
    COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:clbound_tool> -DWORK=${CMAKE_CURRENT_BINARY_DIR}/shapes-${name}.input
            -DKIND=${kind} "-DCONTENT=${content}" "-DARGS=${args}" -DRC=${rc} "-DEXPECT=${expect}"
            -P ${CMAKE_CURRENT_SOURCE_DIR}/shapes-run.cmake.in)
  set_tests_properties(adversarial/shapes-${name} PROPERTIES LABELS host TIMEOUT 120)
endforeach()
