// Facts about this build, for the provenance recorded in model and results files.
#pragma once

namespace structdiff {

// The git commit the library was built from, "-modified" appended when the checkout had
// uncommitted changes to tracked files; "unknown" outside a git checkout.
const char* git_commit();

}  // namespace structdiff
