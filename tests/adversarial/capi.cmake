# tests/adversarial/capi.cmake: the C API under abuse: contexts from many threads
# at once, forged and odd program cache entries, argument edges, failed outputs.
find_package(Threads REQUIRED)
clb_add_test(adversarial/threads SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-threads.c
  LIBS clbound Threads::Threads LABELS opencl TIMEOUT 900)
set_tests_properties(adversarial/threads PROPERTIES SKIP_RETURN_CODE 77)
clb_add_test(adversarial/cache SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-cache-forgery.c
  LIBS clbound m LABELS opencl TIMEOUT 900)
set_tests_properties(adversarial/cache PROPERTIES SKIP_RETURN_CODE 77)
