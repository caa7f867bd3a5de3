#!/usr/bin/env bash
# Talks to a running router with curl: a completion (with logprobs), a
# streamed completion, a chat completion, the model list and the served
# model. BASE defaults to the main job.
set -euo pipefail
BASE=${BASE:-http://localhost:8000}

echo "# completion"
curl -sf "$BASE/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"the cat sat on the","max_tokens":12,"temperature":0}'
echo
echo "# completion with the logprobs of each token and its 2 most likely alternatives"
curl -sf "$BASE/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"the cat sat on the","max_tokens":4,"temperature":0,"logprobs":2}'
echo
echo "# streamed completion"
curl -sfN "$BASE/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"once upon a time","max_tokens":8,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}'
echo "# chat completion"
curl -sf "$BASE/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"tell me about the river"}],"max_tokens":12,"temperature":0}'
echo
echo "# models"
curl -sf "$BASE/v1/models"
echo
curl -sf "$BASE/v1/models/tiny"
echo
