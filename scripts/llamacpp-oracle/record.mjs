// Greedy reference record from llama.cpp itself, in the format of ../shared/reference/greedy/MODEL/greedy.json:
// the prompt's token ids, free-running greedy tokens (argmax of the raw logits, stopping at end-of-generation or
// after N tokens), the first-step logits (a file of n_vocab float32) and the top-5 (id, logit) of every step.
// Like the shared reference: a fresh context of 1024, the whole prompt as one batch, F16 KV cache, flash attention on.
//
//   node record.mjs MODEL.gguf "PROMPT" N OUT_DIR [INDEX] [THREADS]
//
// node-llama-cpp's prebuilt CPU backend picks the best variant for this CPU at run time (see docs/engine.md for
// how its logits relate to ../shared/reference). Writes OUT_DIR/greedy.json and OUT_DIR/promptINDEX.logits.f32,
// each through a temporary name.
import fs from "node:fs";
import path from "node:path";
import {getLlama} from "node-llama-cpp";

const [modelPath, prompt, nArg, outDir, indexArg = "0", threadsArg = "2"] = process.argv.slice(2);
const nPredict = Number(nArg), index = Number(indexArg), threads = Number(threadsArg);
if (!modelPath || prompt === undefined || !Number.isInteger(nPredict) || nPredict < 1 || !outDir ||
    !Number.isInteger(index) || !Number.isInteger(threads) || threads < 1) {
  console.error('usage: node record.mjs MODEL.gguf "PROMPT" N OUT_DIR [INDEX] [THREADS]');
  process.exit(2);
}

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: 1024, threads, flashAttention: true});
const sequence = context.getSequence();

// BOS as the model's metadata says, special-token text not parsed (as the shared reference).
const promptTokens = model.tokenize(prompt.replaceAll("\\n", "\n"), false);
if (model.tokens.bos !== null && model.tokens.shouldPrependBosToken) promptTokens.unshift(model.tokens.bos);
const endTokens = new Set([model.tokens.eos, model.tokens.eot].filter((t) => t !== null && t !== undefined));

const logitsOf = (item) => item.next.logits;  // Map, best first
const wantLogits = (t) => [t, {generateNext: {logits: true}}];

let results = await sequence.controlledEvaluate(
    promptTokens.map((t, i) => (i === promptTokens.length - 1 ? wantLogits(t) : t)));
let logits = logitsOf(results[promptTokens.length - 1]);
const firstLogits = new Float32Array(logits.size);
for (const [id, v] of logits) firstLogits[id] = v;

const greedyTokens = [], top5 = [];
for (let step = 0; step < nPredict; ++step) {
  const best = [...logits.entries()].slice(0, 5);
  top5.push(best.map(([id, v]) => [id, v]));
  const next = best[0][0];
  greedyTokens.push(next);
  if (endTokens.has(next) || step + 1 === nPredict) break;
  results = await sequence.controlledEvaluate([wantLogits(next)]);
  logits = logitsOf(results[0]);
}

const bytes = Buffer.from(model.detokenize(greedyTokens, false), "utf8");
const record = {
  index,
  prompt,
  prompt_tokens: promptTokens,
  greedy_tokens: greedyTokens,
  greedy_text: bytes.toString("utf8"),
  greedy_text_hex: bytes.toString("hex"),
  first_logits: `prompt${index}.logits.f32`,
  top5_per_step: top5,
  producer: `llama.cpp through node-llama-cpp ${JSON.parse(fs.readFileSync(
      new URL("./node_modules/node-llama-cpp/package.json", import.meta.url))).version}, ${threads} threads`,
};

const writeAtomic = (file, data) => {
  fs.writeFileSync(file + ".tmp", data);
  fs.renameSync(file + ".tmp", file);
};
fs.mkdirSync(outDir, {recursive: true});
writeAtomic(path.join(outDir, record.first_logits), Buffer.from(firstLogits.buffer));
writeAtomic(path.join(outDir, "greedy.json"), JSON.stringify([record], null, 1) + "\n");
console.log(`${record.prompt_tokens.length} prompt tokens, ${greedyTokens.length} generated: ${JSON.stringify(record.greedy_text)}`);
process.exit(0);
