// llama-bench's prompt-processing measurement through llama.cpp (node-llama-cpp's prebuilt CPU libraries), to set
// beside `tensortrace bench` in one sitting on this noisy machine:
//   node bench.mjs MODEL.gguf [-p 128] [-t 2] [-r 5]
// pp: one batch of p tokens in a fresh context, mean ± standard deviation of tokens/s after one warm-up, in a row
// like `tensortrace bench`'s. Generation is not measured here: each single-token call through node-llama-cpp
// costs about 12 ms of its own (stories260K: 82 t/s against llama-bench's 6100), which would swamp the decode.
import path from "node:path";
import {getLlama} from "node-llama-cpp";

const args = process.argv.slice(2);
const modelPath = args[0];
const opt = (flag, fallback) => {
  const i = args.indexOf(flag);
  return i > 0 ? Number(args[i + 1]) : fallback;
};
const nPrompt = opt("-p", 128), threads = opt("-t", 2), reps = opt("-r", 5);
if (!modelPath || ![nPrompt, threads, reps].every(Number.isInteger) || nPrompt < 1 || threads < 1 || reps < 1) {
  console.error("usage: node bench.mjs MODEL.gguf [-p 128] [-t 2] [-r 5]");
  process.exit(2);
}

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const bos = model.tokens.bos ?? 1;

async function once() {
  const context = await model.createContext({contextSize: nPrompt + 8, threads, batchSize: nPrompt,
                                             flashAttention: true});
  const tokens = Array.from({length: nPrompt}, (_, i) => (i === 0 ? bos : (i * 7919) % model.tokens.count));
  const t0 = process.hrtime.bigint();
  await context.getSequence().controlledEvaluate(tokens);
  const tps = nPrompt / (Number(process.hrtime.bigint() - t0) / 1e9);
  await context.dispose();
  return tps;
}

await once();  // warm-up
const v = [];
for (let r = 0; r < reps; ++r) v.push(await once());
const mean = v.reduce((a, b) => a + b, 0) / v.length;
const sd = Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, v.length - 1));
console.log(`| ${path.basename(modelPath, ".gguf")} | llama.cpp (node-llama-cpp) | ${threads} | pp${nPrompt} | ` +
            `${mean.toFixed(2)} ± ${sd.toFixed(2)} |`);
process.exit(0);
