"""Notes as text: parse a Markdown file, split it into sessions, chunk it, find its references.
Pure: no I/O, nothing from the layers above."""
