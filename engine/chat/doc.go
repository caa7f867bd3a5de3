// Package chat turns OpenAI-style chat messages into the prompt string a
// model was trained on.
//
// A model directory describes its prompt format in one of two ways, and
// [Load] picks the one mlc_llm serve would use:
//
//   - mlc-chat-config.json's conv_template, MLC's own conversation
//     template format; [FromConvTemplate] reproduces MLC's
//     Conversation.as_prompt for text content.
//   - tokenizer_config.json's chat_template, a Jinja template in the
//     Hugging Face convention; [FromJinja] renders it.
//
// [Tiny] is a plain-words template for the built-in tiny test model.
//
// Requests that ask for something a template cannot express (tools on a
// template that never reads them, image parts, a role the template does
// not know) fail with an error that wraps [ErrUnsupported], which a server
// should report as a client error (HTTP 400).
//
// [Completion] turns a chat request into the completion request that
// answers it: the conversation rendered and tokenized, with the template's
// stop strings. The built-in engine serves /v1/chat/completions with it,
// and the router, which drives engines through completions (the
// microserving calls take prompts), renders chats the same way, so that a
// chat answer is the same text from either. [ForModel] finds a model's
// template for both.
//
// It sits with the engines, not the router: a chat template is the
// model's, the format `mlc_llm serve` itself applies to
// /v1/chat/completions.
package chat
