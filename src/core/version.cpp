#include "core/version.h"

// TT_GIT_REV is defined for this file only, so a new commit recompiles one file, not the whole library.
namespace tt {
const char* git_revision() { return TT_GIT_REV; }
}  // namespace tt
