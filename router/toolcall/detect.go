package toolcall

import "strings"

// Detect names the format of a Jinja chat template from its source, or ""
// when it has no tool-call syntax it recognises. The markers are checked
// in this order, the first found wins:
//
//   - "<tool_call>": hermes (Qwen2.5, Qwen3, Hermes)
//   - "[TOOL_CALLS]": mistral
//   - "[func_name1(": pythonic (Llama 3.2 and 4 pythonic templates spell the
//     call shape out this way)
//   - "<|python_tag|>", or `"parameters"` together with the ipython role:
//     llama3_json (Llama 3.1 and 3.2 JSON tool calling)
//
// Pythonic comes before llama3_json because Llama's pythonic templates also
// speak of the ipython role. "mlc" is never detected: it is MLC-LLM's own
// convention, not a template's.
func Detect(jinjaSource string) string {
	switch s := jinjaSource; {
	case strings.Contains(s, "<tool_call>"):
		return "hermes"
	case strings.Contains(s, mistralTag):
		return "mistral"
	case strings.Contains(s, "[func_name1("):
		return "pythonic"
	case strings.Contains(s, pythonTag),
		strings.Contains(s, `"parameters"`) && strings.Contains(s, "ipython"):
		return "llama3_json"
	}
	return ""
}
