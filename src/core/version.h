// The tool's version and the git revision it was built from (recorded in run.json).
#pragma once

namespace tt {
const char* git_revision();
}  // namespace tt
