# tests/adversarial/capi.cmake: the C API under abuse: contexts from many threads
# at once (storing programs while others run them), forged and odd program
# cache entries, argument edges, failed outputs.
find_package(Threads REQUIRED)
clb_add_test(adversarial/threads SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-threads.c
  LIBS clbound Threads::Threads LABELS opencl TIMEOUT 900)
set_tests_properties(adversarial/threads PROPERTIES SKIP_RETURN_CODE 77)
clb_add_test(adversarial/cache SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-cache-forgery.c
  LIBS clbound m LABELS opencl TIMEOUT 900)
set_tests_properties(adversarial/cache PROPERTIES SKIP_RETURN_CODE 77)
clb_add_test(adversarial/failed-outputs SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-failed-outputs.c
  LIBS clbound m LABELS opencl)
set_tests_properties(adversarial/failed-outputs PROPERTIES SKIP_RETURN_CODE 77)
clb_add_test(adversarial/api-edges SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-api-edges.c
  LIBS clbound m LABELS opencl)
set_tests_properties(adversarial/api-edges PROPERTIES SKIP_RETURN_CODE 77)
clb_add_test(adversarial/shape-log SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-shape-log.c
  LIBS clbound m LABELS opencl)
set_tests_properties(adversarial/shape-log PROPERTIES SKIP_RETURN_CODE 77)

# Under valgrind: nothing read or written out of bounds, on the host or by PoCL's
# kernels, when the failed-output marks and the argument checks run. The plain
# test runs first (a fixture), so programs come from the disk cache instead of
# being compiled under valgrind. (adversarial/cache rebuilds programs on purpose
# and adversarial/threads makes 160 contexts: too slow under valgrind.)
find_program(CLB_VALGRIND valgrind)
if(CLB_VALGRIND)
  foreach(topic failed-outputs api-edges)
    add_test(NAME adversarial/${topic}-valgrind
      COMMAND ${CLB_VALGRIND} --error-exitcode=1 --suppressions=${PROJECT_SOURCE_DIR}/tests/valgrind/pocl.supp
              $<TARGET_FILE:test-adversarial-${topic}>)
    set_tests_properties(adversarial/${topic} PROPERTIES FIXTURES_SETUP adversarial-${topic}-programs)
    set_tests_properties(adversarial/${topic}-valgrind PROPERTIES
      LABELS "opencl;valgrind" TIMEOUT 900 SKIP_RETURN_CODE 77 FIXTURES_REQUIRED adversarial-${topic}-programs
      ENVIRONMENT "POCL_CACHE_DIR=${PROJECT_BINARY_DIR}/pocl-cache;CLBOUND_CACHE_DIR=${PROJECT_BINARY_DIR}/clbound-cache")
  endforeach()
endif()
# The program store beside kernels launched in other threads (issue 34): fresh
# processes, each with fresh cache folders and the default store mode.
clb_add_test(adversarial/store-threads SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-store-threads.c
  LIBS clbound Threads::Threads LABELS opencl TIMEOUT 900)
set_tests_properties(adversarial/store-threads PROPERTIES SKIP_RETURN_CODE 77)
