// Second reference for the conformance test of package tokenizer:
// @mlc-ai/web-tokenizers, MLC's tokenizers-cpp (which wraps the Rust
// Hugging Face tokenizers library) compiled to WebAssembly. Its encode
// is tokenizers-cpp's Encode: no special tokens added.
//
// usage: node reference_mlc.cjs MODULE_DIR TOKENIZER_JSON CORPUS_JSON OUT_JSON [BENCH_ROUNDS [IDS_JSON]]
//
// OUT_JSON receives {"ids": [[...]...], "decoded": [...], "bench": {...},
// "decoded_ids": [...]}, the last the decoding of each id list in
// IDS_JSON (a JSON array of arrays of ids), if given.
"use strict";

const fs = require("fs");
const path = require("path");
const { benchEncode } = require("./bench.cjs");

const [moduleDir, tokenizerPath, corpusPath, outPath, roundsArg, idsPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node reference_mlc.cjs MODULE_DIR TOKENIZER_JSON CORPUS_JSON OUT_JSON [BENCH_ROUNDS]");
  process.exit(2);
}

// The package declares "type": "module" but ships a UMD bundle, which
// Node then refuses to load as CommonJS; evaluate it as CommonJS.
const file = path.join(path.resolve(moduleDir), "lib", "index.js");
const mod = { exports: {} };
new Function("exports", "module", "require", "__filename", "__dirname", fs.readFileSync(file, "utf8"))(
  mod.exports, mod, require, file, path.dirname(file));
const { Tokenizer } = mod.exports;

(async () => {
  const buf = fs.readFileSync(tokenizerPath);
  const tokenizer = await Tokenizer.fromJSON(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
  const corpus = JSON.parse(fs.readFileSync(corpusPath, "utf8"));
  const ids = corpus.map((s) => Array.from(tokenizer.encode(s)));
  const decoded = ids.map((x) => tokenizer.decode(Int32Array.from(x)));

  const bench = benchEncode(corpus, Number(roundsArg || 0), (s) => tokenizer.encode(s));
  let decodedIDs = null;
  if (idsPath) {
    decodedIDs = JSON.parse(fs.readFileSync(idsPath, "utf8")).map((x) => tokenizer.decode(Int32Array.from(x)));
  }
  fs.writeFileSync(outPath, JSON.stringify({ ids, decoded, bench, decoded_ids: decodedIDs }));
  tokenizer.dispose();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
