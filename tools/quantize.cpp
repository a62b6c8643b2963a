// tensortrace quantize IN.gguf OUT.gguf TYPE [-t T] [--overwrite] [-q]: llama-quantize's file types from an F32,
// F16 or BF16 model, with the same tensor bytes.
#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "core/work_split.h"
#include "quant/mix.h"
#include "quant/quantize_model.h"
#include "tools/command.h"

namespace tt::cli {
namespace {

RegisterCommand reg(
    "quantize", "Quantize an F32/F16/BF16 model as llama-quantize does (same tensor bytes)", 20, [](CLI::App& cmd) {
      auto in = std::make_shared<std::string>();
      auto out = std::make_shared<std::string>();
      auto type = std::make_shared<std::string>();
      auto threads = std::make_shared<int>(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
      auto overwrite = std::make_shared<bool>(false);
      auto quiet = std::make_shared<bool>(false);
      cmd.add_option("input", *in, "Model to quantize (F32, F16 or BF16 tensors)")->required();
      cmd.add_option("output", *out, "GGUF file to write")->required();
      cmd.add_option("type", *type, "File type: " + quant_file_type_names())->required();
      cmd.add_option("-t,--threads", *threads, "Threads (default: all cores)")->check(range<int>(1, kMaxThreads));
      cmd.add_flag("--overwrite", *overwrite, "Replace OUTPUT if it exists");
      cmd.add_flag("-q,--quiet", *quiet, "No progress on stderr");
      return [=]() {
        const QuantFileType* target = find_quant_file_type(*type);
        if (!target) fail("unknown type '{}' (choose one of {})", *type, quant_file_type_names());
        QuantizeOptions options{.threads = *threads, .overwrite = *overwrite, .progress = {}};
        if (!*quiet) {
          options.progress = [](const QuantizeStep& s) {
            const int width = static_cast<int>(fmt::formatted_size("{}", s.count));
            fmt::print(stderr, "[{:>{}}/{}] {:<32} {:>6} -> {:<6} {:>12} -> {:>12} bytes\n", s.index, width, s.count,
                       s.name, type_name(s.from), type_name(s.to), s.bytes_in, s.bytes_out);
          };
        }
        const QuantizeSummary sum = quantize_model(*in, *out, *target, options);
        fmt::print("{}: {} -> {} bytes of tensor data ({:.2f}x) -> {}\n", target->name, sum.bytes_in, sum.bytes_out,
                   sum.bytes_out ? static_cast<double>(sum.bytes_in) / sum.bytes_out : 0.0, *out);
        return 0;
      };
    });

}  // namespace
}  // namespace tt::cli
