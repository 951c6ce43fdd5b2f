# libtorch from a Python environment's PyTorch (PyPI's wheel), and the CUDA compiler that matches
# it. Unless Torch_DIR is given, the first of these interpreters whose `import torch` works
# provides libtorch: the one a Python build installs into (`pip install .` sets
# Python_EXECUTABLE), STRUCTDIFF_PYTHON, the repository's .venv (scripts/setup.sh makes it),
# python3 on PATH.
# Sets STRUCTDIFF_PYTHON to that interpreter (it also runs the Python tests).
#
# pip's build isolation puts its own site-packages in front through PYTHONPATH and hides the
# target environment's; the query runs without those variables, so `pip install .` builds against
# the torch the user has, not one pip would download for the build.
function(structdiff_query_torch python result)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH --unset=PYTHONNOUSERSITE --unset=PYTHONHOME
            ${python} -c "import os, torch; print(torch.__version__); print(torch.utils.cmake_prefix_path); print(torch.version.cuda or ''); print(os.path.dirname(os.path.dirname(torch.__file__)))"
    OUTPUT_VARIABLE output RESULT_VARIABLE status ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(status EQUAL 0)
    string(REPLACE "\n" ";" output "${output}")
    set(${result} "${output}" PARENT_SCOPE)
  else()
    set(${result} "" PARENT_SCOPE)
  endif()
endfunction()

set(STRUCTDIFF_PYTHON "" CACHE FILEPATH "Python whose PyTorch provides libtorch and runs the Python tests")
set(torch_python_candidates ${Python_EXECUTABLE} ${STRUCTDIFF_PYTHON}
    ${PROJECT_SOURCE_DIR}/.venv/bin/python)
find_program(path_python3 python3)
list(APPEND torch_python_candidates ${path_python3})
set(torch_query "")
foreach(candidate IN LISTS torch_python_candidates)
  if(candidate AND EXISTS "${candidate}")
    structdiff_query_torch("${candidate}" torch_query)
    if(torch_query)
      set(STRUCTDIFF_PYTHON "${candidate}" CACHE FILEPATH "" FORCE)
      break()
    endif()
  endif()
endforeach()

if(NOT Torch_DIR AND NOT torch_query)
  message(FATAL_ERROR "structdiff needs PyTorch 2 from PyPI: none of ${torch_python_candidates} "
          "imports torch. Run scripts/setup.sh (it makes .venv), or pass "
          "-DSTRUCTDIFF_PYTHON=/path/to/python of an environment with torch.")
endif()

if(torch_query)
  list(GET torch_query 0 torch_python_version)
  list(GET torch_query 1 torch_cmake_prefix)
  list(GET torch_query 2 torch_cuda_version)
  list(GET torch_query 3 torch_site_packages)
  list(PREPEND CMAKE_PREFIX_PATH "${torch_cmake_prefix}")
  message(STATUS "structdiff: torch ${torch_python_version} from ${STRUCTDIFF_PYTHON}")
  # libtorch's CUDA libraries find their NCCL, cuDNN, ... in the nvidia wheels beside torch by
  # RPATH at run time; the linker must look there too, not at an older system copy (ld.so.conf).
  file(GLOB wheel_library_dirs LIST_DIRECTORIES true "${torch_site_packages}/nvidia/*/lib")
  if(wheel_library_dirs)
    string(REPLACE ";" ":" wheel_library_dirs "${wheel_library_dirs}")
    add_link_options("LINKER:-rpath-link,${wheel_library_dirs}")
  endif()

  # A CUDA build of torch: compile the kernels with the nvcc of the same CUDA release. PyPI's
  # `cuda-toolkit[nvcc]` puts it beside torch's own CUDA libraries (nvidia/cu<major>); a system
  # toolkit serves when its release is the same.
  if(torch_cuda_version AND NOT CMAKE_CUDA_COMPILER)
    string(REGEX MATCH "^[0-9]+" cuda_major "${torch_cuda_version}")
    set(wheel_toolkit "${torch_site_packages}/nvidia/cu${cuda_major}")
    find_program(system_nvcc nvcc PATHS /usr/local/cuda/bin NO_CACHE)
    foreach(nvcc IN ITEMS "${wheel_toolkit}/bin/nvcc" "${system_nvcc}")
      if(EXISTS "${nvcc}")
        execute_process(COMMAND "${nvcc}" --version OUTPUT_VARIABLE nvcc_text ERROR_QUIET)
        string(REGEX MATCH "release ([0-9]+\\.[0-9]+)" unused "${nvcc_text}")
        if(CMAKE_MATCH_1 VERSION_EQUAL torch_cuda_version)
          get_filename_component(toolkit "${nvcc}" DIRECTORY)
          get_filename_component(toolkit "${toolkit}" DIRECTORY)
          set(CMAKE_CUDA_COMPILER "${nvcc}" CACHE FILEPATH "nvcc of torch's CUDA release")
          set(CUDA_TOOLKIT_ROOT_DIR "${toolkit}" CACHE PATH "CUDA toolkit of torch's release")
          set(CUDAToolkit_ROOT "${toolkit}")
          break()
        endif()
        message(STATUS "structdiff: ${nvcc} is CUDA ${CMAKE_MATCH_1}, torch was built with ${torch_cuda_version}")
      endif()
    endforeach()
    if(NOT CMAKE_CUDA_COMPILER)
      message(STATUS "structdiff: no nvcc of CUDA ${torch_cuda_version} (torch's release); "
              "pip install 'cuda-toolkit[nvcc]==<torch's cuda-toolkit version>' puts one beside it")
    endif()
  endif()
endif()

# GPU generations to build the CUDA kernels for (no GPU here to detect one): Turing to Blackwell,
# with PTX of the newest for what comes after.
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "7.5;8.0;9.0;10.0;12.0+PTX")
endif()
