"""Bills: a gateway's per-call export (OpenRouter's activity, LiteLLM's spend logs) and the
providers' per-bucket usage and cost reports (Anthropic, OpenAI), with their shared readers."""
