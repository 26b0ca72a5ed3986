"""Generation and serving: prefill and decode steps, the KV cache, cost curves (issue 41)."""
