# The probe's CPU tests (tests/tools/probe_*_test.cpp), included from tests/tools/CMakeLists.txt.
file(GLOB PIPETTE_PROBE_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/tools/probe_*_test.cpp)
pipette_add_gtest(probe_tests SOURCES ${PIPETTE_PROBE_TESTS} LIBRARIES pipette_probe_lib)

# The GPU check (tests/gpu/run.sh): on a machine without GPUs only its skip path runs, and ctest
# reports it as skipped; on a multi-GPU machine it runs the probe built here.
add_test(NAME probe_gpu_check COMMAND bash ${PROJECT_SOURCE_DIR}/tests/gpu/run.sh)
set_tests_properties(probe_gpu_check PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "skipped: " TIMEOUT 900)
if(TARGET pipette-probe)
  set_tests_properties(probe_gpu_check PROPERTIES ENVIRONMENT "PIPETTE_PROBE=$<TARGET_FILE:pipette-probe>")
endif()
