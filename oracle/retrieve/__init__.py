"""Retrieval: one module per path (keyword, semantic, entity), the hop along the notes' references
(linked), follow-up expansion, and fusion."""

PATHS = ("keyword", "semantic", "entity")
