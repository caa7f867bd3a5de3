package protocol

// Paths of the OpenAI API, as the router serves it to clients and as
// engines (MLC's and the built-in one) serve it to the router.
const (
	PathCompletions     = "/v1/completions"
	PathChatCompletions = "/v1/chat/completions"
	PathModels          = "/v1/models"
	PathEmbeddings      = "/v1/embeddings"
	// PathMessages is Anthropic's Messages API, PathResponses OpenAI's
	// Responses API (its stored responses under PathResponses/{id}).
	PathMessages = "/v1/messages"
	// PathCountTokens is Anthropic's token count of a Messages request.
	PathCountTokens = "/v1/messages/count_tokens"
	PathResponses   = "/v1/responses"
)
