// The throughput measurement shared by reference.cjs and
// reference_mlc.cjs, so that both references are timed alike.
"use strict";

// benchEncode encodes the whole corpus rounds times with encode, which
// returns a token id list, and reports the throughput as the "bench"
// field of the references' output; null when rounds is not positive.
function benchEncode(corpus, rounds, encode) {
  if (!(rounds > 0)) return null;
  let bytes = 0;
  for (const s of corpus) bytes += Buffer.byteLength(s, "utf8");
  let tokens = 0;
  const start = process.hrtime.bigint();
  for (let r = 0; r < rounds; r++) {
    for (const s of corpus) tokens += encode(s).length;
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return {
    rounds,
    seconds,
    tokens,
    bytes: bytes * rounds,
    tokens_per_second: tokens / seconds,
    mb_per_second: (bytes * rounds) / seconds / 1e6,
  };
}

module.exports = { benchEncode };
