# Writes OUTPUT, a source defining structdiff::git_commit(), with the checkout's commit (suffix
# "-modified" when tracked files differ from it), rewriting it only when that changes so that an
# unchanged commit rebuilds nothing. Run at every build by src/CMakeLists.txt.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE failed ERROR_QUIET)
if(failed)
  set(commit "unknown")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes)
    string(APPEND commit "-modified")
  endif()
endif()
file(WRITE "${OUTPUT}.new"
     "#include \"util/build_info.h\"\n"
     "namespace structdiff {\n"
     "const char* git_commit() { return \"${commit}\"; }\n"
     "}  // namespace structdiff\n")
execute_process(COMMAND "${CMAKE_COMMAND}" -E copy_if_different "${OUTPUT}.new" "${OUTPUT}")
file(REMOVE "${OUTPUT}.new")
