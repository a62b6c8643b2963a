// tensortrace diff RUN_A RUN_B [--json] [--tolerance X]: token differences, the first op whose output differs, MoE
// routing decisions that flip, per-op time and byte differences of two runs.
#include "analysis/diff.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tools/command.h"

namespace tt::cli {
namespace {

RegisterCommand reg(
    "diff", "Compare two runs: tokens, first divergent op, MoE routing flips, per-op time and bytes", 45,
    [](CLI::App& cmd) {
      struct Args {
        std::string a, b;
        bool json = false;
        analysis::DiffOptions opt;
      };
      auto a = std::make_shared<Args>();
      cmd.add_option("run_a", a->a, "First run directory")->required();
      cmd.add_option("run_b", a->b, "Second run directory")->required();
      cmd.add_flag("--json", a->json, "Print the diff as JSON");
      cmd.add_option("--tolerance", a->opt.tolerance,
                     "0 (default): outputs must hash equal; X > 0: min/max/mean may differ by X * max(1, |value|)")
          ->check(range(0.0, 1e6));
      cmd.add_option("--top", a->opt.top, "Ops listed in the time and byte tables")->check(range(1, 100000));
      return [a]() {
        const RunData ra = load_run(a->a);
        const RunData rb = load_run(a->b);
        const nlohmann::json d = analysis::diff_runs(ra, rb, a->opt);
        if (a->json)
          fmt::print("{}\n", d.dump(1));
        else
          fmt::print("{}", analysis::render_diff_text(d));
        return 0;
      };
    });

}  // namespace
}  // namespace tt::cli
