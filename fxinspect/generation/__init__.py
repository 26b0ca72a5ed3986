"""Generation and serving: prefill and decode, the KV cache, what fits and how fast."""
