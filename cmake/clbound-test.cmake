# clb_add_test(<layer>/<topic> SOURCES ... [LIBS ...] [LABELS ...] [ENV ...] [TIMEOUT s])
# Adds one test executable named test-<layer>-<topic> and a CTest test <layer>/<topic>.
# Every test gets PoCL's kernel cache inside the build tree, so a fresh clone never
# depends on (or corrupts) a cache elsewhere, and CLBOUND_REQUIRE_DEVICE from CI.
# Programs are built optimized at once (CLBOUND_COLD_BUILD=optimized): under the
# default tiered builds a test running a few seconds from an empty cache would
# swap in the store helper's programs at a time of the helper's choosing, and
# the tests count kernels and first launches exactly; cache/tier-up and
# tools/store-helper test the default (fast) themselves.
function(clb_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;ENV" ${ARGN})
  string(REPLACE "/" "-" tgt "test-${name}")
  add_executable(${tgt} ${T_SOURCES})
  target_link_libraries(${tgt} PRIVATE ${T_LIBS})
  target_include_directories(${tgt} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
  set_target_properties(${tgt} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND ${tgt})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  # `gpu`: the device tests of a GPU pass (docs/portability.md, "A GPU pass"):
  # every `opencl` test but those that need valgrind, Oclgrind, Python, MPI or a
  # sanitizer build
  set(gpu_ok FALSE)
  if("opencl" IN_LIST T_LABELS)
    set(gpu_ok TRUE)
  endif()
  foreach(no valgrind oclgrind python mpi)
    if(no IN_LIST T_LABELS)
      set(gpu_ok FALSE)
    endif()
  endforeach()
  if(name MATCHES "-asan$")
    set(gpu_ok FALSE)
  endif()
  if(gpu_ok)
    list(APPEND T_LABELS gpu)
  endif()
  set_tests_properties(${name} PROPERTIES
    LABELS "${T_LABELS}"
    TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "POCL_CACHE_DIR=${PROJECT_BINARY_DIR}/pocl-cache;CLBOUND_CACHE_DIR=${PROJECT_BINARY_DIR}/clbound-cache;CLBOUND_COLD_BUILD=optimized;${T_ENV}")
endfunction()
