# The program cache folder from the command line (tests/adversarial/cache-cli.sh):
# a FIFO in place of the demo's note, `cache warm` with the cache off, a folder
# name too long, /dev/null as the folder.
find_program(CLB_TIMEOUT timeout)
find_program(CLB_MKFIFO mkfifo)
if(CLB_TIMEOUT AND CLB_MKFIFO)
  foreach(case fifo warm-off long devnull)
    add_test(NAME adversarial/cache-cli-${case}
      COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cache-cli.sh ${case} $<TARGET_FILE:clbound_tool>)
    set_tests_properties(adversarial/cache-cli-${case} PROPERTIES LABELS opencl TIMEOUT 700
      ENVIRONMENT "POCL_CACHE_DIR=${PROJECT_BINARY_DIR}/pocl-cache")
  endforeach()
endif()
