"""Retrieval: one module per path (keyword, semantic, entity), the hop along the notes' references
(linked), follow-up expansion, and fusion."""

PATHS = ("keyword", "semantic", "entity")


def path_depth(k: int) -> int:
    """How many results each path gives for a final k: max(2k, k+5), the measured default."""
    return max(2 * k, k + 5)
