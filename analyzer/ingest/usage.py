"""A provider's ``usage`` object as the store's token columns: one mapping for every format.

Three shapes are in the logs this project reads, told apart by their keys:

* **OpenAI chat completions** (``prompt_tokens``, ``completion_tokens``): the prompt is the
  whole prompt, its cached part in ``prompt_tokens_details.cached_tokens`` (DeepSeek:
  ``prompt_cache_hit_tokens``, and hit + miss is the prompt when ``prompt_tokens`` is missing);
  reasoning tokens (``completion_tokens_details.reasoning_tokens``) are part of the output.
* **OpenAI responses / Codex** (``input_tokens`` with ``input_tokens_details`` or
  ``cached_input_tokens``): ``input_tokens`` is the whole prompt, cached part included;
  ``output_tokens`` includes ``reasoning_output_tokens`` (or
  ``output_tokens_details.reasoning_tokens``).
* **Anthropic messages** (``input_tokens`` without those): ``input_tokens`` is only the fresh
  part; the whole prompt is it plus ``cache_creation_input_tokens`` (written to the cache, the
  1-hour share in ``cache_creation.ephemeral_1h_input_tokens``) plus ``cache_read_input_tokens``.
  ``server_tool_use.web_search_requests`` counts the searches; ``speed: "fast"`` is fast mode.

Only what the object states is returned (a count it lacks, or holds as something other than a
count, is left out), so a caller can merge several objects of one call.
"""

from __future__ import annotations

from typing import Any

from analyzer.ingest.values import as_dict, as_int


def token_counts(usage: object) -> dict[str, Any]:
    """The token columns (``input_tokens`` = the whole prompt, ``cached_input_tokens``,
    ``cache_write_tokens``, ``cache_write_1h_tokens``, ``output_tokens``, ``reasoning_tokens``,
    ``web_search_requests``) and ``variant`` ('fast') a usage object states."""
    if not isinstance(usage, dict):
        return {}
    if (
        "prompt_tokens" in usage
        or "completion_tokens" in usage
        or "prompt_cache_hit_tokens" in usage
    ):
        out = _openai_chat(usage)
    elif "input_tokens_details" in usage or "cached_input_tokens" in usage:
        out = _openai_responses(usage)
    else:
        out = _anthropic(usage)
    return {k: v for k, v in out.items() if v is not None}


def _openai_chat(usage: dict[str, Any]) -> dict[str, Any]:
    prompt = as_int(usage.get("prompt_tokens"))
    hit = as_int(usage.get("prompt_cache_hit_tokens"))  # DeepSeek
    miss = as_int(usage.get("prompt_cache_miss_tokens"))
    if prompt is None and hit is not None and miss is not None:
        prompt = hit + miss
    cached = as_int(as_dict(usage.get("prompt_tokens_details")).get("cached_tokens"))
    return {
        "input_tokens": prompt,
        "cached_input_tokens": hit if cached is None else cached,
        "output_tokens": as_int(usage.get("completion_tokens")),
        "reasoning_tokens": as_int(
            as_dict(usage.get("completion_tokens_details")).get("reasoning_tokens")
        ),
    }


def _openai_responses(usage: dict[str, Any]) -> dict[str, Any]:
    cached = as_int(usage.get("cached_input_tokens"))
    if cached is None:
        cached = as_int(as_dict(usage.get("input_tokens_details")).get("cached_tokens"))
    reasoning = as_int(usage.get("reasoning_output_tokens"))
    if reasoning is None:
        reasoning = as_int(as_dict(usage.get("output_tokens_details")).get("reasoning_tokens"))
    return {
        "input_tokens": as_int(usage.get("input_tokens")),
        "cached_input_tokens": cached,
        "output_tokens": as_int(usage.get("output_tokens")),
        "reasoning_tokens": reasoning,
    }


def _anthropic(usage: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"output_tokens": as_int(usage.get("output_tokens"))}
    fresh = as_int(usage.get("input_tokens"))
    if fresh is not None:
        write = as_int(usage.get("cache_creation_input_tokens")) or 0
        read = as_int(usage.get("cache_read_input_tokens")) or 0
        out["input_tokens"] = fresh + write + read
        out["cached_input_tokens"] = read
        out["cache_write_tokens"] = write
        detail = as_dict(usage.get("cache_creation"))
        out["cache_write_1h_tokens"] = as_int(detail.get("ephemeral_1h_input_tokens")) or 0
    out["web_search_requests"] = as_int(
        as_dict(usage.get("server_tool_use")).get("web_search_requests")
    )
    if usage.get("speed") == "fast":
        out["variant"] = "fast"
    return out
