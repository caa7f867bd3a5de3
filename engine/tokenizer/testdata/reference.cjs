// Reference encoder for the conformance test and benchmark of package
// tokenizer. It runs @lenml/tokenizers (a dependency-free fork of the
// transformers.js tokenizers) on a JSON corpus written by the Go test.
//
// usage: node reference.cjs MODULE_DIR TOKENIZER_JSON CONFIG_JSON|- CORPUS_JSON OUT_JSON [BENCH_ROUNDS]
//
//   MODULE_DIR      the installed @lenml/tokenizers package directory
//   TOKENIZER_JSON  a tokenizer.json
//   CONFIG_JSON     its tokenizer_config.json, or - for none
//   CORPUS_JSON     a JSON array of strings
//   OUT_JSON        receives {"ids": [[...]...], "ids_special": [[...]...],
//                   "decoded": [...], "bench": {...}}
//   BENCH_ROUNDS    if > 0, encode the whole corpus this many more times
//                   and report the throughput
//
// "ids" uses add_special_tokens=false, "ids_special" true; decoding
// skips nothing and does no clean-up of tokenization spaces, matching
// the Go API.
"use strict";

const fs = require("fs");
const path = require("path");
const { benchEncode } = require("./bench.cjs");

const [moduleDir, tokenizerPath, configPath, corpusPath, outPath, roundsArg] =
  process.argv.slice(2);
if (!outPath) {
  console.error(
    "usage: node reference.cjs MODULE_DIR TOKENIZER_JSON CONFIG_JSON|- CORPUS_JSON OUT_JSON [BENCH_ROUNDS]"
  );
  process.exit(2);
}

const { TokenizerLoader } = require(path.resolve(moduleDir));
const tokenizerJSON = JSON.parse(fs.readFileSync(tokenizerPath, "utf8"));
const tokenizerConfig =
  configPath === "-"
    ? { tokenizer_class: "PreTrainedTokenizerFast" }
    : JSON.parse(fs.readFileSync(configPath, "utf8"));
const tokenizer = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });

const corpus = JSON.parse(fs.readFileSync(corpusPath, "utf8"));
const ids = corpus.map((s) => tokenizer.encode(s, { add_special_tokens: false }));
const idsSpecial = corpus.map((s) => tokenizer.encode(s, { add_special_tokens: true }));
const decoded = ids.map((x) =>
  x.length === 0
    ? ""
    : tokenizer.decode(x, { skip_special_tokens: false, clean_up_tokenization_spaces: false })
);

const bench = benchEncode(corpus, Number(roundsArg || 0), (s) =>
  tokenizer.encode(s, { add_special_tokens: false })
);

fs.writeFileSync(outPath, JSON.stringify({ ids, ids_special: idsSpecial, decoded, bench }));
