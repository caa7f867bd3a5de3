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

  let bench = null;
  const rounds = Number(roundsArg || 0);
  if (rounds > 0) {
    let bytes = 0;
    for (const s of corpus) bytes += Buffer.byteLength(s, "utf8");
    let tokens = 0;
    const start = process.hrtime.bigint();
    for (let r = 0; r < rounds; r++) {
      for (const s of corpus) tokens += tokenizer.encode(s).length;
    }
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    bench = {
      rounds,
      seconds,
      tokens,
      bytes: bytes * rounds,
      tokens_per_second: tokens / seconds,
      mb_per_second: (bytes * rounds) / seconds / 1e6,
    };
  }
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
