// The registry's entries, one function per problem file (see gsdm_problems.h).
#pragma once

#include "structdiff/gsdm_problems.h"

namespace structdiff::gsdm::entries {

Problem sudoku();   // sudoku_model.cpp
Problem sorting();  // sorting.cpp
Problem bcmf();     // bcmf.cpp

}  // namespace structdiff::gsdm::entries
