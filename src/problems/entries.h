// The registry's entries, one function per problem file (see gsdm_problems.h).
#pragma once

#include "structdiff/gsdm_problems.h"

namespace structdiff::gsdm::entries {

Problem sudoku();   // sudoku_model.cpp
Problem sorting();  // sorting.cpp
Problem bcmf();     // bcmf.cpp
Problem matrix_inversion();  // matrix_inversion.cpp
Problem boolean_circuit();   // boolean_circuit.cpp

// E (m x n) = A (m x k) R (k x n) with the products C_ijl = A_il R_lj as intermediates (paper
// Fig. 1): edges A_il -> C_ijl <- R_lj, C_ijl -> E_ij; without intermediates A_il -> E_ij <- R_lj.
// R binary (BCMF) or continuous (matrix inversion). Defined in bcmf.cpp.
graph::GraphicalModel product_graph(int64_t m, int64_t n, int64_t k, graph::VariableType r_type,
                                    bool intermediates);

}  // namespace structdiff::gsdm::entries
