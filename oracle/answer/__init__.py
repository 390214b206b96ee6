"""From the retrieved pool to the reply: rerank, pack the context, fit it to the window, prompt,
verify the citations, guard against secrets, and the passages shown without a model."""
