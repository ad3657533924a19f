# The probe's CPU tests (tests/tools/probe_*_test.cpp), included from tests/tools/CMakeLists.txt.
file(GLOB PIPETTE_PROBE_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/tools/probe_*_test.cpp)
pipette_add_gtest(probe_tests SOURCES ${PIPETTE_PROBE_TESTS} LIBRARIES pipette_probe_lib)
