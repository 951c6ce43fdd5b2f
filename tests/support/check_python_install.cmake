# CTest's python_installed: the structdiff package importable by PYTHON must be the one built with
# BINARY (same version line: commit, libtorch, CUDA kernels), else the Python tests would test
# another build. Run as cmake -DPYTHON=... -DBINARY=... -P check_python_install.cmake.
execute_process(COMMAND ${BINARY} --version OUTPUT_VARIABLE built OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${BINARY} --version failed")
endif()
execute_process(COMMAND ${PYTHON} -c "import structdiff; print(structdiff.version()); print(structdiff.__file__)"
                OUTPUT_VARIABLE installed ERROR_VARIABLE error OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${PYTHON} cannot import structdiff: after the build, install it with "
          "`${PYTHON} -m pip install --no-build-isolation --no-deps -C build-dir=build .` from "
          "the checkout (the README's test command does)\\n${error}")
endif()
string(REPLACE "\n" ";" installed "${installed}")
list(GET installed 0 installed_version)
list(GET installed 1 installed_file)
if(NOT installed_version STREQUAL built)
  message(FATAL_ERROR "the installed structdiff (${installed_file}) is '${installed_version}', this "
          "build is '${built}': after the build, reinstall it with `${PYTHON} -m pip install "
          "--no-build-isolation --no-deps -C build-dir=build .` (the README's test command does)")
endif()
message(STATUS "installed structdiff (${installed_file}) is this build: ${built}")
