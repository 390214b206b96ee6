"""The index: SQLite (the source of truth) and its schema, the Chroma windows, the embedding model,
the Compendium, annotations, and the ingest that fills them."""
