"""List prices of the sample's models in December 2025, the month the sample covers.

USD per million tokens, as OpenRouter listed them then (the same figures as the
``genai-prices`` data for provider ``openrouter`` at 2025-12-13). Kept frozen here because the
sample is history: a bill from December carries December's prices, whatever they are today.
Costs are computed in whole nano-dollars (10^-9 USD) so every cost in the sample is an exact
decimal and sums are exact.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    input: float  # USD per million prompt tokens (uncached)
    output: float  # USD per million completion tokens (reasoning included)
    cache_read: float  # USD per million cached prompt tokens

    def nano(self) -> tuple[int, int, int]:
        """Per-token prices in nano-dollars (exact integers for these list prices)."""
        return (
            round(self.input * 1000),
            round(self.output * 1000),
            round(self.cache_read * 1000),
        )


PRICES: dict[str, Price] = {
    "anthropic/claude-opus-4.5": Price(5.00, 25.00, 0.50),
    "anthropic/claude-sonnet-4.5": Price(3.00, 15.00, 0.30),
    "anthropic/claude-haiku-4.5": Price(1.00, 5.00, 0.10),
    "openai/gpt-5": Price(1.25, 10.00, 0.125),
    "openai/gpt-5-mini": Price(0.25, 2.00, 0.025),
    "google/gemini-2.5-flash": Price(0.30, 2.50, 0.075),
    "google/gemini-2.5-pro": Price(1.25, 10.00, 0.31),
    "qwen/qwen3-30b-a3b-thinking-2507": Price(0.08, 0.40, 0.08),
    "meta-llama/llama-3.3-70b-instruct": Price(0.0, 0.0, 0.0),  # the :free variant
}

# Output speed (tokens per second) used for generation_time_ms.
SPEED: dict[str, float] = {
    "anthropic/claude-opus-4.5": 45.0,
    "anthropic/claude-sonnet-4.5": 70.0,
    "anthropic/claude-haiku-4.5": 140.0,
    "openai/gpt-5": 80.0,
    "openai/gpt-5-mini": 120.0,
    "google/gemini-2.5-flash": 180.0,
    "google/gemini-2.5-pro": 90.0,
    "qwen/qwen3-30b-a3b-thinking-2507": 150.0,
    "meta-llama/llama-3.3-70b-instruct": 100.0,
}


def family(model: str) -> str:
    """The provider family, which decides how the raw finish reason is spelled."""
    return model.split("/", 1)[0]
