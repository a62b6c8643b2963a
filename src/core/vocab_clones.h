// Loops over a whole vocabulary (50,000+ logits a step) are written with the GCC/Clang vector extension and
// compiled three times: AVX-512, AVX2 with FMA (x86-64-v3) and the baseline, the clone chosen at load time.
#pragma once

#define TT_VOCAB_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
